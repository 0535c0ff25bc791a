// What an operator sees in /metrics after a scripted run of the real tier worker and read path
// on a sim store: copies and fetches counted per topic (a topic whose copies the store refuses
// shows its failures alone), and the remote-deletion lag of a partition whose copies retention
// chose — counted while they wait for delete_grace, overdue once it is over, gone once deleted.
import assert from "node:assert/strict";
import { systemClock } from "../../src/base/clock.ts";
import { decorateStore } from "../../providers/decorate.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { StoreError } from "../../providers/types.ts";
import { generatePartition } from "../../src/format/generate.ts";
import { createApp } from "../../src/http/app.ts";
import { partitionOfSegmentKey } from "../../src/layout/object_keys.ts";
import { silentLogger } from "../../src/log.ts";
import { tierObserver } from "../../src/metrics/observers.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics, initTopicSeries } from "../../src/metrics/tierd.ts";
import { createReadContext } from "../../src/read/context.ts";
import { describeProblem } from "../../src/tier/problem.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import { testConfig } from "../_config.ts";
import { FakeClock } from "../_fake_clock.ts";
import { tempDir } from "../_util.ts";
import { parseExposition, sampleValue } from "./_exposition.ts";

const HOUR = 3_600_000;

Deno.test("/metrics after a scripted run: copies and fetches per topic, and the remote-deletion lag", async () => {
  const tmp = await tempDir("tierd-scrape");
  const topics = [{ stream: 0, topic: 0 }, { stream: 0, topic: 1 }];
  const config = testConfig({ dir: tmp.path, backend: "sim", format: "iggy-0.9", topics });
  // Topic 0/0: everything expired (the generator writes 2025 timestamps), its local copies
  // evicted at once, and a copy deleted only an hour after it became deletable. Topic 0/1: no
  // retention at all.
  const expiring = config.topic.find((t) => t.topic === 0)!;
  expiring.message_expiry = 1000;
  expiring.local_retention_size = 0;
  config.tiered_storage.delete_grace = HOUR;
  const gen = {
    format: "iggy-0.9" as const,
    dataDir: config.agent.data_dir,
    stream: 0,
    partition: 0,
    messages: 400,
    segmentSize: 16 * 1024,
    payloadSize: 100,
  };
  const kept = await generatePartition({ ...gen, topic: 0 });
  await generatePartition({ ...gen, topic: 1 });
  const sealed = kept.slice(0, -1);
  const sealedBytes = sealed.reduce((n, s) => n + s.size, 0);

  // The store refuses every object of topic 0/1, and, when asked, the .log reads of topic 0/0.
  const faults = { logGets: false };
  const store = decorateStore(new SimStore(), (call) => {
    const topic = partitionOfSegmentKey(call.key)?.topic;
    if (call.op === "put" && topic === 1) {
      return Promise.reject(new StoreError("Malformed", "the store refused the object"));
    }
    if (call.op === "get" && faults.logGets && call.key.endsWith(".log")) {
      return Promise.reject(new StoreError("Transport", "connection reset"));
    }
    return call.run(call.signal);
  });
  // Ahead of the real clock, so the files just written count as quiet (sealed).
  const clock = new FakeClock(systemClock.now() + 60_000);
  const registry = new Registry();
  const metrics = createTierdMetrics(registry);
  initTopicSeries(metrics, topics);
  const worker = new TierWorker({
    config,
    store,
    prefix: "iggy",
    logger: silentLogger,
    clock,
    observer: tierObserver(metrics, clock),
  });
  const app = createApp({
    read: createReadContext({ config, store, prefix: "iggy", states: worker, metrics, clock }),
    registry,
    metrics,
    ready: () => true,
    apiToken: "",
  });
  const scrape = async () => parseExposition(await (await app.request("/metrics")).text());
  const t00 = { stream: "0", topic: "0" };
  const t01 = { stream: "0", topic: "1" };
  const p000 = { ...t00, partition: "0" };
  try {
    // Before anything: every topic's series at 0.
    let f = await scrape();
    for (const outcome of ["ok", "adopted", "failed"]) {
      assert.equal(sampleValue(f, "tierd_uploads_total", { ...t01, outcome }), 0, outcome);
    }
    assert.equal(sampleValue(f, "tierd_fetches_total", { ...t00, outcome: "error" }), 0);

    const report = await worker.pass();
    assert.ok(
      report.problems.some((p) =>
        p.kind === "copy" && p.detail.includes("the store refused the object")
      ),
      report.problems.map(describeProblem).join("\n"),
    );
    f = await scrape();
    assert.equal(sampleValue(f, "tierd_uploads_total", { ...t00, outcome: "ok" }), sealed.length);
    assert.equal(sampleValue(f, "tierd_uploads_total", { ...t00, outcome: "failed" }), 0);
    assert.equal(sampleValue(f, "tierd_upload_bytes_total", t00), sealedBytes);
    assert.equal(sampleValue(f, "tierd_uploads_total", { ...t01, outcome: "ok" }), 0);
    // The copy, then (its dangling objects cleaned up) the copy again in the same pass.
    assert.equal(sampleValue(f, "tierd_uploads_total", { ...t01, outcome: "failed" }), 2);
    assert.equal(sampleValue(f, "tierd_upload_bytes_total", t01), 0);
    // Retention chose every copy of 0/0; they wait for delete_grace: counted, not overdue.
    assert.equal(sampleValue(f, "tierd_remote_delete_lag_segments", p000), sealed.length);
    assert.equal(sampleValue(f, "tierd_remote_delete_lag_bytes", p000), sealedBytes);
    assert.equal(sampleValue(f, "tierd_remote_delete_overdue_seconds", p000), 0);
    const p010 = { ...t01, partition: "0" };
    assert.equal(sampleValue(f, "tierd_remote_delete_lag_segments", p010), 1, "a dangling copy");
    assert.equal(sampleValue(f, "tierd_remote_delete_overdue_seconds", p010), 0);

    // Reads of the evicted data fetch from the store, counted for topic 0/0.
    const records = "/v1/streams/0/topics/0/partitions/0/records?offset=0&max_bytes=100";
    const read = await app.request(records);
    assert.equal(read.status, 200, await read.clone().text());
    assert.equal(read.headers.get("x-tierd-source"), "remote");
    await read.arrayBuffer();
    f = await scrape();
    const ok = sampleValue(f, "tierd_fetches_total", { ...t00, outcome: "ok" })!;
    assert.ok(ok >= 1, `${ok} fetches`);
    assert.ok(sampleValue(f, "tierd_fetch_bytes_total", t00)! >= 100);
    assert.equal(sampleValue(f, "tierd_fetches_total", { ...t01, outcome: "ok" }), 0);
    faults.logGets = true;
    const failed = await app.request(records);
    assert.equal(failed.status, 503);
    await failed.body?.cancel();
    f = await scrape();
    assert.ok(sampleValue(f, "tierd_fetches_total", { ...t00, outcome: "error" })! >= 1);
    assert.equal(sampleValue(f, "tierd_fetches_total", { ...t00, outcome: "ok" }), ok);
    assert.equal(sampleValue(f, "tierd_fetches_total", { ...t01, outcome: "error" }), 0);

    // Two hours on, no pass: the grace ended an hour ago, so the oldest deletion is that overdue.
    clock.advance(2 * HOUR);
    f = await scrape();
    assert.equal(sampleValue(f, "tierd_remote_delete_overdue_seconds", p000), 3600);
    assert.equal(sampleValue(f, "tierd_remote_delete_lag_segments", p000), sealed.length);

    // The next pass deletes them: no lag, nothing overdue.
    await worker.pass();
    f = await scrape();
    assert.equal(sampleValue(f, "tierd_remote_deletes_total"), sealed.length);
    assert.equal(sampleValue(f, "tierd_remote_delete_lag_segments", p000), 0);
    assert.equal(sampleValue(f, "tierd_remote_delete_lag_bytes", p000), 0);
    assert.equal(sampleValue(f, "tierd_remote_delete_overdue_seconds", p000), 0);
  } finally {
    await worker.close();
    await tmp.cleanup();
  }
});
