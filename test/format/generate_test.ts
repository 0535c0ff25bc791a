// The generator writes partitions the broker would accept: valid, contiguous, rotated the way
// Iggy rotates, with bounds readSegmentBounds agrees with — and the same bytes for the same seed.
import assert from "node:assert/strict";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { readSegmentBounds } from "../../src/format/bounds.ts";
import { codecFor } from "../../src/format/codecs.ts";
import {
  appendMessages,
  type GeneratedSegment,
  type GenerateOptions,
  generatePartition,
  partitionDir,
} from "../../src/format/generate.ts";
import type { FormatName, SegmentBounds } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { tempDir } from "../_util.ts";
import { all } from "./_fixtures.ts";

await initHashes();
const FORMATS: FormatName[] = ["iggy-0.8", "iggy-0.9"];

function boundsOf(s: GeneratedSegment): SegmentBounds {
  const { logPath: _log, indexPath: _index, ...bounds } = s;
  return bounds;
}

/**
 * Checks a written partition end to end: files on disk, bounds, checksums, offsets, index,
 * rotation, and returns the total number of messages found.
 */
async function checkPartition(
  o: GenerateOptions,
  segments: GeneratedSegment[],
): Promise<number> {
  const codec = codecFor(o.format);
  const dir = partitionDir(o.dataDir, o);
  const names = (await readdir(dir)).sort();
  assert.deepEqual(
    names,
    segments.flatMap((s) => {
      const stem = s.startOffset.toString().padStart(20, "0");
      return [`${stem}.index`, `${stem}.log`];
    }).sort(),
  );
  let expectedStart = o.startOffset ?? 0n;
  let lastTimestamp = -1n;
  let total = 0;
  for (const [i, s] of segments.entries()) {
    assert.equal(s.startOffset, expectedStart, "segments are contiguous");
    const bounds = await readSegmentBounds(s.logPath, s.indexPath, o.format, s.startOffset);
    assert.deepEqual(bounds, boundsOf(s));
    const log = new Uint8Array(await readFile(s.logPath));
    const index = new Uint8Array(await readFile(s.indexPath));
    assert.equal(log.length, s.size);
    assert.equal(index.length, s.indexSize);
    const records = all(codec.walk(log, { file: s.logPath, startOffset: s.startOffset }));
    const entries = codec.parseIndex(index, {
      file: s.indexPath,
      startOffset: s.startOffset,
      logSize: log.length,
    });
    // One index entry per record (dense per message for 0.8, per batch for 0.9).
    assert.deepEqual(
      entries,
      records.map((r) => ({ offset: r.firstOffset, position: r.position, timestamp: r.timestamp })),
    );
    for (const r of records) {
      assert.ok(r.timestamp > lastTimestamp, "server timestamps strictly increase");
      lastTimestamp = r.timestamp;
      if (o.format === "iggy-0.9") assert.ok(r.messageCount <= (o.messagesPerBatch ?? 8));
      for (const m of codec.messages(log, r, s.logPath)) {
        assert.equal(m.payload.length, o.payloadSize ?? 256);
        assert.ok(m.id !== 0n);
        assert.ok(m.originTimestamp < m.timestamp);
      }
    }
    const sealed = i < segments.length - 1;
    if (sealed) {
      // Sealed once it reached segmentSize: it overshoots by less than its last record.
      assert.ok(s.size >= o.segmentSize);
      assert.ok(s.size - records.at(-1)!.size < o.segmentSize);
    } else {
      assert.ok(s.size < o.segmentSize || s.messageCount === 0n, "the active segment is not full");
    }
    total += records.reduce((n, r) => n + r.messageCount, 0);
    expectedStart = s.endOffset + 1n;
  }
  return total;
}

const optionsArb = fc.record({
  format: fc.constantFrom(...FORMATS),
  messages: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 120 })),
  segmentSize: fc.oneof(fc.integer({ min: 1, max: 300 }), fc.integer({ min: 300, max: 20_000 })),
  payloadSize: fc.integer({ min: 0, max: 300 }),
  seed: fc.nat(),
  startOffset: fc.oneof(fc.constant(0n), fc.bigInt({ min: 1n, max: 1n << 40n })),
  messagesPerBatch: fc.integer({ min: 1, max: 12 }),
  partition: fc.nat(1000),
});

Deno.test("generated partitions: bounds match, every segment walks and verifies", async () => {
  const dir = await tempDir("tierd-gen");
  let run = 0;
  try {
    await fc.assert(
      fc.asyncProperty(optionsArb, async (opts) => {
        const o: GenerateOptions = {
          ...opts,
          dataDir: join(dir.path, String(run++)),
          stream: 1,
          topic: 2,
        };
        const seen: GeneratedSegment[] = [];
        const segments = await generatePartition({ ...o, onSegment: (s) => seen.push(s) });
        assert.deepEqual(seen, segments);
        assert.equal(await checkPartition(o, segments), o.messages);
      }),
      { numRuns: 200 },
    );
  } finally {
    await dir.cleanup();
  }
});

