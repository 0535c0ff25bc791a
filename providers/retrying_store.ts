// Retry, pacing and deadlines as one decorator of the store interface: every call of a view
// retries store faults (and only those: see `isRetryable`) with full-jitter backoff, never past
// its deadline, spaced out while its operation class is being throttled. All deadlines hang
// under one root, so cancelling the root (the stop signal) cancels every call in flight.
import { type Clock, systemClock } from "../src/base/clock.ts";
import { decorateStore, type StoreOp } from "./decorate.ts";
import type { OpClassPacer } from "./pacer.ts";
import { Deadline, withRetry } from "./retry.ts";
import type { ObjectStore } from "./types.ts";

/** A retried call, reported before its wait. */
export interface RetryEvent {
  op: StoreOp;
  key: string;
  /** How many attempts failed so far (1 after the first failure). */
  attempt: number;
  delayMs: number;
  err: unknown;
}

/** Options of {@linkcode RetryingStore}. */
export interface RetryingStoreOptions {
  /** The deadline every view's deadline lives under; cancel it to stop. @default never */
  root?: Deadline;
  /** @default systemClock (or the root's clock) */
  clock?: Clock;
  /** Uniform numbers in [0, 1) for jitter. @default Math.random */
  rng?: () => number;
  /** The largest backoff between attempts. @default 10000 */
  maxBackoffMs?: number;
  /** Attempts in all, the first included. @default 10 */
  maxAttempts?: number;
  /** Spaces out a class after the store throttled it (shared by every view). */
  pacer?: OpClassPacer;
  /** Called before each wait between attempts. */
  onRetry?(event: RetryEvent): void;
}

/** A store whose calls retry under deadlines of one tree. */
export class RetryingStore {
  readonly root: Deadline;
  readonly #inner: ObjectStore;
  readonly #options: RetryingStoreOptions;

  constructor(inner: ObjectStore, options: RetryingStoreOptions = {}) {
    this.#inner = inner;
    this.#options = options;
    this.root = options.root ??
      Deadline.after(Infinity, undefined, { clock: options.clock ?? systemClock });
  }

  /** The store underneath (no retries). */
  get inner(): ObjectStore {
    return this.#inner;
  }

  /** A deadline `ms` from now under the root; dispose it when the work it bounds ends. */
  deadline(ms: number): Deadline {
    return this.root.child(ms);
  }

  /**
   * A view whose calls retry until `deadline` and are paced as `cls`.
   * @param deadline bounds every call of the view, retries included; one of {@linkcode deadline}
   * @param cls the operation class throttling slows down
   */
  within(deadline: Deadline, cls = "housekeeping"): ObjectStore {
    const { rng, maxBackoffMs = 10_000, maxAttempts, pacer, onRetry } = this.#options;
    return decorateStore(this.#inner, (call) =>
      withRetry(async (attempt) => {
        const signal = call.signal ? AbortSignal.any([attempt, call.signal]) : attempt;
        // Nothing is sent once the deadline passed or the root was cancelled (a stop).
        signal.throwIfAborted();
        await pacer?.pace(cls, signal);
        const result = await call.run(signal);
        pacer?.succeeded(cls);
        return result;
      }, {
        deadline,
        rng,
        maxMs: maxBackoffMs,
        maxAttempts,
        onThrottle: () => pacer?.throttled(cls),
        onRetry: (err, attempt, delayMs) =>
          onRetry?.({ op: call.op, key: call.key, attempt, delayMs, err }),
      }));
  }
}
