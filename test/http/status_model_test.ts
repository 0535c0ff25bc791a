// The status model: each partition's problems in words (stalled, blocked, damaged, failed,
// rebuilt), topics summed from their partitions, the first pass's progress and the copy ETA,
// and the page's markup for them (red for what is wrong).
import assert from "node:assert/strict";
import type { PartitionSummary } from "../../src/read/partitions.ts";
import {
  type AgentView,
  partitionProblems,
  type PartitionWork,
  stallCause,
  statusJson,
} from "../../src/http/status_model.ts";
import { renderStatusFragment, renderStatusPage } from "../../src/http/status_page.ts";
import type { Problem as PassProblem } from "../../src/tier/problem.ts";

/** A problem of a pass, a failed copy unless `o` says otherwise. */
function problem(what: string, detail: string, o: Partial<PassProblem> = {}): PassProblem {
  return { kind: "copy", what, detail, storeFault: false, ...o };
}

/** A copy failed on a store fault. */
function fault(what: string, detail: string): PassProblem {
  return problem(what, detail, { storeFault: true });
}

function summary(partition: number, o: Partial<PartitionSummary> = {}): PartitionSummary {
  return {
    stream: 1,
    topic: 2,
    partition,
    format: "iggy-0.9",
    incarnation: 0x0123456789abcdefn,
    generation: 0n,
    floor: 99n,
    segments: { local: 3, uploaded: 1, remote: 4, dangling: 0 },
    localBytes: 3000,
    remoteBytes: 5000,
    danglingBytes: 0,
    copyLag: { segments: 2, bytes: 2000 },
    deleteLag: { segments: 0, bytes: 0 },
    health: { state: "ok" },
    holes: [],
    ...o,
  };
}

function work(o: Partial<PartitionWork> = {}): PartitionWork {
  return {
    firstPassDone: true,
    copied: { segments: 5, bytes: 5000 },
    bytesPerSecond: 100,
    problems: [],
    storeUnreachable: false,
    pending: 0,
    blocked: [],
    ...o,
  };
}

function agent(
  works: Record<string, PartitionWork>,
  stalled = false,
  firstPassDone = false,
): AgentView {
  return {
    partition: (label) => works[label],
    passes: () => ({
      firstPass: firstPassDone
        ? { done: true, partitionsDone: 2, partitionsTotal: 2 }
        : { done: false, partitionsDone: 1, partitionsTotal: 2 },
      last: {
        startedAt: 1_750_000_000_000,
        finishedAt: 1_750_000_002_500,
        problems: stalled ? [fault("iggy/x.log", "connect ECONNREFUSED 127.0.0.1:9000")] : [],
        copied: 3,
        failed: stalled ? 1 : 0,
        evicted: 0,
      },
    }),
    store: () => ({
      stalled,
      throttledRequests: 19,
      ...(stalled && { stalledSince: 1_750_000_003_000 - 25 * 60_000 }),
    }),
    bytesPerSecond: () => 200,
    cache: () => ({
      bytes: 512,
      budgetBytes: 1024,
      objects: 2,
      maxObjects: 100,
      hits: 3,
      misses: 1,
    }),
    housekeeping: () => ({
      lastRun: 1_750_000_001_000,
      lastJobs: [{
        job: "verify",
        complete: true,
        counts: { checked: 4 },
        problems: stalled
          ? [problem("verify of 1/2/0", "connect ECONNREFUSED", { kind: "housekeeping" })]
          : [],
      }],
      requestsUsed: 7,
      verifyInProgress: false,
      unrepairable: 0,
    }),
  };
}

const inputs = {
  version: "0.0.0-test",
  store: "s3 store",
  now: 1_750_000_003_000,
  uptimeSeconds: 61,
};

