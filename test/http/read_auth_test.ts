// Access control of the records route (`agent.read_auth`), and the ops listener: with `token`,
// a read without the token is 401 (with a challenge) and with a wrong one 403, and neither reads
// a byte from the store or reserves read memory; the right token reads. The ops app answers
// probes and metrics and nothing else. (`iggy` against the real servers: test/e2e/
// iggy_tcp_clients_test.ts.)
import assert from "node:assert/strict";
import { createOpsApp } from "../../src/http/app.ts";
import { tokenReadGuard } from "../../src/http/read_auth.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics } from "../../src/metrics/tierd.ts";
import { buildScenario } from "../read/_scenario.ts";
import { appFor, errorBody, RECORDS } from "./_app.ts";

const s = await buildScenario({
  format: "iggy-0.8",
  before: 40,
  after: 10,
  segmentSize: 1024,
  payloadSize: 32,
  evict: 2,
});

Deno.test("read_auth = token: no token 401, a wrong one 403, neither reads the store", async () => {
  const { app } = appFor(s, { readGuard: tokenReadGuard("read-token-123") });
  s.store.resetCounts();
  const none = await app.request(`${RECORDS}?offset=0`);
  assert.equal(none.status, 401);
  assert.match(none.headers.get("www-authenticate") ?? "", /Bearer/);
  assert.equal((await errorBody(none)).error, "unauthorized");
  for (const auth of ["Bearer wrong-token", "Bearer read-token-1234", "Basic cmVhZDp4"]) {
    const res = await app.request(`${RECORDS}?offset=0`, { headers: { authorization: auth } });
    assert.equal(res.status, auth.startsWith("Basic") ? 401 : 403, auth);
    await res.body?.cancel();
  }
  assert.equal(s.store.requestCount("get"), 0, "nothing was read from the store");
  const ok = await app.request(`${RECORDS}?offset=0`, {
    headers: { authorization: "Bearer read-token-123" },
  });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get("x-tierd-first-offset"), "0");
  await ok.body?.cancel();
});

Deno.test("the ops app answers probes and metrics, and nothing of the data API", async () => {
  const registry = new Registry();
  const metrics = createTierdMetrics(registry);
  let ready = false;
  const ops = createOpsApp({ read: s.context({ metrics }), registry, metrics, ready: () => ready });
  assert.equal((await ops.request("/healthz")).status, 200);
  const notReady = await ops.request("/readyz");
  assert.equal(notReady.status, 503);
  await notReady.body?.cancel();
  ready = true;
  assert.equal(await (await ops.request("/readyz")).text(), "ready");
  assert.match(await (await ops.request("/metrics")).text(), /tierd_/);
  for (const path of [`${RECORDS}?offset=0`, "/v1/partitions", "/v1/status", "/"]) {
    const res = await ops.request(path);
    assert.equal(res.status, 404, path);
    await res.body?.cancel();
  }
});
