// The registry renders what a Prometheus scraper accepts, with the values and labels set.
import assert from "node:assert/strict";
import fc from "fast-check";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics, observePartitions } from "../../src/metrics/tierd.ts";
import { tierObserver } from "../../src/metrics/observers.ts";
import { systemClock } from "../../src/base/clock.ts";
import { parseExposition, sampleValue } from "./_exposition.ts";

Deno.test("counters, gauges and histograms render with their values", () => {
  const r = new Registry();
  const c = r.counter("t_requests_total", "Requests.", ["op", "outcome"]);
  const g = r.gauge("t_bytes", "Bytes.\nSecond line with \\ backslash.");
  const h = r.histogram("t_seconds", "Durations.", ["op"], [0.1, 1, 10]);
  const plain = r.counter("t_plain_total", "Never touched.");
  c.inc({ op: "get", outcome: "ok" });
  c.inc({ op: "get", outcome: "ok" }, 2);
  c.inc({ op: "put", outcome: "throttled" });
  g.set(undefined, 42.5);
  for (const v of [0.05, 0.1, 0.5, 5, 50]) h.observe({ op: "get" }, v);
  const f = parseExposition(r.render());
  assert.equal(f.get("t_requests_total")!.type, "counter");
  assert.equal(sampleValue(f, "t_requests_total", { op: "get", outcome: "ok" }), 3);
  assert.equal(sampleValue(f, "t_requests_total", { op: "put", outcome: "throttled" }), 1);
  assert.equal(sampleValue(f, "t_bytes"), 42.5);
  assert.equal(f.get("t_bytes")!.help, "Bytes.\nSecond line with \\\\ backslash.");
  assert.equal(sampleValue(f, "t_plain_total"), 0, "a label-less counter shows from the start");
  assert.equal(f.get("t_seconds")!.type, "histogram");
  const bucket = (le: string) => sampleValue(f, "t_seconds_bucket", { op: "get", le });
  assert.deepEqual(["0.1", "1", "10", "+Inf"].map(bucket), [2, 3, 4, 5]);
  assert.equal(sampleValue(f, "t_seconds_count", { op: "get" }), 5);
  assert.ok(Math.abs(sampleValue(f, "t_seconds_sum", { op: "get" })! - 55.65) < 1e-9);
  assert.equal(plain.value(), 0);
  assert.equal(c.value({ op: "get", outcome: "ok" }), 3);
});

Deno.test("label values of any text survive escaping", () => {
  fc.assert(
    fc.property(fc.string({ unit: "binary", maxLength: 30 }), fc.nat(1000), (text, n) => {
      const r = new Registry();
      const c = r.counter("t_total", "x", ["v"]);
      c.inc({ v: text }, n);
      const f = parseExposition(r.render());
      assert.equal(f.get("t_total")!.samples[0].labels.v, text);
      assert.equal(sampleValue(f, "t_total", { v: text }), n);
    }),
    { numRuns: 300 },
  );
});

Deno.test("invalid metrics and calls are refused", () => {
  const r = new Registry();
  r.counter("t_total", "x");
  assert.throws(() => r.counter("t_total", "again"), /already registered/);
  assert.throws(() => r.gauge("bad name", "x"), /invalid metric name/);
  assert.throws(() => r.gauge("t_g", "x", ["__reserved"]), /invalid label name/);
  assert.throws(() => r.histogram("t_h", "x", ["le"]), /le/);
  assert.throws(() => r.histogram("t_h2", "x", [], [1, 1]), /strictly increasing/);
  const c = r.counter("t_l_total", "x", ["a"]);
  assert.throws(() => c.inc({ a: "1" }, -1), /cannot increase/);
  assert.throws(() => c.inc({} as { a: string }), /label a is missing/);
  assert.throws(() => c.inc({ a: "1", b: "2" } as { a: string }), /no label "b"/);
});

