// Index seeks: a dense 0.8 index names the record of an offset directly; a sparse 0.9 index
// gives the batch at or below it; timestamp seeks start at the last record before the time.
import assert from "node:assert/strict";
import fc from "fast-check";
import { codecFor } from "../../src/format/codecs.ts";
import type { IndexEntry } from "../../src/format/types.ts";
import { join } from "node:path";
import {
  parseSegmentIndex,
  readIndexFile,
  seekOffset,
  seekTimestamp,
} from "../../src/read/segment_index.ts";

/** Entries of records with random sizes and non-decreasing timestamps. */
const recordsArb = fc.array(
  fc.record({
    size: fc.integer({ min: 64, max: 500 }),
    messages: fc.integer({ min: 1, max: 5 }),
    tsStep: fc.integer({ min: 0, max: 3 }),
  }),
  { minLength: 1, maxLength: 40 },
);

function layout(
  records: { size: number; messages: number; tsStep: number }[],
  start: bigint,
  dense: boolean,
) {
  const entries: IndexEntry[] = [];
  let position = 0;
  let offset = start;
  let timestamp = 1000n;
  for (const r of records) {
    timestamp += BigInt(r.tsStep);
    entries.push({ offset, position, timestamp });
    position += r.size;
    offset += dense ? 1n : BigInt(r.messages);
  }
  return { entries, logSize: position, endOffset: offset - 1n };
}

for (const format of ["iggy-0.8", "iggy-0.9"] as const) {
  const dense = format === "iggy-0.8";
  Deno.test(`${format}: seeks land on the right record for every offset and timestamp`, () => {
    fc.assert(
      fc.property(recordsArb, fc.bigInt({ min: 0n, max: 1n << 40n }), (records, start) => {
        const codec = codecFor(format);
        const { entries, logSize, endOffset } = layout(records, start, dense);
        const raw = codec.encodeIndex(entries, { startOffset: start, logSize });
        const index = parseSegmentIndex(codec, raw, { file: "i", startOffset: start, logSize });
        assert.equal(index.count, entries.length);
        assert.deepEqual(index.recordStarts(), entries.map((e) => e.position));
        for (let offset = start; offset <= endOffset + 2n; offset++) {
          const hint = seekOffset(index, start, offset);
          const holder = entries.findLast((e) => e.offset <= offset)!;
          assert.deepEqual(hint, { position: holder.position, offset: holder.offset });
        }
        for (const e of entries) {
          const hint = seekTimestamp(index, start, e.timestamp);
          const before = entries.findLast((x) => x.timestamp < e.timestamp);
          assert.deepEqual(
            hint,
            before ? { position: before.position, offset: before.offset } : {
              position: 0,
              offset: start,
            },
          );
        }
        assert.deepEqual(seekOffset(index, start, start - 1n), { position: 0, offset: start });
      }),
      { numRuns: 200 },
    );
  });
}

Deno.test("an index file's expected bytes are read: on the event loop when small, never more than expected, undefined when short or missing", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, "00000000000000000000.index");
    const bytes = crypto.getRandomValues(new Uint8Array(4096));
    await Deno.writeFile(path, bytes);
    // Within the limit the bytes are there before any I/O completion is delivered: no thread hop.
    let now: Uint8Array | undefined;
    void readIndexFile(path, bytes.length).then((b) => now = b);
    for (let i = 0; i < 3; i++) await Promise.resolve();
    assert.ok(now, "read before any I/O completion");
    assert.deepEqual(new Uint8Array(now), bytes);
    // Above it, the same bytes by the runtime's file thread pool.
    let pooled: Uint8Array | undefined;
    const later = readIndexFile(path, bytes.length, 1024).then((b) => pooled = b);
    for (let i = 0; i < 3; i++) await Promise.resolve();
    assert.equal(pooled, undefined);
    assert.deepEqual(new Uint8Array((await later)!), bytes);
    // A file that grew since its size was taken gives the bytes expected, and no more.
    for (const readNowMax of [undefined, 0]) {
      const head = await readIndexFile(path, 100, readNowMax);
      assert.deepEqual(new Uint8Array(head!), bytes.subarray(0, 100));
      assert.equal(await readIndexFile(path, bytes.length + 1, readNowMax), undefined, "short");
    }
    assert.equal(await readIndexFile(join(dir, "missing.index"), 16), undefined);
    assert.equal(await readIndexFile(join(dir, "missing.index"), 16, 0), undefined);
    assert.equal(await readIndexFile(dir, 16), undefined, "a directory is not an index");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
