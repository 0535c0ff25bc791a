// The chunk cache heals (issue 11, item 3): a GET answer corrupted in transit is caught by the
// read path's record checksums, evicted and fetched once more, so it never poisons the cache —
// whether it is caught at once or only after a restart — and only a second failure, from a
// fresh GET, answers "remote data corrupt".
import assert from "node:assert/strict";
import { join } from "node:path";
import { chunkFilesOnDisk } from "../cache/_helpers.ts";
import { ChunkCache } from "../../src/cache/chunk_cache.ts";
import { SegmentCorrupt } from "../../src/read/errors.ts";
import { readRecords } from "../../src/read/read_records.ts";
import { corruptingStore } from "./_corrupting_store.ts";
import { buildScenario, expectedRead, type Scenario } from "./_scenario.ts";

const FORMATS = ["iggy-0.8", "iggy-0.9"] as const;
const WHOLE = 1 << 20;

function openCache(s: Scenario, store: ReturnType<typeof corruptingStore>["store"]) {
  return ChunkCache.open(store, {
    path: join(s.dir, "cache"),
    chunkSize: 2048,
    size: 1 << 30,
    sizePercent: 100,
    diskTotalBytes: 2 ** 40,
    persistInterval: Infinity,
    firstFetch: false, // every byte read comes from a chunk GET
  });
}

for (const format of FORMATS) {
  Deno.test(`${format}: one corrupted GET answer is evicted and fetched again; the read and the restarted cache are right`, async () => {
    const s = await buildScenario({
      format,
      before: 60,
      after: 0,
      segmentSize: 4096,
      payloadSize: 64,
      evict: 100,
    });
    const faults = corruptingStore(s.store);
    let cache = await openCache(s, faults.store);
    try {
      const read = () =>
        readRecords(s.context({ reader: cache }), {
          partition: s.ids,
          offset: 0n,
          maxBytes: WHOLE,
        });
      const want = expectedRead(s.records, { offset: 0n }, WHOLE)!;
      faults.corruptNext();
      const r = await read();
      assert.notEqual(r.source, "local");
      assert.deepEqual(r.bytes, want.bytes, "the read itself is answered right");
      assert.equal(faults.corrupted, 1);
      const evicted = cache.stats().evictions.corrupt;
      assert.ok(evicted >= 1, "the bad chunk (and those read with it) were evicted");
      const gets = faults.gets;
      assert.deepEqual((await read()).bytes, want.bytes);
      assert.equal(faults.gets, gets, "every chunk resident, the refetched one included");

      await cache.close();
      cache = await openCache(s, faults.store);
      assert.deepEqual((await read()).bytes, want.bytes, "after a restart");
      assert.equal(faults.gets, gets, "served from disk: the corrupted transfer did not survive");
    } finally {
      await cache.close();
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a corrupted chunk that lands on disk unread is caught after a restart and refetched`, async () => {
    const s = await buildScenario({
      format,
      before: 60,
      after: 0,
      segmentSize: 4096,
      payloadSize: 64,
      evict: 100,
    });
    const faults = corruptingStore(s.store);
    let cache = await openCache(s, faults.store);
    try {
      const read = (maxBytes: number) =>
        readRecords(s.context({ reader: cache }), { partition: s.ids, offset: 0n, maxBytes });
      // A one-record read takes the first chunk whole but checks only the record it returns:
      // the corrupted tail of the chunk goes to disk unnoticed.
      faults.corruptNext();
      const first = await read(1);
      assert.equal(first.records, 1);
      assert.equal(faults.corrupted, 1);
      await cache.close();

      cache = await openCache(s, faults.store);
      const before = faults.gets;
      const want = expectedRead(s.records, { offset: 0n }, WHOLE)!;
      assert.deepEqual((await read(WHOLE)).bytes, want.bytes);
      assert.ok(cache.stats().evictions.corrupt >= 1, "caught on its first read after the restart");
      const gets = faults.gets;
      assert.ok(gets > before);
      await cache.close();

      cache = await openCache(s, faults.store);
      assert.deepEqual((await read(WHOLE)).bytes, want.bytes);
      assert.equal(faults.gets, gets, "healed: nothing is fetched again");
    } finally {
      await cache.close();
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a store that keeps answering corrupted bytes: a second failure, from a fresh GET, answers remote_data_corrupt`, async () => {
    const s = await buildScenario({
      format,
      before: 60,
      after: 0,
      segmentSize: 4096,
      payloadSize: 64,
      evict: 100,
    });
    const faults = corruptingStore(s.store);
    const cache = await openCache(s, faults.store);
    try {
      faults.corruptAll(true);
      const read = () =>
        readRecords(s.context({ reader: cache }), {
          partition: s.ids,
          offset: 0n,
          maxBytes: WHOLE,
        });
      await assert.rejects(
        read(),
        (err: unknown) => err instanceof SegmentCorrupt && err.code === "remote_data_corrupt",
      );
      await cache.idle();
      // The chunk the answer failed on was evicted, fetched fresh, failed again, evicted again;
      // the chunks the walk fetched for the rest of the answer were dropped unread with it.
      assert.ok(cache.stats().evictions.corrupt >= 2, `${cache.stats().evictions.corrupt}`);
      assert.equal(cache.stats().evictions.corrupt, faults.gets, "every bad answer evicted");
      assert.equal((await chunkFilesOnDisk(join(s.dir, "cache"))).count, 0, "nothing bad kept");

      faults.corruptAll(false);
      const want = expectedRead(s.records, { offset: 0n }, WHOLE)!;
      const r = await read();
      assert.deepEqual(r.bytes, want.bytes, "the store healed: the next read is right");
      // Bad chunks the failed read left unread were caught as they were read: nothing bad kept.
      await cache.idle();
      faults.corruptAll(true);
      const gets = faults.gets;
      assert.deepEqual((await read()).bytes, want.bytes, "answered from good chunks alone");
      assert.equal(faults.gets, gets, "no GET: every chunk kept is good");
    } finally {
      await cache.close();
      await s.cleanup();
    }
  });
}
