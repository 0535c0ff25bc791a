// The agent's side of the status: a partition's work from its last pass report (errors, the
// store fault flag, pending copies), what keeps its copies failing and why its eviction waits,
// the first pass's progress from the worker, and the store's state from the metrics.
import assert from "node:assert/strict";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics } from "../../src/metrics/tierd.ts";
import { initStoreSeries } from "../../src/metrics/instrument_store.ts";
import { agentView } from "../../src/runtime/agent_view.ts";
import { CopyProgress } from "../../src/runtime/progress.ts";
import type { Problem } from "../../src/tier/problem.ts";
import type { TierWorker } from "../../src/tier/tier_worker.ts";
import { FakeClock } from "../_fake_clock.ts";

Deno.test("the agent view reads the worker, the progress and the metrics", () => {
  const clock = new FakeClock();
  const progress = new CopyProgress(clock);
  clock.advance(2000);
  progress.copied("1/1/0", 4000);
  const metrics = createTierdMetrics(new Registry());
  initStoreSeries(metrics);
  metrics.uploadStalled.set(undefined, 1);
  metrics.storeThrottled.inc({ op: "put" }, 3);
  metrics.storeThrottled.inc({ op: "head" }, 2);
  const refused: Problem = {
    kind: "copy",
    what: "x.log",
    detail: "connect ECONNREFUSED",
    segment: 0n,
    storeFault: true,
  };
  const report = {
    problems: [refused],
    storeUnreachable: true,
    pending: 4,
  };
  const worker = {
    partitions: [
      {
        label: "1/1/0",
        lastPass: report,
        uploadFault: { since: 1_000, failures: 3, latest: refused },
        evictionBlock: {
          reason: "consumer_offset",
          text: "eviction waits for consumer 1 at offset 5",
        },
      },
      { label: "1/1/1", lastPass: undefined },
    ],
    failedToOpen: new Map([["1/1/2", "EACCES"]]),
    lastPass: undefined,
    housekeeper: {
      status: () => ({ lastJobs: [], requestsUsed: 0, verifyInProgress: false, unrepairable: 0 }),
    },
  } as unknown as TierWorker;
  const view = agentView({ worker, progress, metrics });
  assert.deepEqual(view.partition("1/1/0"), {
    firstPassDone: true,
    copied: { segments: 1, bytes: 4000 },
    bytesPerSecond: 2000,
    problems: report.problems,
    storeUnreachable: true,
    pending: 4,
    uploadFault: { since: 1_000, failures: 3, latest: refused },
    blocked: ["eviction waits for consumer 1 at offset 5"],
  });
  assert.equal(view.partition("1/1/1")?.firstPassDone, false);
  assert.equal(view.partition("1/1/2")?.firstPassDone, false);
  assert.equal(view.partition("9/9/9"), undefined);
  assert.deepEqual(view.passes(), {
    firstPass: { done: false, partitionsDone: 1, partitionsTotal: 3 },
    last: undefined,
  });
  assert.deepEqual(view.store(), { stalled: true, throttledRequests: 5 });
  assert.equal(view.cache(), undefined);

  // With a price table: the requests counted so far, each at its class's price.
  metrics.storeRequests.inc({ op: "put", outcome: "ok" }, 2000);
  metrics.storeRequests.inc({ op: "put_part", outcome: "transport" }, 1000);
  metrics.storeRequests.inc({ op: "get", outcome: "ok" }, 10_000);
  metrics.storeRequests.inc({ op: "delete", outcome: "ok" }, 500);
  const priced = agentView({
    worker,
    progress,
    metrics,
    prices: { currency: "EUR", write_per_1000: 0.005, read_per_1000: 0.0004, delete_per_1000: 1 },
  });
  const store = priced.store();
  assert.equal(store.requests?.count, 13_500);
  assert.equal(store.requests?.currency, "EUR");
  const expected = 3000 * 0.005 / 1000 + 10_000 * 0.0004 / 1000 + 500 / 1000;
  assert.ok(Math.abs(store.requests!.cost - expected) < 1e-9, `${store.requests!.cost}`);
});
