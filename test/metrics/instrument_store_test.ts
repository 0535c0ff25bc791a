// instrumentStore counts every request by operation and outcome and passes results through.
import assert from "node:assert/strict";
import { SimStore } from "../../providers/sim/store.ts";
import { StoreError } from "../../providers/types.ts";
import { instrumentStore } from "../../src/metrics/instrument_store.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics } from "../../src/metrics/tierd.ts";
import { parseExposition, sampleValue } from "./_exposition.ts";

Deno.test("store requests are counted by op and outcome; throttling separately", async () => {
  const registry = new Registry();
  const m = createTierdMetrics(registry);
  const sim = new SimStore();
  const store = instrumentStore(sim, m);
  assert.equal(store.kind, "sim");
  const body = new TextEncoder().encode("hello");
  const created = await store.put("a/b", body, { ifAbsent: true });
  const { etag, version } = await sim.head("a/b");
  assert.deepEqual(created, { status: "Created", etag, version });
  assert.equal((await store.put("a/b", body, { ifAbsent: true })).status, "AlreadyExists");
  // A replacement's version reaches the store; a stale one is counted as a refusal.
  assert.equal((await store.put("a/b", body, { ifMatch: version })).status, "Created");
  await assert.rejects(
    store.put("a/b", body, { ifMatch: version }),
    (e: unknown) => e instanceof StoreError && e.kind === "PreconditionFailed",
  );
  assert.deepEqual(
    (await store.get("a/b", { range: { start: 1, length: 3 } })).bytes,
    body.slice(1, 4),
  );
  await assert.rejects(
    store.get("missing"),
    (e: unknown) => e instanceof StoreError && e.kind === "NotFound",
  );
  assert.equal((await store.list("a/")).objects.length, 1);
  assert.deepEqual(await store.deleteMany(["a/b"]), []);
  sim.setFaults({ throttleRate: 1 });
  await assert.rejects(
    store.head("a/b"),
    (e: unknown) => e instanceof StoreError && e.kind === "Throttled",
  );
  sim.setFaults({ throttleRate: 0, unavailable: true });
  await assert.rejects(
    store.get("a/b"),
    (e: unknown) => e instanceof StoreError && e.kind === "Transport",
  );

  const f = parseExposition(registry.render());
  const count = (op: string, outcome: string) =>
    sampleValue(f, "tierd_store_requests_total", { op, outcome });
  assert.equal(count("put", "ok"), 2);
  assert.equal(count("put", "already_exists"), 1);
  assert.equal(count("put", "precondition_failed"), 1);
  assert.equal(count("get", "ok"), 1);
  assert.equal(count("get", "not_found"), 1);
  assert.equal(count("get", "transport"), 1);
  assert.equal(count("list", "ok"), 1);
  assert.equal(count("delete", "ok"), 1);
  assert.equal(count("head", "throttled"), 1);
  assert.equal(sampleValue(f, "tierd_store_throttled_total", { op: "head" }), 1);
  assert.equal(sampleValue(f, "tierd_store_request_duration_seconds_count", { op: "get" }), 3);
  // The instrumented store issued exactly the requests it was asked for.
  assert.equal(sim.requestCount("get"), 3);
});
