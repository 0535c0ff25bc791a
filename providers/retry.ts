// Shared retry plumbing for store calls: exponential backoff with full jitter, a tree of
// deadlines, and one retry loop that retries only what `isRetryable` says and slows down when
// throttled. Time and randomness are injected so tests never sleep.
import { type Clock, sleep, systemClock } from "../src/base/clock.ts";
import { isRetryable, StoreError } from "./types.ts";

/** Options of {@linkcode backoffDelay}. */
export interface BackoffOptions {
  /** The delay cap of the first retry, doubled each attempt. @default 100 */
  baseMs?: number;
  /** The largest cap. @default 10000 */
  maxMs?: number;
  /** Uniform numbers in [0, 1). @default Math.random */
  rng?: () => number;
}

/**
 * The delay before retry number `attempt` (0 for the first retry): exponential backoff with
 * full jitter, uniform in `[0, min(maxMs, baseMs × 2^attempt))`.
 * @param attempt how many retries came before this one
 * @returns milliseconds to wait
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * assert.equal(backoffDelay(3, { rng: () => 0.5 }), 400); // half of 100 × 2³
 * ```
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const { baseMs = 100, maxMs = 10_000, rng = Math.random } = options;
  const cap = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt));
  return rng() * cap;
}

/**
 * A point in time an operation must finish by, in a tree: a child never outlives its parent,
 * and cancelling a parent cancels its children. `signal` aborts at the deadline (a
 * `TimeoutError`) or on {@linkcode Deadline.cancel} (the given reason).
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimStore } from "./sim/store.ts";
 *
 * const store = new SimStore();
 * const segment = Deadline.after(600_000); // segment_upload_timeout
 * const request = segment.child(30_000); // at most 30 s, and never past the segment's deadline
 * await store.put("iggy/a.log", new Uint8Array(8), { signal: request.signal });
 * assert.equal(request.expired(), false);
 * request.dispose();
 * segment.dispose();
 * ```
 */
export class Deadline {
  readonly #controller = new AbortController();
  #signal?: AbortSignal;
  #cancelTimer?: () => void;

  private constructor(
    /** When the deadline passes, in the clock's milliseconds; `Infinity` for never. */
    readonly at: number,
    readonly clock: Clock,
    readonly parent?: Deadline,
  ) {}

  /**
   * A deadline `ms` from now, capped by `parent`'s.
   * @param ms milliseconds from now; `Infinity` for no limit of its own
   * @param parent the deadline this one lives under
   * @param options.clock the time source; by default the parent's, else the system clock
   */
  static after(ms: number, parent?: Deadline, options: { clock?: Clock } = {}): Deadline {
    const clock = options.clock ?? parent?.clock ?? systemClock;
    const at = Math.min(clock.now() + ms, parent?.at ?? Infinity);
    return new Deadline(at, clock, parent);
  }

  /** A child deadline `ms` from now, never later than this one. */
  child(ms: number): Deadline {
    return Deadline.after(ms, this);
  }

  /** Milliseconds left, 0 once passed. */
  remaining(): number {
    return Math.max(0, this.at - this.clock.now());
  }

  /** True once the deadline has passed or it (or an ancestor) was cancelled. */
  expired(): boolean {
    return this.remaining() === 0 || this.#cancelled();
  }

