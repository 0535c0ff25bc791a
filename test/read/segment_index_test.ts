// Index seeks: a dense 0.8 index names the record of an offset directly; a sparse 0.9 index
// gives the batch at or below it; timestamp seeks start at the last record before the time.
import assert from "node:assert/strict";
import fc from "fast-check";
import { codecFor } from "../../src/format/codecs.ts";
import type { IndexEntry } from "../../src/format/types.ts";
import { parseSegmentIndex, seekOffset, seekTimestamp } from "../../src/read/segment_index.ts";

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