Deno.test("a partition's problems: stalled on a store fault, blocked, damaged, failed, rebuilt", () => {
  assert.deepEqual(partitionProblems(summary(0), work()), []);
  const stalled = partitionProblems(
    summary(0),
    work({
      storeUnreachable: true,
      pending: 2,
      problems: [fault("x.log", "connect ECONNREFUSED")],
    }),
  );
  assert.deepEqual(stalled, [{
    kind: "stalled",
    severity: "bad",
    reason: "store unreachable: x.log: connect ECONNREFUSED",
  }]);
  const blocked = partitionProblems(
    summary(0),
    work({ blocked: ["eviction waits for consumer group 7 at offset 120"] }),
  );
  assert.equal(blocked[0].kind, "blocked");
  assert.match(blocked[0].reason, /consumer group 7/);
  const damaged = partitionProblems(
    summary(0),
    work({ problems: [problem("/b/0001.log", "record checksum mismatch at byte 4096")] }),
  );
  assert.equal(damaged[0].kind, "damaged");
  assert.equal(damaged[0].reason, "/b/0001.log: record checksum mismatch at byte 4096");
  // A damaged segment is said as the copy phase has always said it.
  const segment = partitionProblems(
    summary(0),
    work({
      problems: [problem("segment 96", "/data/0.log @ byte 4242: frame length 0", {
        kind: "segment_damaged",
        segment: 96n,
      })],
    }),
  );
  assert.deepEqual(segment, [{
    kind: "damaged",
    severity: "bad",
    reason: "/data/0.log @ byte 4242: frame length 0 (segment 96 is damaged: not copied)",
  }]);
  const other = partitionProblems(
    summary(0),
    work({ problems: [problem("cleanup of segment 7", "403 AccessDenied", { kind: "cleanup" })] }),
  );
  assert.deepEqual(other.map((p) => [p.kind, p.reason]), [[
    "error",
    "cleanup of segment 7: 403 AccessDenied",
  ]]);
  const failed = partitionProblems(
    summary(0, { health: { state: "failed", detail: "EACCES journal" } }),
    undefined,
  );
  assert.deepEqual(failed.map((p) => [p.kind, p.severity]), [["failed", "bad"]]);
  const rebuilt = partitionProblems(
    summary(0, { health: { state: "rebuilt", detail: "no journal" } }),
    work(),
  );
  assert.deepEqual(rebuilt.map((p) => [p.kind, p.severity]), [["rebuilt", "warn"]]);
});

Deno.test("the status sums topics, shows first-pass progress, rate and ETA", () => {
  const s = statusJson([summary(0), summary(1, { floor: 50n })], {
    ...inputs,
    ready: true,
    agent: agent({ "1/2/0": work(), "1/2/1": work({ firstPassDone: false }) }),
  });
  assert.equal(s.partitions.length, 2);
  assert.equal(s.partitions[0].eta_seconds, 20); // 2000 bytes at 100 B/s
  assert.equal(s.partitions[1].first_pass_done, false);
  assert.deepEqual(s.first_pass, {
    done: false,
    partitions_done: 1,
    partitions_total: 2,
    segments_copied: 10,
    segments_backlog: 14,
    bytes_copied: "10000",
    bytes_backlog: "14000",
  });
  assert.deepEqual(s.copy, {
    lag_segments: 4,
    lag_bytes: "4000",
    rate_bytes_per_second: 200,
    eta_seconds: 20,
  });
  assert.equal(s.topics.length, 1);
  const t = s.topics[0];
  assert.equal(t.partitions, 2);
  assert.equal(t.local_bytes, "6000");
  assert.equal(t.tiered_up_to_offset, "50");
  assert.equal(t.copy_rate_bytes_per_second, 200);
  assert.equal(s.cache?.hit_ratio, 0.75);
  assert.equal(s.last_pass?.duration_ms, 2500);
  assert.deepEqual(s.stalled, {
    stalled: false,
    since: null,
    reason: null,
    cause: null,
    throttled_requests: 19,
  });
  const html = renderStatusFragment(s);
  assert.match(html, /First pass in progress: 1 of 2 partitions, 10 of 14 segments copied/);
  assert.match(html, /hit ratio 75\.0%/);
  assert.doesNotMatch(html, /class="bad/);
});

Deno.test("a stall shows in red with its reason, per partition and per topic", () => {
  const s = statusJson([summary(0)], {
    ...inputs,
    ready: true,
    agent: agent({
      "1/2/0": work({
        storeUnreachable: true,
        pending: 2,
        problems: [fault("iggy/x.log", "connect ECONNREFUSED 127.0.0.1:9000")],
        bytesPerSecond: 0,
      }),
    }, true),
  });
  assert.equal(s.stalled?.stalled, true);
  assert.match(s.stalled!.reason!, /^store unreachable: iggy\/x\.log: connect ECONNREFUSED/);
  // The last pass's and housekeeping's problems, in the words they have always had.
  assert.deepEqual(s.last_pass?.errors, ["iggy/x.log: connect ECONNREFUSED 127.0.0.1:9000"]);
  assert.deepEqual(s.housekeeping?.last_jobs[0].errors, ["verify of 1/2/0: connect ECONNREFUSED"]);
  assert.equal(s.partitions[0].eta_seconds, null);
  assert.match(s.topics[0].problems[0].reason, /^partition 0: store unreachable/);
  const html = renderStatusPage(s);
  assert.match(
    html,
    /<p id="stall" class="bad banner"><b>Uploads stalled since 2025-\S+ \S+ UTC \(25m 0s\)<\/b>: store unreachable/,
  );
  assert.equal(s.stalled?.since, 1_750_000_003_000 - 25 * 60_000);
  assert.match(html, /tierd resumes by itself when the store answers/);
  assert.match(html, /19 throttled requests/);
  assert.match(
    html,
    /<div class="bad" data-problem="stalled" title="[^"]*"><b>stalled<\/b>: store/,
  );
  assert.match(html, /<td>none while stalled<\/td>/);
  // No row reads a green "ok" under the red banner: the state column names the stall.
  assert.doesNotMatch(html, /<td><span class="ok">ok<\/span><\/td>/);
  assert.match(html, /<td><span class="bad">stalled<\/span><\/td>/);
});

