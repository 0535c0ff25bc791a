// The full check of a sealed segment (verifySegment): good segments pass with the bounds the
// broker derives, every byte seen once in order whatever the read window; damaged ones fail
// with the file and the byte the damage is at.
import assert from "node:assert/strict";
import fc from "fast-check";
import { readFile, truncate } from "node:fs/promises";
import { readSegmentBounds } from "../../src/format/bounds.ts";
import { type GeneratedSegment, generatePartition } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { verifySegment } from "../../src/format/verify.ts";
import { initHashes, xxh3_128 } from "../../src/hash.ts";
import { concatBytes } from "../../src/base/bytes.ts";
import { tempDir } from "../_util.ts";
import { DAMAGES, damageSegment, recordsOf } from "./_damage.ts";
import { assertRejectsFormat } from "./_fixtures.ts";

await initHashes();
const FORMATS: readonly FormatName[] = ["iggy-0.8", "iggy-0.9"];

/** A temporary directory removed when the test's scope ends. */
async function tmpDir(): Promise<{ path: string } & AsyncDisposable> {
  const t = await tempDir("tierd-verify");
  return { path: t.path, [Symbol.asyncDispose]: t.cleanup };
}

async function segments(dir: string, format: FormatName): Promise<GeneratedSegment[]> {
  return await generatePartition({
    format,
    dataDir: dir,
    stream: 0,
    topic: 0,
    partition: 0,
    messages: 300,
    segmentSize: 16 * 1024,
    payloadSize: 100,
  });
}

for (const format of FORMATS) {
  Deno.test(`${format}: a good segment verifies, with its bounds, every byte seen once in order`, async () => {
    await using tmp = await tmpDir();
    const segs = await segments(tmp.path, format);
    for (const seg of segs.slice(0, -1)) {
      const bounds = await readSegmentBounds(seg.logPath, seg.indexPath, format, seg.startOffset);
      // Windows smaller than a 0.9 batch too: records cut by a window are read whole.
      for (const windowSize of [4 << 20, 1000, 97]) {
        const seen: Uint8Array[] = [];
        const v = await verifySegment(seg.logPath, seg.indexPath, format, seg.startOffset, {
          windowSize,
          onBytes: (b) => void seen.push(b.slice()),
        });
        assert.deepEqual(
          {
            endOffset: v.endOffset,
            startTimestamp: v.startTimestamp,
            endTimestamp: v.endTimestamp,
            maxTimestamp: v.maxTimestamp,
            size: v.size,
            messageCount: v.messageCount,
          },
          {
            endOffset: bounds.endOffset,
            startTimestamp: bounds.startTimestamp,
            endTimestamp: bounds.endTimestamp,
            maxTimestamp: bounds.maxTimestamp,
            size: bounds.size,
            messageCount: bounds.messageCount,
          },
        );
        assert.equal(v.records, (await recordsOf(seg, format)).length);
        const log = new Uint8Array(await readFile(seg.logPath));
        assert.equal(xxh3_128(concatBytes(seen)), xxh3_128(log), `window ${windowSize}`);
      }
    }
  });

  for (const damage of DAMAGES) {
    Deno.test(`${format}: ${damage} in a middle record is found, with its file and byte`, async () => {
      await using tmp = await tmpDir();
      const [seg] = await segments(tmp.path, format);
      const site = await damageSegment(seg, format, damage);
      for (const windowSize of [4 << 20, 1000]) {
        await assertRejectsFormat(
          verifySegment(seg.logPath, seg.indexPath, format, seg.startOffset, { windowSize }),
          site,
        );
      }
    });
  }

  Deno.test(`${format}: a segment cut mid-record, or shorter than measured, fails at the cut, naming the log`, async () => {
    await using tmp = await tmpDir();
    const [seg] = await segments(tmp.path, format);
    const records = await recordsOf(seg, format);
    const last = records.at(-1)!;
    await assertRejectsFormat(
      verifySegment(seg.logPath, seg.indexPath, format, seg.startOffset, {
        size: seg.size + 10,
      }),
      { code: "truncated", file: seg.logPath, position: seg.size },
    );
    await truncate(seg.logPath, seg.size - 5);
    // Named at the cut in the log, not by the index entries now past its end.
    await assertRejectsFormat(
      verifySegment(seg.logPath, seg.indexPath, format, seg.startOffset),
      { code: "straddles_eof", file: seg.logPath, position: last.position },
    );
  });
}

Deno.test("verify: any record sizes and any read window give the bounds, every byte once in order, and damage where it is", async () => {
  await using tmp = await tmpDir();
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...FORMATS),
      fc.oneof(fc.integer({ min: 1, max: 99 }), fc.integer({ min: 100, max: 3000 })), // payload bytes
      fc.integer({ min: 1, max: 12 }), // messages per 0.9 batch
      fc.oneof(fc.integer({ min: 1, max: 600 }), fc.integer({ min: 600, max: 40_000 })),
      fc.constantFrom(...DAMAGES),
      async (format, payloadSize, messagesPerBatch, windowSize, damage) => {
        const dir = `${tmp.path}/${run++}`;
        const [seg] = await generatePartition({
          format,
          dataDir: dir,
          stream: 0,
          topic: 0,
          partition: 0,
          messages: 60,
          segmentSize: 1 << 20,
          payloadSize,
          messagesPerBatch,
          seed: run,
        });
        const bounds = await readSegmentBounds(seg.logPath, seg.indexPath, format, seg.startOffset);
        const seen: Uint8Array[] = [];
        const v = await verifySegment(seg.logPath, seg.indexPath, format, seg.startOffset, {
          windowSize,
          onBytes: (b) => void seen.push(b.slice()),
        });
        assert.equal(v.endOffset, bounds.endOffset);
        assert.equal(v.size, bounds.size);
        assert.equal(v.records, (await recordsOf(seg, format)).length);
        assert.deepEqual(concatBytes(seen), new Uint8Array(await readFile(seg.logPath)));

        // The damages are placed for payloads of 100 bytes or more (./_damage.ts); a smaller
        // message makes another check fail first.
        if (payloadSize < 100) return;
        const site = await damageSegment(seg, format, damage);
        await assertRejectsFormat(
          verifySegment(seg.logPath, seg.indexPath, format, seg.startOffset, { windowSize }),
          site,
        );
      },
    ),
    { numRuns: 60 },
  );
});
