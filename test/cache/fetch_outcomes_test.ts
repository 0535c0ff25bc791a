// The `outcome` of each chunk-cache fetch (tierd_fetches_total): a store error is narrowed to
// `not_found`, `aborted` or `error`, as the store request outcome (metrics/instrument_store.ts)
// classifies it; the cache's own refusal is `cache_full` (chunk_cache_test.ts).
import assert from "node:assert/strict";
import { SimStore } from "../../providers/sim/store.ts";
import type { FetchEvent } from "../../src/cache/stats.ts";
import { tempDir } from "../_util.ts";
import { openCache, putObject } from "./_helpers.ts";

const KiB = 1024;

async function fetchOutcomes(
  prepare: (sim: SimStore) => void,
  read: (read: () => Promise<Uint8Array>, close: () => Promise<void>) => Promise<void>,
): Promise<string[]> {
  const dir = await tempDir("cache");
  const sim = new SimStore();
  const obj = await putObject(sim, "p/obj.log", 8 * KiB);
  const events: FetchEvent[] = [];
  const cache = await openCache(sim, dir.path, {
    chunkFetchAttempts: 1,
    firstFetch: false,
    readaheadMax: 0,
    stats: { fetch: (e) => events.push(e) },
  });
  try {
    prepare(sim);
    await read(() => cache.read(obj.src, 0, 100), () => cache.close());
    return events.map((e) => e.outcome);
  } finally {
    await cache.close();
    await dir.cleanup();
  }
}

Deno.test("fetch outcomes: ok, a missing object is not_found, a store fault is error", async () => {
  assert.deepEqual(await fetchOutcomes(() => {}, async (read) => void await read()), ["ok"]);
  const gone = await fetchOutcomes(
    (sim) => void sim.deleteMany(["p/obj.log"]),
    (read) => assert.rejects(read(), { name: "StoreError" }),
  );
  assert.deepEqual(gone, ["not_found"]);
  const down = await fetchOutcomes(
    (sim) => sim.setUnavailable(true),
    (read) => assert.rejects(read(), { name: "StoreError" }),
  );
  assert.deepEqual(down, ["error"]);
});

Deno.test("fetch outcomes: a fetch cancelled by close() is aborted", async () => {
  const outcomes = await fetchOutcomes(
    (sim) => sim.setFaults({ latencyMs: [200, 200] }),
    async (read, close) => {
      const reading = read();
      reading.catch(() => {});
      await new Promise((resolve) => setTimeout(resolve, 20));
      await close();
      await assert.rejects(reading);
    },
  );
  assert.deepEqual(outcomes, ["aborted"]);
});
