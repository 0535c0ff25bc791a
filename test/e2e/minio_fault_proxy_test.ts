// Issue 11, items 3 and 4 over real HTTP: a tiered partition in a real MinIO, read through the
// chunk cache and an S3Store whose endpoint is a fault proxy in front of MinIO (the objects in
// MinIO stay good; only the answers the proxy hands on are broken).
//
// The cache heals (item 3): a GET answer with one byte flipped in transit is caught by the read
// path's record checksums, evicted and fetched again, so the read is right and no chunk file on
// disk — before or after a restart — holds the corrupted bytes; a corrupted chunk that lands on
// disk unread is caught on its first read after a restart and fetched again; and a store that
// keeps answering corrupted bytes fails the read with remote_data_corrupt only after a second,
// fresh GET of the chunk it failed on, and leaves nothing of that answer cached.
//
// Deadlines (item 4): with the S3Store sending through storeFetch(fetch_timeout), as the agent
// does, a proxy that goes silent on `.log` GETs — or sends half a body and stalls — fails the read
// with a typed error within fetch_timeout (plus slack for a busy machine), the cache's fetches
// end as soon, and the first read after the proxy heals is right.
//
// MinIO runs natively or as a container (test/fixtures/minio.ts); without it the suite is skipped
// loudly (failed in CI).
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { S3Store } from "../../providers/s3/store.ts";

import { ChunkCache } from "../../src/cache/chunk_cache.ts";
import { decodeChunkHeader } from "../../src/cache/chunk_format.ts";
import { chunkName } from "../../src/cache/chunk_store.ts";
import { hex128, xxh3_128 } from "../../src/hash.ts";
import { FetchTimeout, SegmentCorrupt, StoreUnavailable } from "../../src/read/errors.ts";
import { readRecords } from "../../src/read/read_records.ts";
import { storeFetch } from "../../src/store.ts";
import { chunkFilesOnDisk } from "../cache/_helpers.ts";
import { minioAvailable, startMinioReady } from "../fixtures/_agent.ts";
import type { MinioServer } from "../fixtures/minio.ts";
import { buildScenario, expectedRead, type Scenario } from "../read/_scenario.ts";
import { type FaultProxy, type LogGetMode, startFaultProxy } from "./_fault_proxy.ts";

const FORMATS = ["iggy-0.8", "iggy-0.9"] as const;
const WHOLE = 1 << 20;
/** fetch_timeout of the deadline steps. */
const FETCH_TIMEOUT = 300;
/** What the test allows beyond fetch_timeout for scheduling on a busy machine. */
const SLACK = 1200;

/** A partition tiered to its own bucket in MinIO, read through the fault proxy. */
interface Rig {
  s: Scenario<S3Store>;
  proxy: FaultProxy;
  cacheDir: string;
  /** Opens (or, after a close, reopens: a restart) the chunk cache over the proxied store. */
  openCache(): Promise<ChunkCache>;
  /** readRecords of the whole partition from offset 0, at most `maxBytes`. */
  read(cache: ChunkCache, maxBytes?: number): ReturnType<typeof readRecords>;
  /** Whole `.log` objects as MinIO holds them (read around the proxy), by XXH3-128 hex. */
  objects(): Promise<Map<string, Uint8Array>>;
  cleanup(): Promise<void>;
}

let buckets = 0;

async function faultRig(
  minio: MinioServer,
  o: { format: (typeof FORMATS)[number]; fetchTimeout: number; firstFetch: boolean },
): Promise<Rig> {
  const s3 = (endpoint: string, bucket: string, fetchTimeout?: number) =>
    new S3Store({
      endpoint,
      region: minio.region,
      bucket,
      credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
      urlStyle: "path",
      // What openStore gives every HTTP store.
      fetch: fetchTimeout === undefined ? undefined : storeFetch(fetchTimeout),
    });
  // A bucket per rig: every scenario writes the same keys.
  const bucket = `fault-proxy-${++buckets}`;
  const direct = s3(minio.endpoint, bucket);
  await direct.createBucket();
  const s = await buildScenario({
    store: () => direct, // the tier worker uploads straight to MinIO
    format: o.format,
    before: 60,
    after: 0,
    segmentSize: 4096,
    payloadSize: 64,
    evict: 100,
  });
  const proxy = await startFaultProxy(minio.endpoint);
  const through = s3(proxy.endpoint, bucket, o.fetchTimeout);
  const cacheDir = join(s.dir, "cache");
  return {
    s,
    proxy,
    cacheDir,
    openCache: () =>
      ChunkCache.open(through, {
        path: cacheDir,
        chunkSize: 2048,
        size: 1 << 30,
        sizePercent: 100,
        diskTotalBytes: 2 ** 40,
        persistInterval: Infinity,
        fetchTimeout: o.fetchTimeout,
        // Off: every byte read comes from a chunk GET, so a corrupted answer lands in a chunk.
        ...(o.firstFetch ? {} : { firstFetch: false }),
      }),
    read: (cache, maxBytes = WHOLE) =>
      readRecords(s.context({ store: through, reader: cache, fetchTimeoutMs: o.fetchTimeout }), {
        partition: s.ids,
        offset: 0n,
        maxBytes,
      }),
    async objects() {
      const out = new Map<string, Uint8Array>();
      for (const { key } of await listBounded(direct, "")) {
        if (!key.endsWith(".log")) continue;
        const bytes = new Uint8Array((await direct.get(key)).bytes);
        out.set(hex128(xxh3_128(bytes)), bytes);
      }
      return out;
    },
    async cleanup() {
      await through.close?.();
      await direct.close?.();
      await proxy.close();
      await s.cleanup();
    },
  };
}