Deno.test("every value on the page is escaped", () => {
  const s = statusJson([summary(0)], {
    ...inputs,
    store: "<img src=x onerror=alert(1)>",
    ready: false,
    agent: agent({ "1/2/0": work({ problems: [problem("<script>alert(1)", "</script>")] }) }),
  });
  const html = renderStatusFragment(s);
  assert.doesNotMatch(html, /<img|<script/);
  assert.match(html, /not ready/);
});

Deno.test("the store's requests and their estimated cost, per day at the uptime's rate", () => {
  const priced: AgentView = {
    ...agent({ "1/2/0": work() }),
    store: () => ({
      stalled: false,
      throttledRequests: 0,
      requests: { count: 12_000, cost: 0.06, currency: "USD" },
    }),
  };
  const s = statusJson([summary(0)], {
    ...inputs,
    ready: true,
    uptimeSeconds: 3600,
    agent: priced,
  });
  const r = s.store_requests!;
  assert.deepEqual([r.requests, r.estimated_cost, r.currency], [12_000, 0.06, "USD"]);
  assert.ok(Math.abs(r.per_day! - 1.44) < 1e-9, `${r.per_day}`);
  const html = renderStatusFragment(s);
  assert.match(
    html,
    /Store requests since start: 12000, estimated USD 0\.0600, about USD 1\.44 a day/,
  );
  const early = statusJson([summary(0)], {
    ...inputs,
    ready: true,
    uptimeSeconds: 30,
    agent: priced,
  });
  assert.equal(early.store_requests?.per_day, null, "not extrapolated from the first minute");
  assert.doesNotMatch(renderStatusFragment(early), /a day/);
  // Without a price table (a bare read path), nothing is said.
  assert.equal(statusJson([summary(0)], { ...inputs, ready: true }).store_requests, null);
});

Deno.test("/v1/status speaks snake_case throughout, the cache and housekeeping included", () => {
  const s = statusJson([summary(0)], { ...inputs, ready: true, agent: agent({}) });
  const keys: string[] = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) return v.forEach(walk);
    if (v === null || typeof v !== "object") return;
    for (const [k, inner] of Object.entries(v)) {
      keys.push(k);
      walk(inner);
    }
  };
  walk(JSON.parse(JSON.stringify(s)));
  assert.deepEqual(keys.filter((k) => !/^[a-z0-9_]+$/.test(k)), []);
  assert.equal(s.cache?.budget_bytes, 1024);
  assert.equal(s.housekeeping?.requests_used, 7);
  assert.equal(s.housekeeping?.last_jobs[0].counts.checked, 4);
  assert.equal(s.housekeeping?.last_verify_completed, null);
});

