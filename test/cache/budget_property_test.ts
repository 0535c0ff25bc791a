// The budget under load: random batches of concurrent reads over several objects, with tiny
// chunks, a tiny budget, readahead and cold readers, never exceed the bytes or the file count,
// and every read returns exactly the object's bytes.
import assert from "node:assert/strict";
import fc from "fast-check";
import { SimStore } from "../../providers/sim/store.ts";
import { chunkFileSize } from "../../src/cache/chunk_format.ts";
import { CacheFullError } from "../../src/cache/types.ts";
import { tempDir } from "../_util.ts";
import { chunkFilesOnDisk, openCache, putObject, type TestObject } from "./_helpers.ts";

const scenario = fc.record({
  sizes: fc.array(fc.integer({ min: 1, max: 100_000 }), { minLength: 1, maxLength: 4 }),
  recordSizes: fc.array(fc.integer({ min: 50, max: 6000 }), { minLength: 1, maxLength: 5 }),
  chunkSize: fc.constantFrom(4096, 8192, 16384),
  budgetChunks: fc.integer({ min: 1, max: 12 }),
  maxObjects: fc.integer({ min: 1, max: 10 }),
  concurrency: fc.integer({ min: 1, max: 3 }),
  readaheadMax: fc.integer({ min: 0, max: 4 }),
  lowWatermark: fc.integer({ min: 10, max: 95 }),
  trimInterval: fc.constantFrom(0, 1e9),
  batches: fc.array(
    fc.array(
      fc.record({
        obj: fc.nat(),
        start: fc.nat(),
        length: fc.integer({ min: 0, max: 40_000 }),
        reader: fc.constantFrom(undefined, "r1", "r2", "r3"),
      }),
      { minLength: 1, maxLength: 5 },
    ),
    { minLength: 1, maxLength: 8 },
  ),
});

Deno.test("the budget is never exceeded and reads return the object's bytes", async () => {
  await fc.assert(
    fc.asyncProperty(scenario, async (s) => {
      const dir = await tempDir("cache-prop");
      const sim = new SimStore();
      const objects: TestObject[] = [];
      for (const [i, size] of s.sizes.entries()) {
        objects.push(
          await putObject(sim, `s/t/p/${String(i).padStart(20, "0")}.log`, size, {
            seed: i + 1,
            recordSize: s.recordSizes,
          }),
        );
      }
      const maxFile = chunkFileSize(2 * s.chunkSize);
      const budget = s.budgetChunks * maxFile;
      let violations = 0;
      const cache = await openCache(sim, dir.path, {
        chunkSize: s.chunkSize,
        size: budget,
        maxObjects: s.maxObjects,
        fetchConcurrency: s.concurrency,
        readaheadMax: s.readaheadMax,
        lowWatermarkPercent: s.lowWatermark,
        trimMinInterval: s.trimInterval,
        stats: {
          usage(u) {
            if (
              u.bytes + u.reservedBytes > budget || u.objects + u.reservedObjects > s.maxObjects
            ) {
              violations++;
            }
          },
        },
      });
      // Every in-flight fetch holds one reservation of at most one maximal chunk, and there are at
      // most `concurrency` of them: with that much room no read can ever fail.
      const roomy = s.budgetChunks >= s.concurrency && s.maxObjects >= s.concurrency;
      try {
        for (const batch of s.batches) {
          const results = await Promise.allSettled(batch.map((r) => {
            const obj = objects[r.obj % objects.length];
            const start = r.start % (obj.src.size + 1);
            return cache.read(obj.src, start, r.length, { readerId: r.reader })
              .then((bytes) => ({ bytes, expected: obj.bytes.slice(start, start + r.length) }));
          }));
          for (const result of results) {
            if (result.status === "fulfilled") {
              assert.deepEqual(result.value.bytes, result.value.expected);
            } else {
              assert.ok(result.reason instanceof CacheFullError, String(result.reason));
              assert.ok(!roomy, "a roomy cache never fails a read");
            }
          }
          const u = cache.stats();
          assert.ok(u.bytes + u.reservedBytes <= budget);
          assert.ok(u.objects + u.reservedObjects <= s.maxObjects);
        }
        await cache.idle();
        assert.equal(violations, 0);
        const disk = await chunkFilesOnDisk(dir.path);
        const u = cache.stats();
        assert.ok(disk.bytes <= budget && disk.count <= s.maxObjects);
        assert.deepEqual(
          [disk.bytes, disk.count],
          [u.bytes, u.objects],
          "accounting matches the disk",
        );
        assert.deepEqual([u.reservedBytes, u.reservedObjects], [0, 0]);
      } finally {
        await cache.close();
        await dir.cleanup();
      }
    }),
    { numRuns: 120 },
  );
});
