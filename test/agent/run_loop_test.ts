// The agent's loop under the fake clock: passes come back sooner after work or a change under a
// partition and back off (doubling, capped) while idle or failing; a pass or housekeeping that
// throws never ends the agent; a stop ends it promptly, even mid-wait, and closes the watch.
import assert from "node:assert/strict";
import fc from "fast-check";
import { FakeClock } from "../_fake_clock.ts";
import { createLogger } from "../../src/log.ts";
import { type LoopWatch, MIN_IDLE_MS, runLoop } from "../../src/agent/run_loop.ts";
import type { PassReport } from "../../src/tier/tier_worker.ts";

/** What a scripted pass does: finds work, finds none, or throws. */
type Step = "busy" | "idle" | "throws" | "failed";

function report(step: Exclude<Step, "throws">): PassReport {
  return {
    partitions: [],
    copied: step === "busy" ? 1 : 0,
    adopted: 0,
    failed: step === "failed" ? 1 : 0,
    cleaned: 0,
    lost: 0,
    evicted: 0,
    remoteDeleted: 0,
    pending: 0,
    problems: step === "failed"
      ? [{ kind: "copy", what: "copy of segment 0", detail: "store down", storeFault: true }]
      : [],
    storeUnreachable: step === "failed",
  };
}

/** Runs the loop over `steps`, then stops it; returns when each pass ran and what was logged. */
async function play(
  steps: readonly Step[],
  opts: {
    maxIdleMs?: number;
    /** Called at each pass (index) with the watch's change callback. */
    duringPass?: (i: number, changed: () => void) => void;
    housekeep?: (i: number) => Promise<void>;
  } = {},
) {
  const clock = new FakeClock();
  const stop = new AbortController();
  const passAt: number[] = [];
  const lines: { level: string; msg: string }[] = [];
  const firstPass: number[] = [];
  let armed = 0;
  let closed = false;
  let changed: () => void = () => {};
  const logger = createLogger({ clock, write: (l) => void lines.push(JSON.parse(l)) });
  const done = runLoop({
    partitions: [{ dir: "/data/streams/1/topics/1/partitions/1" }],
    pass() {
      const i = passAt.length;
      passAt.push(clock.now());
      if (i >= steps.length) {
        stop.abort();
        return Promise.resolve(report("idle"));
      }
      opts.duringPass?.(i, changed);
      return steps[i] === "throws"
        ? Promise.reject(new Error("journal unreadable"))
        : Promise.resolve(report(steps[i] as Exclude<Step, "throws">));
    },
    housekeep: () => opts.housekeep?.(passAt.length - 1) ?? Promise.resolve(),
  }, {
    maxIdleMs: opts.maxIdleMs ?? 60_000,
    signal: stop.signal,
    clock,
    logger,
    watch(onChange): LoopWatch {
      changed = onChange;
      return {
        arm: () => Promise.resolve(void armed++),
        close: () => void (closed = true),
      };
    },
    onFirstPass: () => void firstPass.push(passAt.length),
  });
  await clock.runUntil(done);
  const gaps = passAt.slice(1).map((t, i) => t - passAt[i]);
  return { gaps, lines, firstPass, armed, closed };
}

/** The gaps the loop must leave: its backoff rule, stated independently. */
function expectedGaps(steps: readonly Step[], maxIdleMs: number): number[] {
  const gaps: number[] = [];
  let idle = MIN_IDLE_MS;
  for (const step of steps) {
    idle = step === "busy" ? MIN_IDLE_MS : Math.min(idle * 2, maxIdleMs);
    gaps.push(idle);
  }
  return gaps;
}

Deno.test("the loop waits MIN_IDLE_MS after work and doubles its wait, capped, while idle or failing", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.constantFrom<Step>("busy", "idle", "throws", "failed"), { maxLength: 14 }),
      fc.integer({ min: 150, max: 5_000 }),
      async (steps, maxIdleMs) => {
        const run = await play(steps, { maxIdleMs });
        assert.deepStrictEqual(run.gaps, expectedGaps(steps, maxIdleMs));
        // Announced once, after the first pass that came back (not after one that threw).
        const firstOk = steps.findIndex((s) => s !== "throws");
        assert.deepStrictEqual(run.firstPass, [(firstOk === -1 ? steps.length : firstOk) + 1]);
        // The watch follows the partitions of every pass that came back.
        assert.equal(run.armed, steps.filter((s) => s !== "throws").length + 1);
        assert.ok(run.closed, "the watch is closed when the loop ends");
        const thrown = steps.filter((s) => s === "throws").length;
        assert.equal(run.lines.filter((l) => l.msg.startsWith("tier pass failed")).length, thrown);
      },
    ),
    { numRuns: 60 },
  );
});

Deno.test("a change under a partition during the wait brings the next pass at once", async () => {
  const clock = new FakeClock();
  const stop = new AbortController();
  const passAt: number[] = [];
  let changed = () => {};
  const done = runLoop({
    partitions: [],
    pass() {
      passAt.push(clock.now());
      if (passAt.length === 3) stop.abort();
      return Promise.resolve(report("idle"));
    },
    housekeep: () => Promise.resolve(),
  }, {
    maxIdleMs: 60_000,
    signal: stop.signal,
    clock,
    logger: createLogger({ write: () => {} }),
    watch: (onChange) => {
      changed = onChange;
      return { arm: () => Promise.resolve(), close: () => {} };
    },
  });
  // Let the first pass finish and the loop settle into its 200 ms wait.
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
  clock.advance(50);
  changed();
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
  assert.equal(passAt.length, 2, "the change woke the loop before its 200 ms wait ended");
  assert.equal(passAt[1] - passAt[0], 50);
  // The wake reset the backoff: the next idle wait is 2 × MIN_IDLE_MS, not 4 ×.
  await clock.runUntil(done);
  assert.equal(passAt[2] - passAt[1], 2 * MIN_IDLE_MS);
});

Deno.test("a change while a pass runs makes the next wait the shortest", async () => {
  const steps: Step[] = ["idle", "idle", "idle", "idle"];
  const run = await play(steps, {
    duringPass: (i, changed) => {
      if (i === 3) changed();
    },
  });
  assert.deepStrictEqual(run.gaps, [200, 400, 800, MIN_IDLE_MS]);
});

Deno.test("housekeeping that throws is logged and the passes go on", async () => {
  const run = await play(["busy", "idle", "busy"], {
    housekeep: (i) => i === 1 ? Promise.reject(new Error("listing refused")) : Promise.resolve(),
  });
  assert.deepStrictEqual(run.gaps, expectedGaps(["busy", "idle", "busy"], 60_000));
  assert.equal(
    run.lines.filter((l) => l.level === "error" && l.msg.startsWith("housekeeping run failed"))
      .length,
    1,
  );
});

Deno.test("a stop during a long wait ends the loop without waiting it out", async () => {
  const clock = new FakeClock();
  const stop = new AbortController();
  let passes = 0;
  let closed = false;
  const done = runLoop({
    partitions: [],
    pass: () => Promise.resolve(void passes++).then(() => report("idle")),
    housekeep: () => Promise.resolve(),
  }, {
    maxIdleMs: 3_600_000,
    signal: stop.signal,
    clock,
    logger: createLogger({ write: () => {} }),
    watch: () => ({ arm: () => Promise.resolve(), close: () => void (closed = true) }),
  });
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
  const before = clock.now();
  stop.abort();
  await done;
  assert.equal(passes, 1);
  assert.equal(clock.now(), before, "no time had to pass");
  assert.ok(closed);
});