  #cancelled(): boolean {
    const parent = this.parent;
    return this.#controller.signal.aborted || (parent !== undefined && parent.#cancelled());
  }

  /** Aborts this deadline's signal, and its children's, now. */
  cancel(reason: unknown = new DOMException("cancelled", "AbortError")): void {
    this.#controller.abort(reason);
  }

  /**
   * Aborts when the deadline passes or it (or an ancestor) is cancelled. The timer behind it
   * does not keep the process alive; `dispose()` releases it early.
   */
  get signal(): AbortSignal {
    if (this.#signal) return this.#signal;
    const sources = [this.#controller.signal];
    if (this.parent) sources.push(this.parent.#cancelSignal());
    if (Number.isFinite(this.at)) {
      const timeout = new AbortController();
      const expire = () => timeout.abort(new DOMException("deadline exceeded", "TimeoutError"));
      const left = this.remaining();
      if (left === 0) expire();
      else this.#cancelTimer = this.clock.setTimer(left, expire, { unref: true });
      sources.push(timeout.signal);
    }
    this.#signal = AbortSignal.any(sources);
    return this.#signal;
  }

  /** The signal of cancellation only (children have their own, earlier timers). */
  #cancelSignal(): AbortSignal {
    return this.parent
      ? AbortSignal.any([this.#controller.signal, this.parent.#cancelSignal()])
      : this.#controller.signal;
  }

  /** Releases the timer behind `signal`; the deadline still reports `expired()` correctly. */
  dispose(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** Options of {@linkcode withRetry}. */
export interface RetryOptions extends BackoffOptions {
  /** Retries happen only while `now + backoff` fits this deadline; `op` is aborted at it. */
  deadline: Deadline;
  /** Called before each wait: the error, the attempt that failed (1-based) and the delay. */
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
  /** Called on each `Throttled` error, so the caller can slow that operation class. */
  onThrottle?: (err: StoreError) => void;
  /** Attempts in all, the first included. @default 10 */
  maxAttempts?: number;
  /**
   * No retry starts once this passes; unlike `deadline`, it never cuts an attempt short (an
   * answer still arriving may take longer). @default only `deadline`
   */
  retryBefore?: Deadline;
}

/**
 * Runs `op` until it succeeds, retrying errors that {@linkcode isRetryable} accepts (throttling
 * and transport faults; a changed file, a mismatch or a bug fails at once) with backoff
 * (full jitter), as long as the next attempt can start before the deadline. Each `Throttled`
 * error doubles the base delay for the rest of this call.
 * @param op one attempt; gets a signal that aborts at the deadline or on its cancellation
 * @returns what `op` returned
 * @throws the last error when it is not retryable, attempts run out, or the deadline is near
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimStore } from "./sim/store.ts";
 *
 * const store = new SimStore({ seed: 7, faults: { throttleRate: 0.5 } });
 * store.setFaults({ throttleRate: 0 });
 * await store.put("iggy/a.log", new Uint8Array(8));
 * store.setFaults({ throttleRate: 0.5 }); // half the requests answered 503 SlowDown
 * const deadline = Deadline.after(30_000);
 * let throttled = 0;
 * const head = await withRetry((signal) => store.head("iggy/a.log", { signal }), {
 *   deadline,
 *   baseMs: 1,
 *   onThrottle: () => void throttled++, // e.g. limiter.slowDown("head")
 * });
 * assert.equal(head.size, 8);
 * deadline.dispose();
 * ```
 */
export async function withRetry<T>(
  op: (signal: AbortSignal) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  const { deadline, maxAttempts = 10, maxMs = 10_000, onRetry, onThrottle, retryBefore } = options;
  let baseMs = options.baseMs ?? 100;
  // A child with the same deadline, so the timer behind the signal ends with this call.
  using scope = deadline.child(Infinity);
  const signal = scope.signal;
  for (let attempt = 1;; attempt++) {
    try {
      return await op(signal);
    } catch (err) {
      if (!isRetryable(err) || attempt >= maxAttempts || scope.expired()) throw err;
      if (retryBefore?.expired()) throw err;
      if (err instanceof StoreError && err.kind === "Throttled") {
        baseMs = Math.min(baseMs * 2, maxMs);
        onThrottle?.(err);
      }
      const delayMs = backoffDelay(attempt - 1, { baseMs, maxMs, rng: options.rng });
      if (delayMs >= Math.min(scope.remaining(), retryBefore?.remaining() ?? Infinity)) throw err;
      onRetry?.(err, attempt, delayMs);
      await sleep(delayMs, signal, deadline.clock);
    }
  }
}
