// The HTTP API through `app.request`: health, readiness, metrics, the partition list, record
// reads (raw and JSON, gaps), the status page and admin authentication.
import assert from "node:assert/strict";
import type { AgentView } from "../../src/http/status_model.ts";
import { Buffer } from "node:buffer";
import { incarnationHex } from "../../src/layout/partition.ts";
import { parseExposition, sampleValue } from "../metrics/_exposition.ts";
import {
  buildScenario,
  expectedRead,
  loseFirstLocalSegment,
  type Scenario,
  type ScenarioOptions,
} from "../read/_scenario.ts";
import type { Problem } from "../../src/tier/problem.ts";
import { ReadBudget } from "../../src/read/read_budget.ts";
import { capturingLogger } from "../_model/tier_harness.ts";
import { appFor, errorBody, RECORDS } from "./_app.ts";

async function withScenario(
  fn: (s: Scenario) => Promise<void>,
  o: Partial<ScenarioOptions> = {},
) {
  const s = await buildScenario({
    format: "iggy-0.9",
    before: 60,
    after: 30,
    segmentSize: 1500,
    payloadSize: 40,
    messagesPerBatch: 3,
    evict: 2,
    ...o,
  });
  try {
    await fn(s);
  } finally {
    await s.cleanup();
  }
}

Deno.test("healthz is always ok; readyz waits for readiness", async () => {
  await withScenario(async (s) => {
    const { app, ready } = appFor(s);
    ready.value = false;
    const health = await app.request("/healthz");
    assert.equal(health.status, 200);
    assert.equal(await health.text(), "ok");
    const notReady = await app.request("/readyz");
    assert.equal(notReady.status, 503);
    assert.equal(notReady.headers.get("retry-after"), "1");
    assert.equal((await errorBody(notReady)).error, "not_ready");
    ready.value = true;
    const isReady = await app.request("/readyz");
    assert.equal(isReady.status, 200);
    await isReady.body?.cancel();
  });
});

Deno.test("/v1/partitions lists exactly the documented fields", async () => {
  await withScenario(async (s) => {
    const { app } = appFor(s);
    const res = await app.request("/v1/partitions");
    assert.equal(res.status, 200);
    const list = await res.json();
    assert.equal(list.length, 1);
    const p = list[0];
    assert.deepEqual(Object.keys(p).sort(), [
      "copied",
      "copy_lag",
      "copy_rate_bytes_per_second",
      "eta_seconds",
      "first_pass_done",
      "format",
      "generation",
      "incarnation",
      "local_bytes",
      "partition",
      "problems",
      "remote_bytes",
      "remote_delete_lag",
      "segments",
      "state",
      "state_detail",
      "stream",
      "tiered_up_to_offset",
      "topic",
    ]);
    // Without the agent: no rate, no first pass, no copies since start.
    assert.equal(p.copied, null);
    assert.equal(p.copy_rate_bytes_per_second, null);
    assert.equal(p.first_pass_done, null);
    assert.deepEqual(p.problems, []);
    assert.equal(typeof p.copy_lag.segments, "number");
    assert.equal(typeof p.copy_lag.bytes, "string");
    assert.deepEqual(p.remote_delete_lag, { segments: 0, bytes: "0", oldest_due_at: null });
    const state = (await s.context().states.state(s.ids))!;
    assert.deepEqual([p.stream, p.topic, p.partition], [0, 0, 0]);
    assert.equal(p.format, "iggy-0.9");
    assert.equal(p.incarnation, incarnationHex(state.incarnation!));
    assert.match(p.incarnation, /^[0-9a-f]{16}$/);
    assert.equal(p.generation, "0");
    assert.equal(p.tiered_up_to_offset, state.floor.toString());
    const localSegments = new Set(s.records.filter((r) => !r.evicted).map((r) => r.segment));
    assert.equal(p.segments.remote, 2);
    assert.equal(p.segments.uploaded, s.copied.length - 2);
    assert.ok(p.segments.local >= localSegments.size);
    assert.equal(p.segments.dangling, 0);
    const remoteBytes = s.copied.reduce(
      (n, start) =>
        n + s.records.filter((r) => r.segment === start).reduce((m, r) => m + r.bytes.length, 0),
      0,
    );
    assert.equal(p.remote_bytes, String(remoteBytes));
    assert.equal(typeof p.local_bytes, "string");
  });
});