Deno.test("every documented metric is exported, and partition gauges are recomputed", () => {
  const r = new Registry();
  const m = createTierdMetrics(r);
  const part = (partition: number, localBytes: number) => ({
    stream: 1,
    topic: 2,
    partition,
    localBytes,
    remoteBytes: 10,
    floor: 99n,
    segments: { dangling: 1 },
    danglingBytes: 5,
    copyLag: { segments: 2, bytes: 7 },
    deleteLag: { segments: 3, bytes: 30, oldestDueAt: 1_750_000_000_000 },
  });
  const now = 1_750_000_090_000;
  observePartitions(m, [part(0, 100), part(1, 200)], now);
  observePartitions(m, [part(1, 300)], now); // partition 0 went away
  const f = parseExposition(r.render());
  for (
    const name of [
      "tierd_local_bytes",
      "tierd_remote_bytes",
      "tierd_uploads_total",
      "tierd_upload_duration_seconds",
      "tierd_upload_bytes_total",
      "tierd_upload_stalled",
      "tierd_fetches_total",
      "tierd_fetch_duration_seconds",
      "tierd_cache_hits_total",
      "tierd_cache_misses_total",
      "tierd_cache_bytes",
      "tierd_cache_evictions_total",
      "tierd_store_requests_total",
      "tierd_store_throttled_total",
      "tierd_dangling_remote_log_segments",
      "tierd_dangling_remote_log_bytes",
      "tierd_segments_lost_before_upload_total",
      "tierd_evictions_total",
      "tierd_remote_deletes_total",
      "tierd_remote_objects_missing_total",
      "tierd_tiered_up_to_offset",
      "tierd_remote_copy_lag_bytes",
      "tierd_remote_copy_lag_segments",
    ]
  ) {
    assert.ok(f.has(name), name);
  }
  assert.equal(
    sampleValue(f, "tierd_local_bytes", { stream: "1", topic: "2", partition: "1" }),
    300,
  );
  assert.equal(
    sampleValue(f, "tierd_local_bytes", { stream: "1", topic: "2", partition: "0" }),
    undefined,
  );
  assert.equal(
    sampleValue(f, "tierd_tiered_up_to_offset", { stream: "1", topic: "2", partition: "1" }),
    99,
  );
  assert.equal(
    sampleValue(f, "tierd_dangling_remote_log_segments", { stream: "1", topic: "2" }),
    1,
  );
  assert.equal(sampleValue(f, "tierd_upload_duration_seconds_count"), 0);
  const p1 = { stream: "1", topic: "2", partition: "1" };
  assert.equal(sampleValue(f, "tierd_remote_delete_lag_segments", p1), 3);
  assert.equal(sampleValue(f, "tierd_remote_delete_lag_bytes", p1), 30);
  assert.equal(sampleValue(f, "tierd_remote_delete_overdue_seconds", p1), 90);
  assert.equal(
    sampleValue(f, "tierd_remote_delete_lag_segments", { ...p1, partition: "0" }),
    undefined,
  );
  // Nothing pending, or nothing due yet: not overdue.
  observePartitions(m, [{ ...part(1, 300), deleteLag: { segments: 0, bytes: 0 } }], now);
  assert.equal(
    sampleValue(parseExposition(r.render()), "tierd_remote_delete_overdue_seconds", p1),
    0,
  );
  observePartitions(m, [{
    ...part(1, 300),
    deleteLag: { segments: 1, bytes: 9, oldestDueAt: now + 60_000 },
  }], now);
  assert.equal(
    sampleValue(parseExposition(r.render()), "tierd_remote_delete_overdue_seconds", p1),
    0,
  );
});

Deno.test("tierd_eviction_blocked has one series per waiting partition, labelled with why", () => {
  const r = new Registry();
  const m = createTierdMetrics(r);
  const o = tierObserver(m);
  const p = (partition: number) => ({ stream: 1, topic: 2, partition });
  const sample = (partition: number, reason: string) =>
    sampleValue(parseExposition(r.render()), "tierd_eviction_blocked", {
      stream: "1",
      topic: "2",
      partition: String(partition),
      reason,
    });
  assert.ok(parseExposition(r.render()).has("tierd_eviction_blocked"));
  o.evictionBlocked!(p(0), "consumer_offset");
  o.evictionBlocked!(p(1), "broker_running");
  assert.equal(sample(0, "consumer_offset"), 1);
  assert.equal(sample(1, "broker_running"), 1);
  o.evictionBlocked!(p(0), "broker_kept");
  assert.equal(sample(0, "consumer_offset"), undefined, "a new reason replaces the old");
  assert.equal(sample(0, "broker_kept"), 1);
  o.evictionBlocked!(p(0), undefined);
  o.evictionBlocked!(p(1), undefined);
  assert.equal(sample(0, "broker_kept"), undefined);
  assert.equal(sample(1, "broker_running"), undefined);
});

Deno.test("tierd_upload_stalled_since_seconds holds when the stall began, 0 once uploads flow", () => {
  const r = new Registry();
  const m = createTierdMetrics(r);
  let now = 1_750_000_000_000;
  const o = tierObserver(m, { ...systemClock, now: () => now });
  const since = () =>
    sampleValue(parseExposition(r.render()), "tierd_upload_stalled_since_seconds");
  assert.equal(since(), 0);
  o.stalled!(1);
  assert.equal(since(), 1_750_000_000);
  now += 60_000;
  o.stalled!(1); // still the same stall: its start stays
  assert.equal(since(), 1_750_000_000);
  o.stalled!(0);
  assert.equal(since(), 0);
  now += 60_000;
  o.stalled!(1);
  assert.equal(since(), 1_750_000_120, "a new stall starts anew");
});
