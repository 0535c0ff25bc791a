import assert from "node:assert/strict";
import fc from "fast-check";
import { sleep } from "../../src/base/clock.ts";
import { backoffDelay, Deadline, withRetry } from "../../providers/retry.ts";
import { StoreError, type StoreErrorKind } from "../../providers/types.ts";
import { FakeClock } from "../_fake_clock.ts";

/**
 * Options that make withRetry run on `clock`, recording each delay, and `run`, which awaits a
 * call while the fake clock jumps from timer to timer (no real waiting).
 */
function onClock(clock: FakeClock, ms: number, rng = () => 0.5) {
  const delays: number[] = [];
  return {
    delays,
    options: {
      deadline: Deadline.after(ms, undefined, { clock }),
      rng,
      onRetry: (_err: unknown, _attempt: number, delay: number) => void delays.push(delay),
    },
    run: <T>(p: Promise<T>) => clock.runUntil(p, { maxStepMs: Infinity }),
  };
}

/** An operation that throws the given errors in turn, then returns "done". */
function flaky(...errors: unknown[]) {
  const calls: AbortSignal[] = [];
  const op = (signal: AbortSignal) => {
    calls.push(signal);
    const err = errors[calls.length - 1];
    return err === undefined ? Promise.resolve("done") : Promise.reject(err);
  };
  return { op, calls };
}

const fault = (kind: StoreErrorKind) => new StoreError(kind, kind.toLowerCase());

Deno.test("backoffDelay: full jitter below an exponential cap", () => {
  assert.equal(backoffDelay(0, { rng: () => 0.5 }), 50);
  assert.equal(backoffDelay(3, { rng: () => 0.5 }), 400);
  assert.equal(backoffDelay(30, { rng: () => 0.5 }), 5_000, "capped by maxMs (10 s)");
  assert.equal(backoffDelay(4, { baseMs: 10, maxMs: 100, rng: () => 0.5 }), 50);
  assert.equal(backoffDelay(2, { rng: () => 0 }), 0, "full jitter reaches zero");
  fc.assert(
    fc.property(
      fc.nat(80),
      fc.integer({ min: 1, max: 1000 }),
      fc.integer({ min: 1, max: 100_000 }),
      fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
      (attempt, baseMs, maxMs, r) => {
        const delay = backoffDelay(attempt, { baseMs, maxMs, rng: () => r });
        const cap = Math.min(maxMs, baseMs * 2 ** attempt);
        return delay >= 0 && delay < cap + 1e-9 && delay <= maxMs;
      },
    ),
  );
});

Deno.test("withRetry: retries transport faults and throttling, then succeeds", async () => {
  const clock = new FakeClock();
  const { options, run } = onClock(clock, 60_000);
  const { op, calls } = flaky(
    fault("Transport"),
    fault("Throttled"),
    fault("Transport"),
  );
  const retries: Array<[number, number]> = [];
  const start = clock.now();
  const result = await run(withRetry(op, {
    ...options,
    onRetry: (_err, attempt, delayMs) => retries.push([attempt, delayMs]),
  }));
  assert.equal(result, "done");
  assert.equal(calls.length, 4);
  // The throttled answer doubles the base delay (100 → 200 ms) for the rest of the call.
  assert.deepEqual(retries, [[1, 50], [2, 200], [3, 400]]);
  assert.equal(clock.now() - start, 50 + 200 + 400, "the waits ran on the clock");
  assert.ok(
    calls.every((s) => s === calls[0] && !s.aborted),
    "each attempt gets the call's signal",
  );
});

Deno.test("withRetry: errors that are not transient fail at once", async () => {
  for (
    const kind of [
      "NotFound",
      "PreconditionFailed",
      "InvalidRange",
      "Auth",
      "Malformed",
      "Unsupported",
    ] as const
  ) {
    const { options, delays, run } = onClock(new FakeClock(), 60_000);
    const { op, calls } = flaky(fault(kind));
    await assert.rejects(
      run(withRetry(op, options)),
      (err: unknown) => (err as StoreError).kind === kind,
    );
    assert.equal(calls.length, 1, kind);
    assert.deepEqual(delays, [], kind);
  }
  const { options, run } = onClock(new FakeClock(), 60_000);
  const aborted = flaky(new DOMException("stop", "AbortError"));
  await assert.rejects(run(withRetry(aborted.op, options)), { name: "AbortError" });
  assert.equal(aborted.calls.length, 1);
  // Errors that are not store faults are not retried like one: a bug, or a changed file.
  for (const err of [new TypeError("x is undefined"), new Error("segment changed on disk")]) {
    const plain = flaky(err);
    await assert.rejects(run(withRetry(plain.op, options)), (e: unknown) => e === err);
    assert.equal(plain.calls.length, 1, err.message);
  }
});

Deno.test("withRetry: retries only while now + backoff fits the deadline", async () => {
  const clock = new FakeClock();
  const { options, delays, run } = onClock(clock, 1_000, () => 0.99);
  const start = clock.now();
  const { op, calls } = flaky(...Array.from({ length: 20 }, () => fault("Transport")));
  await assert.rejects(
    run(withRetry(op, options)),
    (err: unknown) => (err as StoreError).kind === "Transport",
  );
  // 99 + 198 + 396 = 693 ms spent; the next backoff (792 ms) would pass the deadline at 1000.
  assert.deepEqual(delays, [99, 198, 396]);
  assert.equal(calls.length, 4);
  assert.ok(clock.now() - start < 1_000);
});