Deno.test("/metrics parses and carries partition gauges and read counters", async () => {
  await withScenario(async (s) => {
    const { app } = appFor(s);
    const read = await app.request(`${RECORDS}?offset=0&max_bytes=100`);
    assert.equal(read.status, 200);
    await read.arrayBuffer();
    const left = await app.request(`${RECORDS}?offset=0&max_bytes=100`);
    await left.body?.cancel(); // the client leaves before the answer
    const res = await app.request("/metrics");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    const f = parseExposition(await res.text());
    const labels = { stream: "0", topic: "0", partition: "0" };
    assert.ok(sampleValue(f, "tierd_local_bytes", labels)! > 0);
    assert.ok(sampleValue(f, "tierd_remote_bytes", labels)! > 0);
    assert.equal(sampleValue(f, "tierd_reads_total", { source: "remote", outcome: "ok" }), 1);
    assert.equal(
      sampleValue(f, "tierd_reads_total", { source: "remote", outcome: "cancelled" }),
      1,
    );
    const topic = { stream: "0", topic: "0" };
    assert.ok(sampleValue(f, "tierd_fetches_total", { ...topic, outcome: "ok" })! >= 1);
    assert.equal(sampleValue(f, "tierd_remote_objects_missing_total"), 0);
  });
});

Deno.test("records: raw bytes with offsets, source and format headers", async () => {
  await withScenario(async (s) => {
    const { app } = appFor(s);
    for (const [offset, maxBytes] of [[0n, 1], [4n, 700], [25n, 100_000], [70n, 5000]] as const) {
      const res = await app.request(`${RECORDS}?offset=${offset}&max_bytes=${maxBytes}`);
      assert.equal(res.status, 200);
      const expected = expectedRead(s.records, { offset }, maxBytes)!;
      assert.equal(res.headers.get("content-type"), "application/octet-stream");
      assert.equal(res.headers.get("x-tierd-first-offset"), expected.firstOffset.toString());
      assert.equal(res.headers.get("x-tierd-next-offset"), expected.nextOffset.toString());
      assert.equal(res.headers.get("x-tierd-source"), expected.source);
      assert.equal(res.headers.get("x-tierd-format"), "iggy-0.9");
      assert.equal(res.headers.get("x-tierd-gap"), null);
      assert.deepEqual(new Uint8Array(await res.arrayBuffer()), expected.bytes);
    }
    const t = s.records[5].timestamp;
    const byTime = await app.request(`${RECORDS}?timestamp=${t}`);
    assert.equal(byTime.headers.get("x-tierd-first-offset"), s.records[5].firstOffset.toString());
    await byTime.body?.cancel();
  });
});

Deno.test("records: format=json decodes messages", async () => {
  await withScenario(async (s) => {
    const { app } = appFor(s);
    const res = await app.request(`${RECORDS}?offset=10&max_bytes=2000&format=json`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "application/json");
    const body = await res.json();
    assert.equal(body.first_offset, res.headers.get("x-tierd-first-offset"));
    // Raw bytes start at a whole record (a batch); decoded messages start where asked.
    assert.ok(BigInt(body.first_offset) <= 10n);
    assert.equal(body.messages[0].offset, "10");
    const ten = body.messages.find((m: { offset: string }) => m.offset === "10");
    assert.deepEqual(ten.headers, [{
      key: "gen",
      key_kind: "string",
      value: "10",
      value_kind: "uint64",
    }]);
    assert.equal(Buffer.from(ten.payload, "base64").length, 40);
    assert.match(ten.id, /^\d+$/);
  });
});