Deno.test("the stall names the oldest still-failing copies and their latest fault, not the last failure anywhere", () => {
  const T = 1_750_000_003_000;
  // 1/2/0 met the store's outage last (its pass's first error: a retention delete's ownership
  // check); 1/2/1's copies have failed since 20 minutes ago, 12 times, the latest a PUT.
  const works = {
    "1/2/0": work({
      storeUnreachable: true,
      pending: 1,
      problems: [
        fault("retention delete of segment 3", "GET iggy/c/owner.json: connect ECONNREFUSED"),
        fault("x/00000000000000000500.log", "connect ECONNREFUSED"),
      ],
      uploadFault: {
        since: T - 60_000,
        failures: 2,
        latest: fault("x/00000000000000000500.log", "connect ECONNREFUSED"),
      },
    }),
    "1/2/1": work({
      storeUnreachable: true,
      pending: 3,
      problems: [fault("cleanup of segment 100", "GET iggy/c/owner.json: connect ECONNREFUSED")],
      uploadFault: {
        since: T - 20 * 60_000,
        failures: 12,
        latest: fault("y/00000000000000000100.log", "PUT: 503 SlowDown"),
      },
    }),
  };
  const s = statusJson([summary(0), summary(1)], {
    ...inputs,
    ready: true,
    agent: agent(works, true),
  });
  assert.deepEqual(s.stalled?.cause, {
    partition: "1/2/1",
    since: T - 20 * 60_000,
    failures: 12,
    error: "y/00000000000000000100.log: PUT: 503 SlowDown",
  });
  assert.equal(
    s.stalled?.reason,
    "store unreachable: partition 1/2/1: y/00000000000000000100.log: PUT: 503 SlowDown",
  );
  // Each partition's own problem names what holds its copies back, not its pass's first error.
  assert.equal(
    s.partitions[0].problems[0].reason,
    "store unreachable: x/00000000000000000500.log: connect ECONNREFUSED",
  );
  const html = renderStatusFragment(s);
  assert.match(
    html,
    /Uploads stalled since [^<]+<\/b>: store unreachable: partition 1\/2\/1: y\/0+100\.log: PUT: 503 SlowDown \(its copies failing since 2025-\S+ \S+ UTC, 12 store faults\)/,
  );
  // The banner stays put whichever order the partitions come in, and on a tie the one with
  // more failures is named.
  const flipped = [{ label: "1/2/1", work: works["1/2/1"] }, {
    label: "1/2/0",
    work: works["1/2/0"],
  }];
  assert.equal(stallCause(flipped)?.partition, "1/2/1");
  const tie = (label: string, failures: number) => ({
    label,
    work: work({ uploadFault: { since: T, failures, latest: fault(label, "fault") } }),
  });
  assert.equal(stallCause([tie("1/2/0", 2), tie("1/2/1", 5)])?.partition, "1/2/1");
  assert.equal(stallCause([tie("1/2/0", 5), tie("1/2/1", 5)])?.partition, "1/2/0");
  assert.equal(stallCause([{ label: "1/2/0", work: work() }]), undefined);
  // Stalled before any copy failed (the first pass still retrying): no cause, the stall alone.
  const early = statusJson([summary(0)], { ...inputs, ready: true, agent: agent({}, true) });
  assert.deepEqual([early.stalled?.reason, early.stalled?.cause], ["store unreachable", null]);
});

Deno.test("a first pass that is done says what it copied and what is left, with no progress bar", () => {
  // 10 segments copied since start, 4 more sealed since (or failed): not "done ... 71 %".
  const s = statusJson([summary(0), summary(1)], {
    ...inputs,
    ready: true,
    agent: agent({ "1/2/0": work(), "1/2/1": work() }, false, true),
  });
  assert.equal(s.first_pass?.done, true);
  const html = renderStatusFragment(s);
  const line = /<p id="first-pass">(.*?)<\/p>/.exec(html)![1];
  assert.equal(
    line,
    "First pass done: 2 of 2 partitions gone through, 10 segments (9.8 KiB) copied since start; " +
      "4 segments (3.9 KiB) to copy now, in the copy backlog.",
  );
  assert.doesNotMatch(line, /%|<progress/);
  const drained = statusJson(
    [summary(0, { copyLag: { segments: 0, bytes: 0 } })],
    { ...inputs, ready: true, agent: agent({ "1/2/0": work() }, false, true) },
  );
  assert.match(renderStatusFragment(drained), /copied since start; nothing left to copy\.<\/p>/);
});
