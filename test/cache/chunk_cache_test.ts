// The chunk cache end to end on a temp directory and the in-memory SimStore: single flight,
// restarts, cold-reader isolation, corruption, readahead, bandwidth and boot cleanup.
import assert from "node:assert/strict";
import { mkdir, open, readFile, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { decorateStore } from "../../providers/decorate.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { ChunkCache } from "../../src/cache/chunk_cache.ts";
import {
  chunkFileSize,
  decodeChunkHeader,
  encodeChunkHeader,
} from "../../src/cache/chunk_format.ts";
import { CacheTimeoutError } from "../../src/cache/types.ts";
import { FakeClock } from "../_fake_clock.ts";
import { tempDir } from "../_util.ts";
import { corruptingStore } from "../read/_corrupting_store.ts";
import { chunkFilesOnDisk, chunksBudget, filesUnder, openCache, putObject } from "./_helpers.ts";

const KiB = 1024;

Deno.test("two concurrent readers of one cold chunk cause one GET", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore({ faults: { latencyMs: [5, 5] } });
  const obj = await putObject(sim, "p/obj.log", 64 * KiB);
  const cache = await openCache(sim, dir.path, { chunkSize: 16 * KiB });
  try {
    const [a, b] = await Promise.all([
      cache.read(obj.src, 100, 1000),
      cache.read(obj.src, 5000, 3000, { readerId: "other" }),
    ]);
    assert.deepEqual(a, obj.bytes.slice(100, 1100));
    assert.deepEqual(b, obj.bytes.slice(5000, 8000));
    assert.equal(sim.requestCount("get"), 1);
    await cache.idle();
    assert.deepEqual(await cache.read(obj.src, 0, 16 * KiB), obj.bytes.slice(0, 16 * KiB));
    assert.equal(sim.requestCount("get"), 1, "the chunk is resident now");
    const s = cache.stats();
    assert.deepEqual([s.hits, s.misses], [1, 2]);
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("a cold read of a big chunk answers from an exact-range first fetch; the chunk is one more GET", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore({ faults: { latencyMs: [5, 5] } });
  const obj = await putObject(sim, "p/big.log", 3 * 1024 * KiB);
  const cache = await openCache(sim, dir.path, { chunkSize: 1024 * KiB, readaheadMax: 0 });
  try {
    const reads = await Promise.all([
      cache.read(obj.src, 1024 * KiB + 10, 4000), // chunk 1: first fetch + chunk GET
      cache.read(obj.src, 1024 * KiB + 20_000, 4000), // inside the first fetch's 64 KiB
      cache.read(obj.src, 1024 * KiB + 500 * KiB, 4000), // waits for the chunk
    ]);
    assert.deepEqual(reads[0], obj.bytes.slice(1024 * KiB + 10, 1024 * KiB + 4010));
    assert.deepEqual(reads[1], obj.bytes.slice(1024 * KiB + 20_000, 1024 * KiB + 24_000));
    assert.deepEqual(
      reads[2],
      obj.bytes.slice(1024 * KiB + 500 * KiB, 1024 * KiB + 500 * KiB + 4000),
    );
    assert.equal(sim.requestCount("get"), 2, "one first fetch and one chunk GET");
    assert.equal(cache.stats().firstFetchAnswers, 2);
    await cache.idle();
    await cache.read(obj.src, 1024 * KiB, 1024 * KiB);
    assert.equal(sim.requestCount("get"), 2);
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("first byte first: a cold reader's work after its first fetch runs before the chunk's GET is sent", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const obj = await putObject(sim, "p/first.log", 64 * KiB);
  const events: string[] = [];
  const store = decorateStore(sim, (call) => {
    if (call.op === "get") events.push("get");
    return call.run(call.signal);
  });
  const cache = await ChunkCache.open(store, {
    path: dir.path,
    chunkSize: 64 * KiB,
    size: 2 ** 30,
    sizePercent: 100,
    diskTotalBytes: 2 ** 40,
    persistInterval: Infinity,
    readaheadMax: 0,
    firstFetch: { min: 1 * KiB, max: 2 * KiB },
  });
  try {
    const bytes = await cache.read(obj.src, 10 * KiB, 1 * KiB);
    // What a reader does next without waiting on I/O: walk the records, plan, write its head.
    for (let step = 0; step < 50; step++) await Promise.resolve();
    events.push("answered");
    await cache.idle();
    assert.deepEqual(bytes, obj.bytes.slice(10 * KiB, 11 * KiB));
    assert.deepEqual(events, ["get", "answered", "get"], "first fetch, the answer, then the chunk");
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("a reader's abort does not cancel the chunk fetch other readers wait on", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore({ faults: { latencyMs: [20, 20] } });
  const obj = await putObject(sim, "p/obj.log", 32 * KiB);
  const cache = await openCache(sim, dir.path);
  try {
    const ac = new AbortController();
    const first = cache.read(obj.src, 0, 100, { signal: ac.signal });
    const second = cache.read(obj.src, 200, 100);
    ac.abort(new DOMException("client went away", "AbortError"));
    await assert.rejects(first, /client went away/);
    assert.deepEqual(await second, obj.bytes.slice(200, 300));
    await cache.idle();
    assert.deepEqual(await cache.read(obj.src, 0, 4096), obj.bytes.slice(0, 4096));
    assert.equal(sim.requestCount("get"), 1);
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("a read waits at most fetchTimeout, and the fetch goes on so the retry hits", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore({ faults: { latencyMs: [60, 60] } });
  const obj = await putObject(sim, "p/obj.log", 8 * KiB);
  const cache = await openCache(sim, dir.path, { fetchTimeout: 10 });
  try {
    const err = await cache.read(obj.src, 0, 100).catch((e) => e);
    assert.ok(err instanceof CacheTimeoutError, String(err));
    assert.ok(err.retryAfterSeconds >= 1);
    await cache.idle();
    assert.deepEqual(await cache.read(obj.src, 0, 100), obj.bytes.slice(0, 100));
    assert.equal(sim.requestCount("get"), 1);
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("a restarted cache serves previously read ranges with zero GETs", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const objs = [
    await putObject(sim, "p/a.log", 40 * KiB, { seed: 1 }),
    await putObject(sim, "p/b.log", 20 * KiB, { seed: 2 }),
  ];
  const ranges: Array<[number, number, number]> = [[0, 100, 9000], [0, 30_000, 5000], [
    1,
    0,
    20 * KiB,
  ]];
  const first = await openCache(sim, dir.path);
  for (const [o, s, l] of ranges) await first.read(objs[o].src, s, l);
  await first.idle();
  const used = first.stats().bytes;
  await first.close();
  sim.resetCounts();

  const second = await openCache(sim, dir.path);
  try {
    assert.equal(second.stats().bytes, used);
    for (const [o, s, l] of ranges) {
      assert.deepEqual(await second.read(objs[o].src, s, l), objs[o].bytes.slice(s, s + l));
    }
    assert.equal(sim.requestCount("get"), 0);
  } finally {
    await second.close();
  }

  // After a crash (no close, no table save since) the files are adopted from disk; a file
  // deleted by hand is dropped from the table and fetched again.
  const third = await openCache(sim, dir.path);
  await third.read(objs[0].src, 0, 40 * KiB);
  await third.idle(); // not closed: its table does not know about the new chunks
  const disk = await chunkFilesOnDisk(dir.path);
  await Deno.remove(join(dir.path, disk.paths[0]));
  sim.resetCounts();
  const fourth = await openCache(sim, dir.path);
  try {
    assert.equal(fourth.stats().objects, disk.count - 1);
    assert.deepEqual(await fourth.read(objs[0].src, 0, 40 * KiB), objs[0].bytes);
    assert.deepEqual(await fourth.read(objs[1].src, 0, 20 * KiB), objs[1].bytes);
    assert.equal(sim.requestCount("get"), 1, "only the deleted chunk is fetched");
  } finally {
    await fourth.close();
    await third.close();
    await dir.cleanup();
  }
});

Deno.test("chunk files an older tierd wrote (layout 1) are served after an upgrade, known or adopted", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const obj = await putObject(sim, "p/a.log", 40 * KiB, { seed: 3 });
  const first = await openCache(sim, dir.path);
  await first.read(obj.src, 0, 40 * KiB);
  await first.close();
  const { paths } = await chunkFilesOnDisk(dir.path);
  assert.ok(paths.length > 1);
  for (const path of paths) {
    const file = new Uint8Array(await readFile(join(dir.path, path)));
    const h = decodeChunkHeader(file, path);
    const data = file.subarray(h.headerLength);
    const old = encodeChunkHeader(h.name, h, data, h.blockSize, 1);
    await writeFile(join(dir.path, path), Uint8Array.from([...old, ...data]));
  }
  for (const table of ["kept", "lost"]) {
    if (table === "lost") await Deno.remove(join(dir.path, "access.table"));
    sim.resetCounts();
    const again = await openCache(sim, dir.path);
    try {
      assert.equal(again.stats().objects, paths.length, `${table} table: every file is in`);
      assert.deepEqual(await again.read(obj.src, 0, 40 * KiB), obj.bytes);
      assert.equal(sim.requestCount("get"), 0, `${table} table: nothing fetched again`);
      assert.equal(again.stats().corrupt, 0);
    } finally {
      await again.close();
    }
  }
  await dir.cleanup();
});

Deno.test("a backfill scan over more than the cache holds does not evict the hot tail's chunks", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const chunk = 4 * KiB;
  const segment = 16 * chunk;
  // One partition, four segments, keys as the tier worker writes them.
  const objs = [];
  for (let i = 0; i < 4; i++) {
    const start = String(i * 1000).padStart(20, "0");
    objs.push(await putObject(sim, `iggy/local/1/1/0/1-0/${start}.log`, segment, { seed: i + 1 }));
  }
  const budget = chunksBudget(10, chunk);
  const cache = await openCache(sim, dir.path, { size: budget, trimMinInterval: 1e9 });
  try {
    const tail = objs[3];
    const tailRanges = [13, 14, 15].map((k) => [k * chunk, chunk] as const);
    for (const [s, l] of tailRanges) await cache.read(tail.src, s, l, { readerId: "tail" });
    await cache.idle();
    // The backfill reads two whole segments (32 chunks; the cache holds 10) from the start.
    for (const obj of objs.slice(0, 2)) {
      for (let at = 0; at < segment; at += 1500) {
        const got = await cache.read(obj.src, at, 1500, { readerId: "backfill" });
        assert.deepEqual(got, obj.bytes.slice(at, at + 1500));
      }
    }
    await cache.idle();
    const s = cache.stats();
    assert.ok(s.evictions.cold > 0, "the backfill recycled its own chunks");
    assert.equal(s.evictions.budget, 0, "nothing of the working set was evicted");
    sim.resetCounts();
    for (const [start, length] of tailRanges) {
      assert.deepEqual(
        await cache.read(tail.src, start, length),
        tail.bytes.slice(start, start + length),
      );
    }
    assert.equal(sim.requestCount("get"), 0);
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("positioned sources place a backfill whose keys say nothing of order", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const chunk = 4 * KiB;
  const segment = 16 * chunk;
  // Keys that say nothing of order; the read path's positions do.
  const objs = [];
  for (let i = 0; i < 3; i++) {
    objs.push(
      await putObject(sim, `blob-${"xyz"[i]}`, segment, {
        seed: 10 + i,
        position: { partition: "1/1/0", base: i * segment },
      }),
    );
  }
  const cache = await openCache(sim, dir.path, {
    size: chunksBudget(8, chunk),
    trimMinInterval: 1e9,
  });
  try {
    await cache.read(objs[2].src, 10 * chunk, 3 * chunk, { readerId: "tail" });
    await cache.idle();
    for (let at = 0; at < segment; at += chunk) {
      await cache.read(objs[0].src, at, chunk, { readerId: "backfill" });
    }
    await cache.idle();
    sim.resetCounts();
    await cache.read(objs[2].src, 10 * chunk, 3 * chunk);
    assert.equal(sim.requestCount("get"), 0);
    assert.equal(cache.stats().evictions.budget, 0);
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("a corrupted or truncated chunk file is refetched and the reply is correct", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const obj = await putObject(sim, "p/obj.log", 12 * KiB);
  const cache = await openCache(sim, dir.path);
  try {
    await cache.read(obj.src, 0, 12 * KiB);
    await cache.idle();
    const { paths } = await chunkFilesOnDisk(dir.path);
    assert.equal(paths.length, 3);
    const damage: Array<(path: string) => Promise<void>> = [
      async (path) => { // flip the last data byte
        const fh = await open(path, "r+");
        const { size } = await fh.stat();
        const b = new Uint8Array(1);
        await fh.read(b, 0, 1, size - 1);
        b[0] ^= 0xff;
        await fh.write(b, 0, 1, size - 1);
        await fh.close();
      },
      (path) => truncate(path, 100), // truncated
    ];
    for (let i = 0; i < damage.length; i++) {
      for (const p of paths) await damage[i](join(dir.path, p));
      await cache.idle();
      sim.resetCounts();
      assert.deepEqual(await cache.read(obj.src, 0, 12 * KiB), obj.bytes, `damage ${i}`);
      assert.equal(sim.requestCount("get"), 3);
      await cache.idle();
      assert.deepEqual(await cache.read(obj.src, 0, 12 * KiB), obj.bytes);
      assert.equal(sim.requestCount("get"), 3, "the refetched chunks are resident again");
      const after = await chunkFilesOnDisk(dir.path);
      assert.equal(after.count, 3);
    }
    const s = cache.stats();
    assert.equal(s.evictions.corrupt, 6);
    assert.equal(s.corrupt, 6);
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("a chunk file whose header was damaged is refetched when it is next opened", async () => {
  // A chunk file read lately stays open with its header checked, so a header damaged under a
  // running cache is noticed when the file is opened again: here, after a restart.
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const obj = await putObject(sim, "p/obj.log", 12 * KiB);
  let cache = await openCache(sim, dir.path);
  try {
    await cache.read(obj.src, 0, 12 * KiB);
    await cache.idle();
    await cache.close();
    const { paths } = await chunkFilesOnDisk(dir.path);
    assert.equal(paths.length, 3);
    for (const p of paths) {
      const bytes = await readFile(join(dir.path, p));
      bytes[20] ^= 1;
      await writeFile(join(dir.path, p), bytes);
    }
    cache = await openCache(sim, dir.path);
    sim.resetCounts();
    assert.deepEqual(await cache.read(obj.src, 0, 12 * KiB), obj.bytes);
    assert.equal(sim.requestCount("get"), 3, "every damaged chunk is fetched again");
    await cache.idle();
    sim.resetCounts();
    assert.deepEqual(await cache.read(obj.src, 0, 12 * KiB), obj.bytes);
    assert.equal(sim.requestCount("get"), 0, "the refetched chunks are resident again");
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("invalidate: the chunks covering a range go (reason corrupt), files too, and are fetched again", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const obj = await putObject(sim, "p/obj.log", 12 * KiB);
  const cache = await openCache(sim, dir.path);
  try {
    await cache.read(obj.src, 0, 12 * KiB);
    await cache.idle();
    assert.equal((await chunkFilesOnDisk(dir.path)).count, 3);
    await cache.invalidate(obj.src, 5 * KiB, 2 * KiB); // inside the second chunk
    assert.equal(cache.stats().evictions.corrupt, 1);
    assert.equal((await chunkFilesOnDisk(dir.path)).count, 2, "its file is gone at once");
    sim.resetCounts();
    assert.deepEqual(await cache.read(obj.src, 0, 12 * KiB), obj.bytes);
    assert.equal(sim.requestCount("get"), 1, "only the dropped chunk is fetched again");

    // A cold read's first-fetch bytes are not handed out again once dropped: the chunk's are.
    const cold = await putObject(sim, "p/cold.log", 12 * KiB, { seed: 7 });
    const faults = corruptingStore(sim);
    let gets = 0;
    const slow = decorateStore(faults.store, async (call) => {
      // The first fetch is sent first; the chunk's GET, sent next, answers well after it.
      if (call.op === "get" && gets++ > 0) await new Promise((r) => setTimeout(r, 50));
      return await call.run(call.signal);
    });
    const first = await ChunkCache.open(slow, {
      path: join(dir.path, "first"),
      chunkSize: 12 * KiB,
      size: 2 ** 30,
      sizePercent: 100,
      diskTotalBytes: 2 ** 40,
      persistInterval: Infinity,
      firstFetch: { min: 1 * KiB, max: 2 * KiB },
    });
    try {
      faults.corruptNext(); // the first fetch's answer; the chunk's comes later, and good
      const bad = await first.read(cold.src, 0, 1 * KiB);
      assert.notDeepEqual(bad, cold.bytes.slice(0, 1 * KiB));
      await first.invalidate(cold.src, 0, 1 * KiB);
      assert.deepEqual(await first.read(cold.src, 0, 1 * KiB), cold.bytes.slice(0, 1 * KiB));
    } finally {
      await first.close();
    }
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("readahead: a sequential scan prefetches and waits on the store less", async () => {
  const sim = new SimStore();
  const obj = await putObject(sim, "p/scan.log", 32 * 4 * KiB);
  async function scan(readaheadMax: number) {
    const dir = await tempDir("cache");
    const cache = await openCache(sim, dir.path, { readaheadMax });
    try {
      for (let at = 0; at < obj.src.size; at += 2000) {
        assert.deepEqual(
          await cache.read(obj.src, at, 2000, { readerId: "r" }),
          obj.bytes.slice(at, at + 2000),
        );
        await cache.idle(); // prefetches land before the next read
      }
      return cache.stats();
    } finally {
      await cache.close();
      await dir.cleanup();
    }
  }
  const without = await scan(0);
  const withAhead = await scan(4);
  assert.equal(without.prefetches, 0);
  assert.equal(without.misses, 32, "every chunk is a foreground wait");
  assert.ok(withAhead.prefetches >= 30, `prefetches: ${withAhead.prefetches}`);
  assert.ok(withAhead.misses <= 2, `foreground waits with readahead: ${withAhead.misses}`);
});

Deno.test("readahead: chunks prefetched and never read are evicted before read ones", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const chunk = 4 * KiB;
  const a = await putObject(sim, "a/obj.log", 16 * chunk, { seed: 1 });
  const b = await putObject(sim, "b/obj.log", 16 * chunk, { seed: 2 });
  const cache = await openCache(sim, dir.path, {
    size: chunksBudget(12, chunk),
    trimMinInterval: 1e9,
    readaheadMax: 4,
  });
  try {
    for (let k = 0; k < 4; k++) {
      await cache.read(a.src, k * chunk, chunk, { readerId: "a" });
      await cache.idle();
    }
    // Read: chunks 0-3 of a. Prefetched and unread: 4-7.
    assert.equal(cache.stats().objects, 8);
    for (let k = 0; k < 8; k++) await cache.read(b.src, k * chunk, chunk);
    await cache.idle();
    const s = cache.stats();
    assert.equal(s.evictions.prefetch_unread, 4);
    assert.equal(s.evictions.budget, 0);
    sim.resetCounts();
    await cache.read(a.src, 0, 4 * chunk);
    assert.equal(sim.requestCount("get"), 0, "the read chunks survived");
    await cache.read(a.src, 4 * chunk, chunk);
    assert.equal(sim.requestCount("get"), 1, "the unread prefetch was evicted");
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("fetch_bandwidth: downloads wait for the token bucket on the injected clock", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const clock = new FakeClock(0);
  const chunk = 64 * KiB;
  const obj = await putObject(sim, "p/obj.log", 3 * chunk);
  // 64 KiB/s with the default 64 KiB burst: the first chunk goes at once, each next one a second later.
  const cache = await openCache(sim, dir.path, {
    chunkSize: chunk,
    fetchBandwidth: chunk,
    clock,
    readaheadMax: 0,
    firstFetch: false,
  });
  try {
    assert.deepEqual(await cache.read(obj.src, 0, 10), obj.bytes.slice(0, 10));
    let done = false;
    const second = cache.read(obj.src, chunk, 10).then((b) => (done = true, b));
    const third = cache.read(obj.src, 2 * chunk, 10);
    for (let i = 0; i < 50 && clock.pending === 0; i++) await new Promise((r) => setTimeout(r, 2));
    assert.equal(sim.requestCount("get"), 1);
    clock.advance(999);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(done, false);
    assert.equal(sim.requestCount("get"), 1);
    clock.advance(1);
    assert.deepEqual(await second, obj.bytes.slice(chunk, chunk + 10));
    assert.equal(sim.requestCount("get"), 2);
    clock.advance(1000);
    assert.deepEqual(await third, obj.bytes.slice(2 * chunk, 2 * chunk + 10));
    assert.equal(sim.requestCount("get"), 3);
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("boot deletes .part files and leftovers, keeps good chunks", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const obj = await putObject(sim, "p/obj.log", 8 * KiB);
  const cache = await openCache(sim, dir.path);
  await cache.read(obj.src, 0, 8 * KiB);
  await cache.close();
  const before = await chunkFilesOnDisk(dir.path);
  const fan = join(dir.path, "chunks", "ab", "cd");
  await mkdir(fan, { recursive: true });
  await writeFile(join(fan, "abcd000000000000.part"), new Uint8Array(100));
  await writeFile(join(dir.path, before.paths[0].replace(/\.chunk$/, ".part")), new Uint8Array(5));
  await writeFile(join(fan, "abcd000000000001.chunk"), new Uint8Array(300)); // no valid header
  await writeFile(join(dir.path, "access.table.tmp"), new Uint8Array(7));
  sim.resetCounts();
  const again = await openCache(sim, dir.path);
  try {
    const files = [...(await filesUnder(dir.path)).keys()].sort();
    assert.deepEqual(files, [...before.paths, "access.table"].sort());
    assert.deepEqual(await again.read(obj.src, 0, 8 * KiB), obj.bytes);
    assert.equal(sim.requestCount("get"), 0);
  } finally {
    await again.close();
    await dir.cleanup();
  }
});

Deno.test("a chunk that can never fit fails typed as CacheFullError", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const obj = await putObject(sim, "p/obj.log", 16 * KiB);
  const cache = await openCache(sim, dir.path, {
    chunkSize: 8 * KiB,
    size: chunkFileSize(4 * KiB),
  });
  try {
    await assert.rejects(cache.read(obj.src, 0, 10), { name: "CacheFullError" });
    const s = cache.stats();
    assert.equal(s.full, 1);
    assert.equal(s.fetches.cache_full, 1);
    assert.equal(sim.requestCount("get"), 0, "nothing is fetched without room for it");
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("the access table is saved on the persist timer", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const clock = new FakeClock(0);
  const obj = await putObject(sim, "p/obj.log", 8 * KiB);
  const cache = await openCache(sim, dir.path, { clock, persistInterval: 60_000 });
  try {
    await cache.read(obj.src, 0, 8 * KiB);
    await cache.idle();
    assert.equal((await filesUnder(dir.path)).has("access.table"), false);
    clock.advance(60_000);
    for (let i = 0; i < 100 && !(await filesUnder(dir.path)).has("access.table"); i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.ok((await filesUnder(dir.path)).has("access.table"));
  } finally {
    await cache.close();
    await dir.cleanup();
  }
});

Deno.test("the budget is the smaller of cache.size and size_percent of the cache disk", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const byDisk = await openCache(sim, dir.path, {
    size: 2 ** 30,
    sizePercent: 10,
    diskTotalBytes: 1_000_000,
    maxObjects: 7,
  });
  assert.deepEqual(byDisk.budget, { bytes: 100_000, objects: 7 });
  await byDisk.close();
  const bySize = await openCache(sim, dir.path, {
    size: 50_000,
    sizePercent: 10,
    diskTotalBytes: 1_000_000,
  });
  assert.equal(bySize.budget.bytes, 50_000);
  await bySize.close();
  // Without an override the disk's size comes from statfs.
  const real = await openCache(sim, dir.path, {
    size: Infinity,
    sizePercent: 1,
    diskTotalBytes: undefined,
  });
  assert.ok(real.budget.bytes > 0 && Number.isFinite(real.budget.bytes));
  await real.close();
  await dir.cleanup();
});

Deno.test("idle() waits for readahead into the next object while its chunk bounds are still coming", async () => {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  try {
    const a = await putObject(sim, "a", 4 * 4096, { seed: 1 });
    const b = await putObject(sim, "b", 4 * 4096, { seed: 2 });
    // The next object's record starts take a while (an index read from the store).
    const slowB = {
      ...b.src,
      recordStarts: () =>
        new Promise<number[]>((resolve) => setTimeout(() => resolve(b.starts), 50)),
    };
    const cache = await openCache(sim, join(dir.path, "c"));
    try {
      for (let at = 0; at < a.src.size; at += 4096) {
        await cache.read(a.src, at, 4096, { readerId: "r", next: slowB });
      }
      await cache.idle();
      sim.resetCounts();
      const first = await cache.read(slowB, 0, 4096, { readerId: "r" });
      assert.deepEqual(first, b.bytes.subarray(0, 4096));
      assert.equal(
        sim.requestCount("get"),
        0,
        "b's first chunk was already fetched: no GET for it",
      );
    } finally {
      await cache.close();
    }
  } finally {
    await dir.cleanup();
  }
});
