// Readahead for every client: a plain client that reads a partition sequentially — each read
// starting at the previous answer's `x-tierd-next-offset`, no special header — gets the chunk
// cache's readahead, so it costs far fewer store GETs per byte than reads the cache cannot
// tell apart (each from a different reader).
import assert from "node:assert/strict";
import { join } from "node:path";
import { decorateStore } from "../../providers/decorate.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { ChunkCache } from "../../src/cache/mod.ts";
import { createApp } from "../../src/http/app.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics } from "../../src/metrics/tierd.ts";
import { buildScenario, type Scenario } from "../read/_scenario.ts";
import { RECORDS } from "./_app.ts";

/** The API over the scenario, reading remote bytes through a cache of 1 MiB chunks over `store`. */
async function cachedApp(s: Scenario, store: ObjectStore, dir: string) {
  const cache = await ChunkCache.open(store, {
    path: dir,
    size: 64 * 1024 * 1024,
    chunkSize: 1024 * 1024,
    readaheadMax: 4,
    diskTotalBytes: 2 ** 40,
  });
  const registry = new Registry();
  const metrics = createTierdMetrics(registry);
  const app = createApp({
    read: s.context({ store, reader: cache, metrics }),
    registry,
    metrics,
    ready: () => true,
    apiToken: "",
  });
  return { app, cache };
}

/** Scans the remote part of the partition with small reads; returns store GETs and bytes. */
async function scan(
  s: Scenario,
  dir: string,
  headerFor: (i: number) => Record<string, string>,
): Promise<{ gets: number; bytes: number }> {
  let gets = 0;
  const counted: ObjectStore = decorateStore(s.store, (call) => {
    if (call.op === "get") gets++;
    return call.run(call.signal);
  });
  const { app, cache } = await cachedApp(s, counted, dir);
  try {
    const lastRemote = s.records.filter((r) => r.evicted).at(-1)!.lastOffset;
    let offset = 0n;
    let bytes = 0;
    for (let i = 0; offset <= lastRemote; i++) {
      const res = await app.request(`${RECORDS}?offset=${offset}&max_bytes=4096`, {
        headers: headerFor(i),
      });
      assert.equal(res.status, 200, await res.clone().text());
      bytes += (await res.arrayBuffer()).byteLength;
      offset = BigInt(res.headers.get("x-tierd-next-offset")!);
    }
    return { gets, bytes };
  } finally {
    await cache.close();
  }
}

Deno.test("a plain sequential reader gets readahead: fewer store GETs per byte", async () => {
  const s = await buildScenario({
    format: "iggy-0.9",
    before: 36_000,
    after: 10,
    segmentSize: 3 * 1024 * 1024,
    payloadSize: 100,
    messagesPerBatch: 5,
    evict: 100,
  });
  try {
    const plain = await scan(s, join(s.dir, "cache-plain"), () => ({}));
    const strangers = await scan(
      s,
      join(s.dir, "cache-strangers"),
      (i) => ({ "x-tierd-reader": `stranger-${i}` }),
    );
    const hinted = await scan(s, join(s.dir, "cache-hinted"), () => ({ "x-tierd-reader": "one" }));
    assert.equal(plain.bytes, strangers.bytes);
    const perMiB = (r: { gets: number; bytes: number }) => r.gets / (r.bytes / (1 << 20));
    console.log(
      `store GETs per MiB: plain ${perMiB(plain).toFixed(1)}, hinted ${
        perMiB(hinted).toFixed(1)
      }, unrelated readers ${perMiB(strangers).toFixed(1)}`,
    );
    assert.ok(
      plain.gets <= strangers.gets * 0.75,
      `plain ${plain.gets} GETs vs ${strangers.gets} without readahead`,
    );
    assert.ok(plain.gets <= hinted.gets * 1.2, "as good as a reader that names itself");
  } finally {
    await s.cleanup();
  }
});

Deno.test("readahead crosses segment boundaries: a plain reader finds each next segment's start cached", async () => {
  // Segments of ~64 KiB, chunks of 1 MiB: each segment is one chunk, so readahead within a
  // segment has nothing to fetch, and only readahead across boundaries can help.
  const s = await buildScenario({
    format: "iggy-0.9",
    before: 8_000,
    after: 10,
    segmentSize: 64 * 1024,
    payloadSize: 100,
    messagesPerBatch: 5,
    evict: 100,
  });
  try {
    const { app, cache } = await cachedApp(s, s.store, join(s.dir, "cache-boundaries"));
    try {
      const remote = s.records.filter((r) => r.evicted);
      const segments = new Set(remote.map((r) => r.segment)).size;
      assert.ok(segments >= 10, `${segments} evicted segments`);
      let offset = 0n;
      for (let i = 0; offset <= remote.at(-1)!.lastOffset; i++) {
        const res = await app.request(`${RECORDS}?offset=${offset}&max_bytes=16384`);
        assert.equal(res.status, 200, await res.clone().text());
        await res.arrayBuffer();
        offset = BigInt(res.headers.get("x-tierd-next-offset")!);
        await cache.idle(); // let the readahead land, as a consumer's think time would
      }
      const { prefetches, misses } = cache.stats();
      console.log(`${segments} segments: ${prefetches} prefetches, ${misses} cache misses`);
      assert.ok(prefetches >= segments - 3, `${prefetches} prefetches for ${segments} segments`);
      assert.ok(misses <= 3, `only the first segments wait for the store (${misses} misses)`);
    } finally {
      await cache.close();
    }
  } finally {
    await s.cleanup();
  }
});
