// Only store faults are retried: a local segment that changes under a copy fails that copy at
// once, with its own reason, and never raises the upload-stalled gauge — while a store that
// answers transport errors is retried and does raise it.
import assert from "node:assert/strict";
import { appendFile } from "node:fs/promises";
import { systemClock } from "../../src/base/clock.ts";
import { decorateStore, type StoreOp } from "../../providers/decorate.ts";
import { SimStore } from "../../providers/sim/store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import type { Config } from "../../src/config/schema.ts";
import { type GeneratedSegment, generatePartition } from "../../src/format/generate.ts";
import { initHashes } from "../../src/hash.ts";
import { getSegment } from "../../src/state/segment_state.ts";
import { describeProblem } from "../../src/tier/problem.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import { testConfig } from "../_config.ts";
import { FakeClock } from "../_fake_clock.ts";
import {
  capturingLogger,
  durableState,
  recordingObserver,
  scratchDir,
} from "../_model/tier_harness.ts";

await initHashes();

const ID = { stream: 0, topic: 0, partition: 0 };
const MiB = 1024 * 1024;

interface World {
  config: Config;
  clock: FakeClock;
  sim: SimStore;
  segments: GeneratedSegment[];
  /** Store calls by operation, retries included. */
  calls: Map<StoreOp, number>;
  stalls: (0 | 1)[];
  worker(store: ObjectStore): TierWorker;
  cleanup(): Promise<void>;
}

/** One sealed segment of about 6 MiB (two 5 MiB parts) and a small active one. */
async function world(): Promise<World> {
  const tmp = await scratchDir("tierd-retry");
  const config = testConfig({
    dir: tmp.path,
    backend: "sim",
    partSize: "5 MiB",
    uploadTimeout: "30 s",
  });
  const segments = await generatePartition({
    format: "iggy-0.9",
    dataDir: config.agent.data_dir,
    ...ID,
    messages: 1700,
    segmentSize: 6 * MiB,
    payloadSize: 4000,
  });
  assert.equal(segments.length, 2);
  assert.ok(segments[0].size > 5 * MiB, "the sealed segment goes as a multipart upload");
  const clock = new FakeClock(systemClock.now() + 600_000);
  const sim = new SimStore({ clock });
  const stalls: (0 | 1)[] = [];
  const observer = Object.assign(recordingObserver(), {
    stalled: (v: 0 | 1) => void stalls.push(v),
  });
  const { logger } = capturingLogger("warn");
  return {
    config,
    clock,
    sim,
    segments,
    calls: new Map(),
    stalls,
    worker: (store) =>
      new TierWorker({ config, store, prefix: "iggy", logger, clock, observer, rng: () => 0.5 }),
    cleanup: tmp.cleanup,
  };
}

/** Counts every call that reaches the store, then runs `before` (once per call) and the call. */
function counting(
  w: World,
  before: (op: StoreOp) => Promise<void> = () => Promise.resolve(),
): ObjectStore {
  return decorateStore(w.sim, async (call) => {
    w.calls.set(call.op, (w.calls.get(call.op) ?? 0) + 1);
    await before(call.op);
    return await call.run(call.signal);
  });
}

Deno.test("a segment that changes during its copy fails at once with its own reason, not as a network fault", async () => {
  const w = await world();
  try {
    const seg = w.segments[0];
    let changed = false;
    const store = counting(w, async (op) => {
      if (op === "put_part" && !changed) {
        changed = true;
        await appendFile(seg.logPath, new Uint8Array(100).fill(0xab)); // the file grows
      }
    });
    const worker = w.worker(store);
    try {
      const report = await w.clock.runUntil(worker.pass());
      assert.ok(changed, "the file was changed mid-copy");
      assert.equal(report.copied, 0);
      assert.equal(report.failed, 1);
      const failed = report.problems.find((p) =>
        describeProblem(p).includes(`${seg.logPath}: size changed from ${seg.size}`)
      );
      assert.ok(
        failed,
        `the error names the file and the change: ${report.problems.map(describeProblem)}`,
      );
      assert.deepEqual([failed.kind, failed.segment], ["copy", seg.startOffset]);
      assert.equal(report.storeUnreachable, false, "the store was fine");
      // One attempt of the whole copy: one upload, each part once, no retry of anything.
      assert.equal(w.calls.get("create_multipart"), 1);
      assert.equal(w.calls.get("put_part"), 2);
      assert.equal(w.calls.get("complete_multipart") ?? 0, 1);
      assert.deepEqual(w.stalls.filter((v) => v === 1), [], "tierd_upload_stalled never rose");
      assert.equal(w.stalls.at(-1), 0);
      const state = await durableState(w.config.agent.state_dir, ID);
      const rec = getSegment(state, 0n, seg.startOffset)!;
      assert.notEqual(
        rec.state,
        "COPY_SEGMENT_FINISHED",
        "a changed segment is never recorded copied",
      );
    } finally {
      await worker.close();
    }
  } finally {
    await w.cleanup();
  }
});

Deno.test("a store that answers transport errors is retried, and raises the stall gauge", async () => {
  const w = await world();
  try {
    const worker = w.worker(counting(w));
    try {
      await worker.open(); // first sight asks the bucket; then the store goes away
      w.sim.setUnavailable(true);
      const report = await w.clock.runUntil(worker.pass());
      assert.equal(report.copied, 0);
      assert.equal(report.storeUnreachable, true);
      const words = report.problems.map(describeProblem);
      assert.ok(words.some((e) => /store unavailable/.test(e)), words.join("\n"));
      assert.ok((w.calls.get("create_multipart") ?? 0) > 1, "the failing call was retried");
      assert.ok(w.stalls.includes(1), "tierd_upload_stalled rose");
      assert.equal(w.stalls.at(-1), 1, "and stays up while the store cannot be reached");
    } finally {
      await worker.close();
    }
  } finally {
    await w.cleanup();
  }
});
