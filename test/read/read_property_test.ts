// Property: for random partitions of both formats in random tiering states (a prefix copied by
// the tier worker, more appended locally, a prefix of the copies evicted), every read by offset
// or timestamp returns exactly the original segments' bytes from the first whole record at or
// after the start, within max_bytes, with the right next offset and source — whether remote
// bytes come straight from the store or through the chunk cache.
import assert from "node:assert/strict";
import { join } from "node:path";
import fc from "fast-check";
import { ChunkCache } from "../../src/cache/mod.ts";
import { OffsetPastEnd } from "../../src/read/errors.ts";
import { readRecords } from "../../src/read/read_records.ts";
import { buildScenario, expectedRead } from "./_scenario.ts";

const scenarioArb = fc.record({
  format: fc.constantFrom("iggy-0.8" as const, "iggy-0.9" as const),
  auto: fc.boolean(),
  before: fc.integer({ min: 0, max: 60 }),
  after: fc.integer({ min: 0, max: 30 }),
  segmentSize: fc.integer({ min: 300, max: 4096 }),
  payloadSize: fc.integer({ min: 0, max: 300 }),
  messagesPerBatch: fc.integer({ min: 1, max: 8 }),
  evict: fc.integer({ min: 0, max: 20 }),
  seed: fc.integer({ min: 0, max: 1_000_000 }),
  partition: fc.integer({ min: 0, max: 3 }),
  /** Remote bytes come straight from the store, or through the chunk cache (tiny chunks). */
  cacheChunk: fc.option(fc.integer({ min: 64, max: 4096 }), { nil: undefined }),
});

const queryArb = fc.record({
  byTimestamp: fc.boolean(),
  /** Position in [0, 1.1) of the partition's offset or timestamp range (past the end included). */
  at: fc.double({ min: 0, max: 1.1, noNaN: true }),
  maxBytes: fc.oneof(
    fc.integer({ min: 1, max: 400 }),
    fc.integer({ min: 400, max: 20_000 }),
  ),
});

Deno.test("reads return the original bytes from the start record, within max_bytes", async () => {
  await fc.assert(
    fc.asyncProperty(scenarioArb, fc.array(queryArb, { minLength: 1, maxLength: 6 }), async (
      o,
      queries,
    ) => {
      const s = await buildScenario({ ...o, configFormat: o.auto ? "auto" : o.format });
      const cache = o.cacheChunk === undefined ? undefined : await ChunkCache.open(s.store, {
        path: join(s.dir, "cache"),
        chunkSize: o.cacheChunk,
        size: 1 << 20,
        diskTotalBytes: 1 << 30,
      });
      try {
        const ctx = s.context(cache ? { reader: cache } : {});
        const last = s.records.at(-1);
        const endOffset = last ? last.lastOffset : 0n;
        const t0 = s.records[0]?.timestamp ?? 0n;
        const t1 = last?.timestamp ?? 0n;
        for (const q of queries) {
          const start = q.byTimestamp
            ? { timestamp: t0 - 2n + BigInt(Math.floor(Number(t1 - t0 + 4n) * q.at)) }
            : { offset: BigInt(Math.floor(Number(endOffset + 1n) * q.at)) };
          const expected = expectedRead(s.records, start, q.maxBytes);
          const what = `${JSON.stringify(start, (_k, v) => String(v))} max ${q.maxBytes}`;
          if (!expected) {
            await assert.rejects(
              readRecords(ctx, { partition: s.ids, ...start, maxBytes: q.maxBytes }),
              OffsetPastEnd,
              what,
            );
            continue;
          }
          const r = await readRecords(ctx, { partition: s.ids, ...start, maxBytes: q.maxBytes });
          assert.equal(r.firstOffset, expected.firstOffset, `first offset, ${what}`);
          assert.equal(r.nextOffset, expected.nextOffset, `next offset, ${what}`);
          assert.equal(r.source, expected.source, `source, ${what}`);
          assert.equal(r.gap, undefined, what);
          assert.equal(r.format, o.format);
          assert.ok(r.bytes.length <= q.maxBytes || r.records === 1, what);
          assert.deepEqual(r.bytes, expected.bytes, `bytes, ${what}`);
        }
      } finally {
        await cache?.close();
        await s.cleanup();
      }
    }),
    { numRuns: 100 },
  );
});
