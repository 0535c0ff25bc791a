// Store faults as clients see them: an outage and a slow store answer 503 with Retry-After (the
// slow fetch finishing in the background so a retry is served from cache), a missing object
// answers 500 naming the key and counts in tierd_remote_objects_missing_total.
import assert from "node:assert/strict";
import { join } from "node:path";
import { ChunkCache } from "../../src/cache/mod.ts";
import type { ChunkSource, RangeReader } from "../../src/cache/types.ts";
import { DirectRangeReader } from "../../src/read/direct_reader.ts";
import { segmentKeys } from "../../src/layout/object_keys.ts";
import { parseExposition, sampleValue } from "../metrics/_exposition.ts";
import { buildScenario, expectedRead, type Scenario } from "../read/_scenario.ts";
import { appFor, errorBody, RECORDS } from "./_app.ts";

async function scenario(): Promise<Scenario> {
  return await buildScenario({
    format: "iggy-0.8",
    before: 40,
    after: 10,
    segmentSize: 1024,
    payloadSize: 32,
    evict: 2,
  });
}

/** A stand-in for the chunk cache: remembers every range it fetched (single flight per range). */
function memoReader(inner: RangeReader): RangeReader {
  const held = new Map<string, Promise<Uint8Array>>();
  return {
    read(src: ChunkSource, start: number, length: number) {
      const key = `${src.key}:${start}:${length}`;
      let p = held.get(key);
      if (!p) {
        p = inner.read(src, start, length);
        p.catch(() => held.delete(key));
        held.set(key, p);
      }
      return p;
    },
  };
}

Deno.test("a store outage answers 503 with Retry-After; local data still reads", async () => {
  const s = await scenario();
  try {
    const { app } = appFor(s);
    s.store.setUnavailable(true);
    const res = await app.request(`${RECORDS}?offset=0`);
    assert.equal(res.status, 503);
    assert.ok(Number(res.headers.get("retry-after")) >= 1);
    const body = await errorBody(res);
    assert.equal(body.error, "store_unavailable");
    const last = s.records.at(-1)!;
    const local = await app.request(`${RECORDS}?offset=${last.firstOffset}`);
    assert.equal(local.status, 200);
    assert.equal(local.headers.get("x-tierd-source"), "local");
    await local.body?.cancel();
  } finally {
    await s.cleanup();
  }
});

Deno.test("a throttling store answers 503 with Retry-After", async () => {
  const s = await scenario();
  try {
    const { app } = appFor(s);
    s.store.setFaults({ throttleRate: 1 });
    const res = await app.request(`${RECORDS}?offset=0`);
    assert.equal(res.status, 503);
    assert.equal(res.headers.get("retry-after"), "2");
    assert.equal((await errorBody(res)).error, "store_unavailable");
  } finally {
    await s.cleanup();
  }
});

Deno.test("a slow store answers 503 at fetch_timeout; the fetch goes on and a retry hits the cache", async () => {
  const s = await scenario();
  try {
    const reader = memoReader(new DirectRangeReader(s.store));
    const { app } = appFor(s, { read: { reader, fetchTimeoutMs: 60 } });
    s.store.setFaults({ latencyMs: [250, 250] });
    const expected = expectedRead(s.records, { offset: 0n }, 500)!;
    const statuses: number[] = [];
    let body: Uint8Array | undefined;
    for (let attempt = 0; attempt < 10 && !body; attempt++) {
      const started = performance.now();
      const res = await app.request(`${RECORDS}?offset=0&max_bytes=500`);
      statuses.push(res.status);
      if (res.status === 503) {
        assert.ok(performance.now() - started < 200, "answered at fetch_timeout");
        assert.equal(res.headers.get("retry-after"), "1");
        assert.equal((await errorBody(res)).error, "fetch_timeout");
        await new Promise((r) => setTimeout(r, 300)); // the client honours Retry-After, roughly
      } else {
        assert.equal(res.status, 200);
        body = new Uint8Array(await res.arrayBuffer());
      }
    }
    assert.deepEqual(body, expected.bytes);
    assert.equal(statuses[0], 503);
    // Each object was fetched once: the .index (into the index cache) and the .log range (into
    // the reader's cache), both by requests that outlived the read that started them.
    assert.equal(s.store.requestCount("get"), 2, `statuses ${statuses}`);
  } finally {
    await s.cleanup();
  }
});

Deno.test("through the chunk cache, a slow store's retry is served without a new GET", async () => {
  const s = await scenario();
  const cache = await ChunkCache.open(s.store, {
    path: join(s.dir, "cache"),
    chunkSize: 4096,
    size: 1 << 20,
    diskTotalBytes: 1 << 30,
    fetchTimeout: 60,
  });
  try {
    const { app } = appFor(s, { read: { reader: cache, fetchTimeoutMs: 60 } });
    s.store.setFaults({ latencyMs: [250, 250] });
    const expected = expectedRead(s.records, { offset: 0n }, 500)!;
    let body: Uint8Array | undefined;
    let timeouts = 0;
    let getsBefore = 0;
    for (let attempt = 0; attempt < 10 && !body; attempt++) {
      getsBefore = s.store.requestCount("get");
      const res = await app.request(`${RECORDS}?offset=0&max_bytes=500`);
      if (res.status === 503) {
        timeouts++;
        assert.equal((await errorBody(res)).error, "fetch_timeout");
        await new Promise((r) => setTimeout(r, 600)); // first fetch and chunk hydration finish
      } else {
        assert.equal(res.status, 200);
        body = new Uint8Array(await res.arrayBuffer());
      }
    }
    assert.ok(timeouts >= 1);
    assert.deepEqual(body, expected.bytes);
    assert.equal(
      s.store.requestCount("get"),
      getsBefore,
      "the successful retry was all cache hits",
    );
  } finally {
    await cache.close();
    await s.cleanup();
  }
});

Deno.test("a missing object answers 500 naming the key, and the metric rises", async () => {
  const s = await scenario();
  try {
    const { app } = appFor(s);
    const state = (await s.context().states.state(s.ids))!;
    const keys = segmentKeys({
      ...s.ids,
      prefix: "iggy",
      clusterId: "local",
      incarnation: state.incarnation!,
      generation: 0n,
    }, 0n);
    await s.store.deleteMany([keys.log]);
    for (let i = 1; i <= 2; i++) {
      const res = await app.request(`${RECORDS}?offset=0`);
      assert.equal(res.status, 500);
      const body = await errorBody(res);
      assert.equal(body.error, "remote_object_missing");
      assert.ok(body.message.includes(keys.log), body.message);
      const f = parseExposition(await (await app.request("/metrics")).text());
      assert.equal(sampleValue(f, "tierd_remote_objects_missing_total"), i);
    }
    assert.equal(s.store.objects.has(keys.log), false, "nothing was repaired");
  } finally {
    await s.cleanup();
  }
});