Deno.test("a segment that fills up exactly is followed by an empty active segment", async () => {
  const dir = await tempDir("tierd-gen");
  try {
    // 0.8 records are 64 + 16 bytes (offset 0 also carries a 21-byte header blob).
    const o = {
      format: "iggy-0.8" as const,
      dataDir: dir.path,
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 3,
      segmentSize: 101 + 80 * 2,
      payloadSize: 16,
    };
    const segments = await generatePartition(o);
    assert.deepEqual(segments.map((s) => [s.startOffset, s.endOffset, s.size]), [
      [0n, 2n, 261],
      [3n, 2n, 0],
    ]);
    assert.equal(await checkPartition(o, segments), 3);
  } finally {
    await dir.cleanup();
  }
});

Deno.test("no messages: one empty segment, as the broker creates for a new partition", async () => {
  const dir = await tempDir("tierd-gen");
  try {
    const segments = await generatePartition({
      format: "iggy-0.9",
      dataDir: dir.path,
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 0,
      segmentSize: 1000,
      startOffset: 42n,
    });
    assert.equal(segments.length, 1);
    assert.deepEqual(boundsOf(segments[0]), {
      startOffset: 42n,
      endOffset: 41n,
      startTimestamp: 0n,
      endTimestamp: 0n,
      maxTimestamp: 0n,
      size: 0,
      indexSize: 0,
      messageCount: 0n,
    });
  } finally {
    await dir.cleanup();
  }
});

for (const format of FORMATS) {
  Deno.test(`${format}: the same seed gives the same bytes, another seed different ones`, async () => {
    const dir = await tempDir("tierd-gen");
    try {
      const write = async (name: string, seed: number) => {
        const segments = await generatePartition({
          format,
          dataDir: join(dir.path, name),
          stream: 3,
          topic: 4,
          partition: 5,
          messages: 300,
          segmentSize: 8192,
          payloadSize: 40,
          seed,
        });
        const files: Uint8Array[] = [];
        for (const s of segments) {
          files.push(await readFile(s.logPath), await readFile(s.indexPath));
        }
        return { files, segments: segments.map(boundsOf) };
      };
      const a = await write("a", 7);
      const b = await write("b", 7);
      const c = await write("c", 8);
      assert.ok(a.segments.length > 2);
      assert.deepEqual(b, a);
      assert.notDeepEqual(c.files, a.files);
    } finally {
      await dir.cleanup();
    }
  });

  Deno.test(`${format}: appendMessages grows the active segment and rotates`, async () => {
    const dir = await tempDir("tierd-gen");
    try {
      const o = {
        format,
        dataDir: dir.path,
        stream: 0,
        topic: 1,
        partition: 2,
        segmentSize: 4000,
        payloadSize: 50,
        messagesPerBatch: 3,
      };
      const first = await generatePartition({ ...o, messages: 100 });
      const grown = await appendMessages({ ...o, messages: 77 });
      assert.equal(grown[0].startOffset, first.at(-1)!.startOffset, "continues the active segment");
      const all = [...first.slice(0, -1), ...grown];
      assert.equal(await checkPartition({ ...o, messages: 177 }, all), 177);
      // Appending to a partition that does not exist yet starts one.
      const fresh = await appendMessages({ ...o, partition: 9, messages: 5 });
      assert.equal(await checkPartition({ ...o, partition: 9, messages: 5 }, fresh), 5);
    } finally {
      await dir.cleanup();
    }
  });
}

Deno.test("the generator reuses the broker's empty segment files but never overwrites data", async () => {
  const dir = await tempDir("tierd-gen");
  try {
    const o = {
      format: "iggy-0.9" as const,
      dataDir: dir.path,
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 10,
      segmentSize: 1 << 20,
    };
    const pdir = partitionDir(dir.path, o);
    await generatePartition({ ...o, messages: 0 }); // what partition creation leaves behind
    const segments = await generatePartition(o);
    assert.equal(segments[0].messageCount, 10n);
    await assert.rejects(generatePartition(o), /already exists and is not empty/);
    await writeFile(join(pdir, "00000000000000000000.log"), "x");
    await assert.rejects(generatePartition(o), /never overwrites/);
  } finally {
    await dir.cleanup();
  }
});

Deno.test("invalid generator options are refused", async () => {
  const base = {
    format: "iggy-0.8" as const,
    dataDir: "/nonexistent",
    stream: 0,
    topic: 0,
    partition: 0,
    messages: 1,
    segmentSize: 100,
  };
  await assert.rejects(generatePartition({ ...base, segmentSize: 0 }), RangeError);
  await assert.rejects(generatePartition({ ...base, messages: -1 }), RangeError);
  await assert.rejects(generatePartition({ ...base, messagesPerBatch: 0 }), RangeError);
  await assert.rejects(generatePartition({ ...base, payloadSize: 1.5 }), RangeError);
});