Deno.test("withRetry: retryBefore stops new attempts, never one in flight", async () => {
  const clock = new FakeClock();
  const { options, delays, run } = onClock(clock, 60_000, () => 0.99);
  const retryBefore = Deadline.after(400, undefined, { clock });
  // Attempts that each take 300 ms: the second starts at 399 ms, the third would start past 400.
  const calls: number[] = [];
  const slowFault = () => {
    calls.push(clock.now());
    return sleep(300, undefined, clock).then(() => Promise.reject(fault("Transport")));
  };
  await assert.rejects(run(withRetry(slowFault, { ...options, retryBefore })));
  assert.deepEqual(delays, [99]);
  assert.equal(calls.length, 2, "the second attempt ran to its end, past retryBefore");

  // Past it already: the first failure is the answer.
  const late = Deadline.after(0, undefined, { clock });
  const { op, calls: once } = flaky(fault("Transport"), fault("Transport"));
  await assert.rejects(run(withRetry(op, { ...options, retryBefore: late })));
  assert.equal(once.length, 1);
});

Deno.test("withRetry: a child deadline is capped by its parent", async () => {
  const clock = new FakeClock();
  const parent = Deadline.after(500, undefined, { clock });
  const child = parent.child(60_000);
  assert.equal(child.at, parent.at);
  assert.equal(child.remaining(), 500);
  const delays: number[] = [];
  const { op, calls } = flaky(...Array.from({ length: 20 }, () => fault("Transport")));
  await assert.rejects(
    clock.runUntil(
      withRetry(op, {
        deadline: child,
        rng: () => 0.99,
        onRetry: (_err, _attempt, ms) => void delays.push(ms),
      }),
      { maxStepMs: Infinity },
    ),
  );
  assert.deepEqual(delays, [99, 198]);
  assert.equal(calls.length, 3);
});

Deno.test("withRetry: maxAttempts bounds the attempts", async () => {
  const { options, run } = onClock(new FakeClock(), 600_000);
  const { op, calls } = flaky(...Array.from({ length: 20 }, () => fault("Transport")));
  await assert.rejects(run(withRetry(op, { ...options, maxAttempts: 3 })));
  assert.equal(calls.length, 3);
});

Deno.test("withRetry: throttling doubles the base delay and is reported", async () => {
  const { options, delays, run } = onClock(new FakeClock(), 600_000);
  const { op } = flaky(
    fault("Throttled"),
    fault("Throttled"),
    fault("Transport"),
    fault("Throttled"),
  );
  let throttles = 0;
  assert.equal(await run(withRetry(op, { ...options, onThrottle: () => throttles++ })), "done");
  assert.equal(throttles, 3);
  // base 100 → 200 → 400 (stays for the transport fault) → 800; delay = 0.5 × base × 2^attempt.
  assert.deepEqual(delays, [0.5 * 200, 0.5 * 400 * 2, 0.5 * 400 * 4, 0.5 * 800 * 8]);
});

Deno.test("withRetry: waits on the deadline's clock by default, and stops when cancelled", async () => {
  const clock = new FakeClock();
  const deadline = Deadline.after(60_000, undefined, { clock });
  const { op, calls } = flaky(fault("Transport"), fault("Transport"), fault("Transport"));
  const result = withRetry(op, { deadline, rng: () => 0.5 });
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(calls.length, 1);
  clock.advance(49);
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(calls.length, 1, "still waiting the 50 ms backoff");
  clock.advance(1);
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(calls.length, 2);
  deadline.cancel();
  await assert.rejects(result, { name: "AbortError" });
  assert.equal(calls.length, 2, "no attempt after cancellation");
  assert.equal(clock.pending, 0, "no timers left behind");
});

Deno.test("Deadline: the signal aborts at the deadline, and a parent's cancel reaches children", () => {
  const clock = new FakeClock();
  const root = Deadline.after(Infinity, undefined, { clock });
  assert.equal(root.remaining(), Infinity);
  const upload = root.child(10_000);
  const request = upload.child(1_000);
  assert.equal(request.remaining(), 1_000);
  const signal = request.signal;
  assert.equal(request.signal, signal, "one signal per deadline");
  clock.advance(999);
  assert.equal(signal.aborted, false);
  assert.equal(request.expired(), false);
  clock.advance(1);
  assert.equal(signal.aborted, true);
  assert.equal((signal.reason as DOMException).name, "TimeoutError");
  assert.equal(request.expired(), true);
  assert.equal(upload.expired(), false);

  const next = upload.child(1_000);
  const nextSignal = next.signal;
  root.cancel(new Error("shutdown"));
  assert.equal(nextSignal.aborted, true);
  assert.equal((nextSignal.reason as Error).message, "shutdown");
  assert.equal(next.expired(), true);
  assert.equal(upload.child(5).expired(), true, "a child of a cancelled deadline starts expired");
  next.dispose();
  upload.dispose();
});

Deno.test("Deadline: a deadline already passed has an aborted signal", () => {
  const clock = new FakeClock();
  const d = Deadline.after(0, undefined, { clock });
  assert.equal(d.signal.aborted, true);
  assert.equal(d.expired(), true);
});

Deno.test("Deadline: the real clock's timer does not hold the process", () => {
  using d = Deadline.after(3_600_000);
  assert.equal(d.signal.aborted, false);
  assert.ok(d.remaining() > 3_599_000);
});

Deno.test("sleep: resolves on the clock, rejects on abort", async () => {
  const clock = new FakeClock();
  let done = false;
  const slept = sleep(100, undefined, clock).then(() => (done = true));
  clock.advance(99);
  await Promise.resolve();
  assert.equal(done, false);
  clock.advance(1);
  await slept;
  assert.equal(done, true);
  const controller = new AbortController();
  const aborted = sleep(100, controller.signal, clock);
  controller.abort(new Error("stop"));
  await assert.rejects(aborted, { message: "stop" });
  assert.equal(clock.pending, 0);
  await sleep(1); // the real clock
});
