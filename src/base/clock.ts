// The one source of time in tierd: the wall clock, a monotonic clock for durations, and timers.
// Everything that reads the time or waits takes a `Clock`; tests pass a fake one. This is the
// only module allowed to touch `Date.now`, `setTimeout` and friends (scripts/check_clock.ts).
import { clearTimeout, setImmediate, setTimeout } from "node:timers";

/** The time source deadlines, sleeps, retries, the cache and the worker run on. */
export interface Clock {
  /** Milliseconds since the epoch (wall time: timestamps, ages, log lines). */
  now(): number;
  /** Milliseconds on a clock that never goes backwards (durations). */
  monotonic(): number;
  /**
   * Calls `fn` after `ms` milliseconds and returns a function that cancels the call.
   * `unref` timers do not keep the process alive.
   */
  setTimer(ms: number, fn: () => void, options?: { unref?: boolean }): () => void;
}

/** The real clock: `Date.now()`, `performance.now()` and Node-compatible timers (Deno and Bun). */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimer(ms, fn, options) {
    const timer = setTimeout(fn, Math.max(0, ms));
    if (options?.unref) timer.unref();
    return () => clearTimeout(timer);
  },
};

/**
 * Lets timers, I/O and other tasks run before going on: what a batch of synchronous work (the
 * boot's marker reads) awaits between batches so the process stays responsive. Not a wait for
 * time, so no clock is involved.
 */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Waits `ms` milliseconds on `clock`, or rejects with the signal's reason once it aborts.
 * @param ms how long to wait
 * @param signal aborts the wait
 * @param clock the time source
 * @default clock systemClock
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const stop = new AbortController();
 * stop.abort(new Error("shutting down"));
 * await assert.rejects(sleep(60_000, stop.signal), /shutting down/); // no minute spent
 * await sleep(1); // a millisecond on the system clock
 * ```
 */
export function sleep(ms: number, signal?: AbortSignal, clock: Clock = systemClock): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      cancel();
      reject(signal?.reason);
    };
    const cancel = clock.setTimer(Math.max(0, ms), () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    });
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Waits for `promise`, but rejects with the signal's reason as soon as it aborts (at once when
 * it already has). The promise itself goes on: only the wait is given up. Without a signal,
 * `promise` itself.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const sharedRefresh = new Promise<string>((resolve) => setTimeout(() => resolve("token"), 10));
 * assert.equal(await untilAborted(sharedRefresh), "token");
 * const gaveUp = new AbortController();
 * gaveUp.abort(new Error("the caller gave up"));
 * await assert.rejects(untilAborted(sharedRefresh, gaveUp.signal), /gave up/);
 * ```
 */
export function untilAborted<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  return withTimeout(promise, Infinity, () => undefined, { signal });
}

/**
 * Waits for `promise`, but rejects with `onTimeout()` after `ms` on `clock` (never, for an
 * infinite `ms`), or with the signal's reason once it aborts. The promise itself goes on (nothing is cancelled), so work
 * that completes later still lands where it was going (a cache fill, say).
 * @returns the promise's value when it settles first
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const cancel = new AbortController();
 * const fetching = sleep(60_000, cancel.signal); // an answer slow to come
 * await assert.rejects(withTimeout(fetching, 5, () => new Error("no answer in 5 ms")), /5 ms/);
 * cancel.abort(); // the wait was given up, not the work: cancel that separately
 * ```
 */
export function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  onTimeout: () => unknown,
  options: { signal?: AbortSignal; clock?: Clock } = {},
): Promise<T> {
  const { signal, clock = systemClock } = options;
  promise.catch(() => {}); // it may settle after nobody waits for it any more
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    let cancel = () => {};
    const settle = (f: () => void) => {
      cancel();
      signal?.removeEventListener("abort", onAbort);
      f();
    };
    const onAbort = () => settle(() => reject(signal?.reason));
    if (Number.isFinite(ms)) {
      // A deadline: it never keeps the process alive on its own.
      cancel = clock.setTimer(Math.max(0, ms), () => settle(() => reject(onTimeout())), {
        unref: true,
      });
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    promise.then((v) => settle(() => resolve(v)), (e) => settle(() => reject(e)));
  });
}