const sameBytes = (a: Uint8Array, b: Uint8Array) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

/** Every chunk file in the cache directory: its path, name, range and data bytes. */
async function chunksOnDisk(dir: string) {
  const out: { path: string; name: string; start: number; end: number; data: Uint8Array }[] = [];
  for (const path of (await chunkFilesOnDisk(dir)).paths) {
    const file = new Uint8Array(await readFile(join(dir, path)));
    const h = decodeChunkHeader(file, path);
    out.push({
      path,
      name: h.name,
      start: h.start,
      end: h.end,
      data: file.subarray(h.headerLength),
    });
  }
  return out;
}

/**
 * Asserts that every chunk file on disk holds exactly its object's bytes as MinIO keeps them
 * (none holds a corrupted answer), and returns how many there are.
 */
async function assertChunksRight(r: Rig, what: string): Promise<number> {
  const objects = await r.objects();
  const chunks = await chunksOnDisk(r.cacheDir);
  for (const c of chunks) {
    const owner = [...objects].find(([sum]) => chunkName(sum, c.start, c.end) === c.name);
    assert.ok(owner, `${what}: ${c.path} is a chunk of a .log object in the bucket`);
    assert.ok(
      sameBytes(c.data, owner[1].subarray(c.start, c.end)),
      `${what}: ${c.path} holds the object's bytes [${c.start}, ${c.end})`,
    );
    for (const bad of r.proxy.corrupted) {
      assert.ok(!sameBytes(c.data, bad.bytes), `${what}: ${c.path} holds a corrupted answer`);
    }
  }
  return chunks.length;
}