Deno.test("records: a read inside a lost gap says so in x-tierd-gap", async () => {
  await withScenario(async (s) => {
    const gap = await loseFirstLocalSegment(s);
    const { app } = appFor(s);
    const res = await app.request(`${RECORDS}?offset=${gap.from + 1n}&format=json`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-tierd-gap"), `${gap.from}-${gap.to}`);
    assert.equal(res.headers.get("x-tierd-first-offset"), (gap.to + 1n).toString());
    const body = await res.json();
    assert.deepEqual(body.gap, { from: gap.from.toString(), to: gap.to.toString() });
  }, { evict: 100, after: 60 });
});

Deno.test("the status page lists partitions without external assets", async () => {
  await withScenario(async (s) => {
    const { app } = appFor(s);
    const res = await app.request("/");
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type")!, /^text\/html/);
    const html = await res.text();
    assert.match(html, /0\/0\/0/);
    assert.match(html, /in-memory sim store/);
    assert.match(html, /Uptime/);
    // Self-contained: an inline refresh script, nothing loaded from elsewhere.
    assert.doesNotMatch(html, /<script[^>]+src=|<link|src=|https?:\/\//i);
    assert.match(html, /<noscript><meta http-equiv="refresh" content="5"><\/noscript>/);
    const fragment = await (await app.request("/?fragment=1")).text();
    assert.match(fragment, /0\/0\/0/);
    assert.doesNotMatch(fragment, /<html|<script/);
    assert.match(await (await app.request("/?refresh=2")).text(), /content="2"/);
  });
});

Deno.test("the status page names a damaged segment with its file and byte, in red, escaped", async () => {
  await withScenario(async (s) => {
    // The copy phase's problem for a damaged sealed segment, as the pass report carries it.
    const damaged: Problem = {
      kind: "segment_damaged",
      what: "segment 96",
      detail: "/data/0.log @ byte 4242: frame checksum mismatch <b>",
      segment: 96n,
      storeFault: false,
    };
    const work = {
      firstPassDone: true,
      copied: { segments: 0, bytes: 0 },
      bytesPerSecond: 0,
      problems: [damaged],
      storeUnreachable: false,
      pending: 1,
      blocked: [],
    };
    const agent: AgentView = {
      partition: (label) => label === "0/0/0" ? work : undefined,
      passes: () => ({
        firstPass: { done: true, partitionsDone: 1, partitionsTotal: 1 },
        last: undefined,
      }),
      store: () => ({ stalled: false, throttledRequests: 0 }),
      bytesPerSecond: () => 0,
      cache: () => undefined,
      housekeeping: () => undefined,
    };
    const html = await (await appFor(s, { agent }).app.request("/")).text();
    assert.match(html, /<div class="bad" data-problem="damaged"/);
    assert.ok(
      html.includes(
        "/data/0.log @ byte 4242: frame checksum mismatch &#60;b&#62; " +
          "(segment 96 is damaged: not copied)",
      ),
      html,
    );
    const clean = await (await appFor(s).app.request("/")).text();
    assert.doesNotMatch(clean, /data-problem="damaged"/);
  });
});

Deno.test("admin routes need the bearer token; without one they are disabled", async () => {
  await withScenario(async (s) => {
    let passes = 0;
    let compactions = 0;
    const admin = {
      pass: () => Promise.resolve({ copied: BigInt(++passes) }),
      compact: () => Promise.resolve(void compactions++),
    };
    const { app } = appFor(s, { apiToken: "s3cret-token", admin });
    const post = (path: string, auth?: string) =>
      app.request(path, { method: "POST", headers: auth ? { authorization: auth } : {} });

    const missing = await post("/v1/admin/pass");
    assert.equal(missing.status, 401);
    assert.match(missing.headers.get("www-authenticate")!, /^Bearer/);
    assert.equal((await errorBody(missing)).error, "unauthorized");
    const basic = await post("/v1/admin/pass", "Basic czNjcmV0LXRva2Vu");
    assert.equal(basic.status, 401);
    await basic.body?.cancel();
    for (const wrong of ["Bearer s3cret", "Bearer s3cret-token-", "Bearer S3CRET-TOKEN"]) {
      const res = await post("/v1/admin/pass", wrong);
      assert.equal(res.status, 403, wrong);
      assert.equal((await errorBody(res)).error, "forbidden");
    }
    assert.equal(passes, 0);
    const ok = await post("/v1/admin/pass", "Bearer s3cret-token");
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { ok: true, op: "pass", report: { copied: "1" } });
    const compact = await post("/v1/admin/compact", "bearer s3cret-token");
    assert.equal(compact.status, 200);
    await compact.body?.cancel();
    assert.equal(compactions, 1);
    const unknown = await post("/v1/admin/explode", "Bearer s3cret-token");
    assert.equal(unknown.status, 404);
    assert.equal((await errorBody(unknown)).error, "not_found");
    const unknownNoAuth = await post("/v1/admin/explode");
    assert.equal(unknownNoAuth.status, 401, "no route is probed without the token");
    await unknownNoAuth.body?.cancel();

    const disabled = appFor(s, { apiToken: "", admin }).app;
    const res = await disabled.request("/v1/admin/pass", {
      method: "POST",
      headers: { authorization: "Bearer " },
    });
    assert.equal(res.status, 403);
    const body = await errorBody(res);
    assert.equal(body.error, "admin_disabled");
    assert.match(body.message, /api_token/);
    assert.equal(passes, 1);
  });
});

Deno.test("records: a client that leaves mid-answer gives its read memory back, and nothing is logged as failed", async () => {
  await withScenario(async (s) => {
    const budget = new ReadBudget(64 * 1024 * 1024);
    const { logger, lines } = capturingLogger("info");
    const { app, registry } = appFor(s, { read: { budget, logger } });
    // A whole partition's worth, so the answer spans several windows of ~1 MiB.
    const res = await app.request(`${RECORDS}?offset=0&max_bytes=${64 * 1024 * 1024}`);
    assert.equal(res.status, 200);
    assert.ok(budget.free < budget.bytes, "the read holds its reservation while it is sent");
    const reader = res.body!.getReader();
    const first = await reader.read();
    assert.ok(!first.done && first.value.length > 0);
    const pending = reader.read(); // a window is being read for the client…
    await reader.cancel(); // …when it goes away
    await pending;
    for (let i = 0; i < 50 && budget.free < budget.bytes; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(budget.free, budget.bytes, "all of it given back");
    assert.deepEqual(lines.filter((l) => l.level === "error"), []);
    const f = parseExposition(registry.render());
    const cancelled = ["local", "remote", "mixed"].map((source) =>
      sampleValue(f, "tierd_reads_total", { source, outcome: "cancelled" }) ?? 0
    );
    assert.equal(cancelled.reduce((a, b) => a + b), 1, "counted once, as cancelled");
  }, { before: 3000, payloadSize: 1000, segmentSize: 512 * 1024, evict: 2 });
});
