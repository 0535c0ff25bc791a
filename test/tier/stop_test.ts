// Stop: cancelling the worker's root deadline aborts the store calls in flight at once and
// starts no new one. The clock is fake and never moves, and the upload deadline is an hour
// away, so nothing but the cancellation can end a pass that waits on the store.
import assert from "node:assert/strict";
import { systemClock } from "../../src/base/clock.ts";
import { decorateStore, type StoreOp } from "../../providers/decorate.ts";
import { Deadline } from "../../providers/retry.ts";
import { SimStore } from "../../providers/sim/store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import type { Config } from "../../src/config/schema.ts";
import { generatePartition } from "../../src/format/generate.ts";
import { initHashes } from "../../src/hash.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import { testConfig } from "../_config.ts";
import { FakeClock } from "../_fake_clock.ts";
import { capturingLogger, recordingObserver, scratchDir } from "../_model/tier_harness.ts";

await initHashes();

/**
 * Rejects when `promise` has not settled after `ms` of real time. A watchdog only: the tests
 * never wait on it unless the code under test hangs.
 */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

interface StopWorld {
  config: Config;
  clock: FakeClock;
  root: Deadline;
  sim: SimStore;
  stalls: (0 | 1)[];
  /** Every store call, and whether the root was already cancelled when it started. */
  calls: { op: StoreOp; key: string; afterStop: boolean }[];
  worker(store: ObjectStore): TierWorker;
  cleanup(): Promise<void>;
}

async function stopWorld(partitions: number): Promise<StopWorld> {
  const tmp = await scratchDir("tierd-stop");
  const config = testConfig({ dir: tmp.path, backend: "sim", uploadTimeout: "1 h" });
  for (let partition = 0; partition < partitions; partition++) {
    await generatePartition({
      format: "iggy-0.9",
      dataDir: config.agent.data_dir,
      stream: 0,
      topic: 0,
      partition,
      messages: 400,
      segmentSize: 16 * 1024,
      payloadSize: 100,
    });
  }
  const clock = new FakeClock(systemClock.now() + 600_000);
  const root = Deadline.after(Infinity, undefined, { clock });
  const stalls: (0 | 1)[] = [];
  const observer = Object.assign(recordingObserver(), {
    stalled: (v: 0 | 1) => void stalls.push(v),
  });
  const { logger } = capturingLogger("warn");
  return {
    config,
    clock,
    root,
    sim: new SimStore({ clock }),
    stalls,
    calls: [],
    worker: (store) =>
      new TierWorker({
        config,
        store,
        prefix: "iggy",
        logger,
        clock,
        root,
        observer,
        rng: () => 0.5,
      }),
    cleanup: tmp.cleanup,
  };
}

/** Records each call; `serve` decides how it is answered. */
function recording(
  w: StopWorld,
  serve: <T>(op: StoreOp, run: () => Promise<T>, signal?: AbortSignal) => Promise<T>,
): ObjectStore {
  return decorateStore(w.sim, (call) => {
    w.calls.push({ op: call.op, key: call.key, afterStop: w.root.expired() });
    return serve(call.op, () => call.run(call.signal), call.signal);
  });
}

Deno.test("stop aborts every put in flight at once; the pass settles and no store call starts after it", async () => {
  const w = await stopWorld(2);
  try {
    const hanging: AbortSignal[] = [];
    let bothInFlight!: () => void;
    const inFlight = new Promise<void>((resolve) => (bothInFlight = resolve));
    const store = recording(w, (op, run, signal) => {
      if (op !== "put") return run();
      // A put that never answers: only its signal can end it.
      return new Promise((_, reject) => {
        assert.ok(signal, "every store call carries a signal");
        hanging.push(signal);
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        if (hanging.length === 2) bothInFlight();
      });
    });
    const worker = w.worker(store);
    try {
      const pass = worker.pass();
      await within(inFlight, 10_000, "a put of each partition in flight");
      const at = w.clock.ms;
      const timersBefore = w.clock.pending;
      assert.ok(timersBefore > 0, "the upload deadlines are set, an hour away");
      w.root.cancel();
      const report = await within(pass, 2_000, "the pass after stop");
      assert.equal(w.clock.ms, at, "no time passed: the cancellation ended it");
      assert.deepEqual(hanging.map((s) => s.aborted), [true, true], "each put's signal aborted");
      assert.deepEqual(w.calls.filter((c) => c.afterStop), [], "no store call after the stop");
      assert.equal(report.copied, 0);
      assert.equal(report.storeUnreachable, false, "a stop is not an outage");
      assert.deepEqual(w.stalls.filter((v) => v === 1), []);
      assert.equal(w.clock.pending, 0, "every deadline's timer was released");
      // A pass after the stop does nothing at all.
      const calls = w.calls.length;
      const after = await within(worker.pass(), 2_000, "a pass after stop");
      assert.equal(after.copied + after.failed, 0);
      assert.equal(w.calls.length, calls);
    } finally {
      await worker.close();
    }
  } finally {
    await w.cleanup();
  }
});

Deno.test("stop between two store calls of a copy: the next call is never sent", async () => {
  const w = await stopWorld(1);
  try {
    // The stop comes just as the first .log put is answered; the copy's next step is its
    // .index put, which must not reach the store.
    const store = recording(w, async (op, run) => {
      const result = await run();
      if (op === "put") w.root.cancel();
      return result;
    });
    const worker = w.worker(store);
    try {
      const report = await within(worker.pass(), 2_000, "the pass after stop");
      assert.equal(w.calls.filter((c) => c.op === "put").length, 1);
      assert.deepEqual(w.calls.filter((c) => c.afterStop), [], "no store call after the stop");
      assert.equal(report.copied, 0);
      assert.equal(report.storeUnreachable, false);
    } finally {
      await worker.close();
    }
  } finally {
    await w.cleanup();
  }
});