if (await minioAvailable("cache healing and deadlines through a fault proxy in front of MinIO")) {
  Deno.test("through a fault proxy in front of MinIO: corrupted answers never poison the chunk cache, and a silent or stalled store fails reads within fetch_timeout", async (t) => {
    const minio = (await startMinioReady())!;
    try {
      for (const format of FORMATS) {
        const heal = { format, fetchTimeout: 5_000, firstFetch: false };

        await t.step(
          `${format}: one corrupted GET answer is evicted and fetched again; the read and the restarted cache are right`,
          async () => {
            const r = await faultRig(minio, heal);
            let cache = await r.openCache();
            try {
              const want = expectedRead(r.s.records, { offset: 0n }, WHOLE)!;
              r.proxy.corruptNext();
              const got = await r.read(cache);
              assert.notEqual(got.source, "local");
              assert.deepEqual(got.bytes, want.bytes, "the read itself is answered right");
              assert.equal(r.proxy.corrupted.length, 1, "exactly one answer was corrupted");
              const evicted = cache.stats().evictions.corrupt;
              assert.ok(evicted >= 1, "the bad chunk (and those read with it) were evicted");
              const gets = r.proxy.gets;
              assert.deepEqual((await r.read(cache)).bytes, want.bytes);
              assert.equal(r.proxy.gets, gets, "every chunk resident, the refetched one included");
              await cache.close();

              const chunks = await assertChunksRight(r, "after the read");
              assert.equal(
                gets,
                chunks + evicted,
                "each chunk fetched once, each evicted one twice",
              );
              cache = await r.openCache();
              assert.deepEqual((await r.read(cache)).bytes, want.bytes, "after a restart");
              assert.equal(r.proxy.gets, gets, "served from disk: the corrupted transfer is gone");
              await cache.close();
              assert.equal(await assertChunksRight(r, "after the restart"), chunks);
            } finally {
              await cache.close();
              await r.cleanup();
            }
          },
        );

        await t.step(
          `${format}: a corrupted chunk that lands on disk unread is caught after a restart and fetched again`,
          async () => {
            const r = await faultRig(minio, heal);
            let cache = await r.openCache();
            try {
              // A one-record read takes the first chunk whole but checks only the record it
              // returns: the chunk's corrupted last byte goes to disk unnoticed.
              r.proxy.corruptNext();
              const first = await r.read(cache, 1);
              assert.equal(first.records, 1);
              assert.equal(r.proxy.corrupted.length, 1);
              await cache.close();
              const landed = (await chunksOnDisk(r.cacheDir))
                .filter((c) => sameBytes(c.data, r.proxy.corrupted[0].bytes));
              assert.equal(landed.length, 1, "the corrupted answer is on disk");

              cache = await r.openCache();
              const before = r.proxy.gets;
              const want = expectedRead(r.s.records, { offset: 0n }, WHOLE)!;
              assert.deepEqual((await r.read(cache)).bytes, want.bytes, "after a restart");
              assert.ok(cache.stats().evictions.corrupt >= 1, "caught on its first read");
              const gets = r.proxy.gets;
              assert.ok(gets > before, "and fetched again");
              await cache.close();
              await assertChunksRight(r, "after the healing read");

              cache = await r.openCache();
              assert.deepEqual((await r.read(cache)).bytes, want.bytes, "after a second restart");
              assert.equal(r.proxy.gets, gets, "healed: nothing is fetched again");
            } finally {
              await cache.close();
              await r.cleanup();
            }
          },
        );

        await t.step(
          `${format}: a store that keeps answering corrupted bytes fails the read with remote_data_corrupt only after a second, fresh GET`,
          async () => {
            const r = await faultRig(minio, heal);
            const cache = await r.openCache();
            try {
              r.proxy.corruptAll(true);
              await assert.rejects(
                r.read(cache),
                (err: unknown) =>
                  err instanceof SegmentCorrupt && err.code === "remote_data_corrupt",
              );
              await cache.idle();
              const gets = r.proxy.gets;
              assert.equal(r.proxy.corrupted.length, gets, "every answer was corrupted");
              const perRange = new Map<string, number>();
              for (const { key, range } of r.proxy.corrupted) {
                const at = `${key} ${range}`;
                perRange.set(at, (perRange.get(at) ?? 0) + 1);
              }
              // The range the answer failed on was fetched twice; the walk fetched the ranges
              // after it once, and they were dropped, unread, with the failed answer.
              assert.ok(perRange.size >= 1);
              assert.ok([...perRange.values()].includes(2), "a fresh GET before failing");
              for (const [at, n] of perRange) assert.ok(n <= 2, `${at}: GET ${n} times`);
              assert.equal(cache.stats().evictions.corrupt, gets, "every bad answer evicted");
              assert.equal((await chunkFilesOnDisk(r.cacheDir)).count, 0, "nothing bad kept");

              r.proxy.corruptAll(false);
              const want = expectedRead(r.s.records, { offset: 0n }, WHOLE)!;
              assert.deepEqual((await r.read(cache)).bytes, want.bytes, "healed: the next read");
            } finally {
              await cache.close();
              await r.cleanup();
            }
          },
        );
      }

      for (const mode of ["silent", "half a body"] satisfies LogGetMode[]) {
        await t.step(
          `a proxy ${
            mode === "silent" ? "that goes silent" : "that sends half a body and stalls"
          } on .log GETs fails the read with a typed error within fetch_timeout; the first read after it heals is right`,
          async () => {
            const r = await faultRig(minio, {
              format: "iggy-0.9",
              fetchTimeout: FETCH_TIMEOUT,
              firstFetch: true, // as the agent runs it
            });
            const cache = await r.openCache();
            try {
              r.proxy.mode = mode;
              const started = performance.now();
              await assert.rejects(r.read(cache), (err: unknown) => {
                assert.ok(
                  err instanceof FetchTimeout || err instanceof StoreUnavailable,
                  String(err),
                );
                return true;
              });
              const answered = performance.now() - started;
              assert.ok(r.proxy.stalled >= 1, "the read met the fault");
              assert.ok(answered >= FETCH_TIMEOUT - 25, `it waited for the store: ${answered} ms`);
              assert.ok(answered < FETCH_TIMEOUT + SLACK, `the read answered after ${answered} ms`);
              // The chunk fetches give up on their own too: no flight holds a slot past it.
              await cache.idle();
              const freed = performance.now() - started;
              assert.ok(freed < FETCH_TIMEOUT + SLACK, `the fetches ended after ${freed} ms`);
              assert.ok(cache.stats().fetches.error >= 1, "the fetches failed as store errors");

              r.proxy.mode = "forward";
              const gets = r.proxy.gets;
              const got = await r.read(cache);
              assert.deepEqual(got.bytes, expectedRead(r.s.records, { offset: 0n }, WHOLE)!.bytes);
              assert.ok(r.proxy.gets > gets, "answered by fresh GETs through the healed proxy");
            } finally {
              await cache.close();
              await r.cleanup();
            }
          },
        );
      }
    } finally {
      await minio.stop();
    }
  });
}
