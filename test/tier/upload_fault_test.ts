// What keeps a partition's uploads stalled: the store faults of its copy chain (copies, and the
// cleanups that must come before a copy is tried again), since the first pass of the run, with
// the latest; cleared by a pass without one, restarted when the chain moves. Faults of other
// work (retention deletes) do not count.
import assert from "node:assert/strict";
import { systemClock } from "../../src/base/clock.ts";
import { decorateStore } from "../../providers/decorate.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { StoreError } from "../../providers/types.ts";
import { generatePartition } from "../../src/format/generate.ts";
import { silentLogger } from "../../src/log.ts";
import { describeProblem, type Problem } from "../../src/tier/problem.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import { nextUploadFault, type UploadFault } from "../../src/tier/upload_fault.ts";
import { testConfig } from "../_config.ts";
import { FakeClock } from "../_fake_clock.ts";
import { tempDir } from "../_util.ts";

Deno.test("nextUploadFault: a run of failures keeps its start and counts, the chain moving restarts it", () => {
  // A pass whose faults were met at `at`, `at + 1`, ….
  const fault = (what: string): Problem => ({
    kind: "copy",
    what,
    detail: "connect ECONNREFUSED",
    storeFault: true,
  });
  const pass = (at: number, whats: string[], progressed = false) => ({
    faults: whats.map((what, i) => ({ at: at + i, problem: fault(what) })),
    progressed,
  });
  let f: UploadFault | undefined = nextUploadFault(undefined, pass(100, ["a", "b"]));
  assert.deepEqual(f, { since: 100, failures: 2, latest: fault("b") });
  f = nextUploadFault(f, pass(200, ["c"]));
  assert.deepEqual(f, { since: 100, failures: 3, latest: fault("c") }, "the same run");
  // A segment copied, then the next one failing: newer work, failing since its first fault.
  f = nextUploadFault(f, pass(300, ["d"], true));
  assert.deepEqual(f, { since: 300, failures: 1, latest: fault("d") });
  assert.equal(nextUploadFault(f, pass(400, [])), undefined, "a pass without a fault ends it");
  assert.equal(nextUploadFault(f, pass(400, [], true)), undefined);
});

Deno.test("a partition's upload fault follows its passes: copies and cleanups count, retention deletes do not", async () => {
  const tmp = await tempDir("tierd-upload-fault");
  const config = testConfig({ dir: tmp.path, backend: "sim", format: "iggy-0.9" });
  const segments = await generatePartition({
    format: "iggy-0.9",
    dataDir: config.agent.data_dir,
    stream: 0,
    topic: 0,
    partition: 0,
    messages: 400,
    segmentSize: 16 * 1024,
    payloadSize: 100,
  });
  assert.ok(segments.length >= 3);
  const down = { put: "", delete: false };
  const store = decorateStore(new SimStore(), (call) => {
    if (call.op === "put" && down.put !== "") {
      return Promise.reject(new StoreError("Transport", down.put));
    }
    if (call.op === "delete" && down.delete) {
      return Promise.reject(new StoreError("Transport", "delete: connection reset"));
    }
    return call.run(call.signal);
  });
  const clock = new FakeClock(systemClock.now() + 60_000);
  const worker = new TierWorker({
    config,
    store,
    prefix: "iggy",
    logger: silentLogger,
    clock,
    rng: () => 0.5,
  });
  const pass = async () => {
    const report = await clock.runUntil(worker.pass());
    return { report, fault: worker.partitions[0].uploadFault };
  };
  try {
    down.put = "connect ECONNREFUSED";
    const started = clock.now();
    const first = await pass();
    assert.equal(first.report.storeUnreachable, true);
    // The first copy, then (its objects cleaned up) the copy again: two faults, since the
    // first of them.
    const since = first.fault!.since;
    assert.ok(since >= started && since <= clock.now(), `${since}`);
    assert.equal(first.fault?.failures, 2);
    assert.equal(first.fault?.latest.kind, "copy");
    assert.match(describeProblem(first.fault!.latest), /\.log: connect ECONNREFUSED$/);

    clock.advance(60_000);
    down.put = "503 SlowDown";
    const second = await pass();
    assert.equal(second.fault?.since, since, "still the run that began in the first pass");
    assert.equal(second.fault?.failures, 3);
    assert.match(
      describeProblem(second.fault!.latest),
      /\.log: 503 SlowDown$/,
      "the latest fault, not the first",
    );

    // The store answers again: the chain moves, the fault is over.
    down.put = "";
    const third = await pass();
    assert.ok(third.report.copied > 0);
    assert.equal(third.report.storeUnreachable, false);
    assert.equal(third.fault, undefined);

    // Retention's deletes failing on store faults are not an upload stall.
    config.topic[0].message_expiry = 1000; // everything expired: retention deletes every copy
    down.delete = true;
    const fourth = await pass();
    assert.equal(fourth.report.storeUnreachable, true);
    assert.ok(fourth.report.problems.some((p) => p.kind === "retention_delete" && p.storeFault));
    assert.equal(fourth.fault, undefined);
  } finally {
    await worker.close();
    await tmp.cleanup();
  }
});
