// The column table of a generation's segment records reads back exactly the records set into
// it — every field, optional ones present or absent as they were, u64 and u128 extremes — in
// the order a Map would give, and a clone is independent of its original.
import assert from "node:assert/strict";
import fc from "fast-check";
import { SEGMENT_STATES, type SegmentRecord } from "../../src/state/segment_record.ts";
import { SegmentTable } from "../../src/state/segment_table.ts";

const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
const u128 = fc.bigInt({ min: 0n, max: (1n << 128n) - 1n });

const record = (generation: bigint) =>
  fc.record({
    start: fc.oneof(fc.bigInt({ min: 0n, max: 40n }), u64),
    generation: fc.constant(generation),
    state: fc.constantFrom(...SEGMENT_STATES),
    since: fc.integer({ min: 0, max: 2 ** 45 }),
    evicted: fc.boolean(),
    meta: fc.record({
      endOffset: u64,
      size: fc.nat(),
      indexSize: fc.nat(),
      startTimestamp: u64,
      endTimestamp: u64,
      maxTimestamp: u64,
      checksum: u128,
    }),
    uploadId: fc.string(),
    multipartKey: fc.string(),
    danglingReason: fc.string(),
    deleteCause: fc.constantFrom("retention", "dangling", "purge"),
    lostEndOffset: u64,
  }, { requiredKeys: ["start", "generation", "state", "since", "evicted"] }) as fc.Arbitrary<
    SegmentRecord
  >;

Deno.test("a segment table reads back what a Map of the same records holds", () => {
  fc.assert(
    fc.property(fc.array(record(3n), { maxLength: 60 }), (records) => {
      const table = new SegmentTable(3n);
      const map = new Map<bigint, SegmentRecord>();
      for (const r of records) {
        table.set(r);
        map.set(r.start, { ...r, ...(r.meta && { meta: { ...r.meta } }) } as SegmentRecord); // plain objects
      }
      assert.equal(table.size, map.size);
      assert.deepStrictEqual([...table.entries()], [...map.entries()]);
      assert.deepStrictEqual([...table.keys()], [...map.keys()]);
      for (const r of records) {
        assert.ok(table.has(r.start));
        assert.deepStrictEqual(table.get(r.start), map.get(r.start));
      }
      assert.equal(table.get(1n << 63n), map.get(1n << 63n));
    }),
    { numRuns: 300 },
  );
});

Deno.test("a segment table set in start order, as a journal sets it, finds every record", () => {
  // In start order the table keeps no index of rows (it searches the start column); one record
  // out of order makes it build one. Both must find the same records.
  fc.assert(
    fc.property(
      fc.uniqueArray(u64, { maxLength: 80 }),
      fc.option(u64, { nil: undefined }),
      record(2n),
      (starts, late, template) => {
        const sorted = [...starts].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        const table = new SegmentTable(2n);
        const map = new Map<bigint, SegmentRecord>();
        const put = (start: bigint) => {
          const r = {
            ...template,
            start,
            ...(template.meta && { meta: { ...template.meta } }), // plain objects
          } as SegmentRecord;
          table.set(r);
          map.set(start, r);
        };
        sorted.forEach(put);
        if (late !== undefined) put(late);
        assert.deepStrictEqual([...table.keys()], [...map.keys()]);
        for (const start of [...sorted, ...(late === undefined ? [] : [late])]) {
          assert.deepStrictEqual(table.get(start), map.get(start));
        }
        for (const probe of [0n, (1n << 64n) - 1n, ...sorted.map((s) => s + 1n)]) {
          assert.equal(table.has(probe), map.has(probe));
        }
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("a cloned segment table changes apart from its original", () => {
  fc.assert(
    fc.property(
      fc.array(record(0n), { minLength: 1, maxLength: 20 }),
      record(0n),
      (records, extra) => {
        const table = SegmentTable.of(0n, records);
        const before = [...table.values()];
        const copy = table.clone();
        copy.set(extra);
        const { meta: _meta, deleteCause: _cause, ...first } = records[0];
        copy.set({ ...first, state: "DANGLING", danglingReason: "changed" });
        assert.deepStrictEqual([...table.values()], before);
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("a segment table refuses records of another generation and values out of range", () => {
  const t = new SegmentTable(1n);
  const r: SegmentRecord = {
    start: 5n,
    generation: 1n,
    state: "COPY_SEGMENT_STARTED",
    since: 1,
    evicted: false,
  };
  assert.throws(() => t.set({ ...r, generation: 2n }), /generation 2 in the table of generation 1/);
  assert.throws(() => t.set({ ...r, start: 1n << 64n }), /start offset .* is not a u64/);
  assert.equal(t.size, 0);
});
