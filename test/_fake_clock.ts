// The one fake clock of the tests: time moves only when a test says so (`advance`), or, for a
// whole system under test, in small steps while a promise is pending (`runUntil`), so retries,
// backoff and deadlines play out with real jitter and no real waiting.
import { type Clock, systemClock } from "../src/base/clock.ts";

/** The generator's first message timestamp (µs), as ms: fake clocks start here by default. */
export const GENERATOR_EPOCH_MS = 1_750_000_000_000;

/** A {@linkcode Clock} whose time moves only through `advance()` (or `runUntil`). */
export class FakeClock implements Clock {
  #now: number;
  #timers: Array<{ at: number; seq: number; fn: () => void; unref: boolean }> = [];
  #seq = 0;

  constructor(start = GENERATOR_EPOCH_MS) {
    this.#now = start;
  }

  /** The current fake time, ms since the epoch. */
  get ms(): number {
    return this.#now;
  }

  now(): number {
    return this.#now;
  }

  monotonic(): number {
    return this.#now;
  }

  setTimer(ms: number, fn: () => void, options?: { unref?: boolean }): () => void {
    // Whole milliseconds, like Date.now(): journal timestamps must be integers.
    const timer = {
      at: this.#now + Math.ceil(Math.max(0, ms)),
      seq: this.#seq++,
      fn,
      unref: options?.unref ?? false,
    };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  /** Timers not yet fired. */
  get pending(): number {
    return this.#timers.length;
  }

  /** Moves time forward by `ms`, firing due timers in order. */
  advance(ms: number): void {
    const until = this.#now + Math.ceil(ms);
    for (;;) {
      const due = this.#timers
        .filter((t) => t.at <= until)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = due.at;
      due.fn();
    }
    this.#now = until;
  }

  /**
   * Awaits `promise` while time runs. After each real macrotask, time jumps to the next timer
   * something waits on (a backoff sleep: a timer that keeps the process alive); `unref` timers
   * (deadlines, background persistence) are only reached by creeping forward `maxStepMs` per
   * macrotask while nothing else is pending — so a deadline passes when work is stuck, not
   * because real I/O took a few ticks.
   * @returns what `promise` resolved to
   */
  async runUntil<T>(promise: Promise<T>, options: { maxStepMs?: number } = {}): Promise<T> {
    const maxStepMs = options.maxStepMs ?? 5;
    let settled = false;
    const done = promise.finally(() => (settled = true));
    done.catch(() => {}); // handled below, once the loop ends
    while (!settled) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      if (settled) break;
      const waitedOn = this.#timers.filter((t) => !t.unref);
      if (waitedOn.length > 0) {
        this.advance(Math.max(0, Math.min(...waitedOn.map((t) => t.at)) - this.#now));
        continue;
      }
      const next = this.#timers.reduce((m, t) => Math.min(m, t.at), Infinity);
      // No timer at all and no step limit: wait for the real work instead of jumping to the
      // end of time (the time would then be Infinity for every later step).
      const step = Math.min(next - this.#now, maxStepMs);
      if (step !== Infinity) this.advance(Math.max(0, step));
    }
    return await done;
  }
}

/**
 * The real clock with `now()` moved ahead by `skew()` ms — so files written just now already
 * count as quiet — while timers and durations stay real.
 */
export function aheadClock(skew: number | (() => number)): Clock {
  const by = typeof skew === "number" ? () => skew : skew;
  return {
    now: () => systemClock.now() + by(),
    monotonic: () => systemClock.monotonic(),
    setTimer: (ms, fn, options) => systemClock.setTimer(ms, fn, options),
  };
}

/** A clock that reads `now()` from a function (timers are real): for code that only reads time. */
export function readingClock(now: () => number): Clock {
  return {
    now,
    monotonic: now,
    setTimer: (ms, fn, options) => systemClock.setTimer(ms, fn, options),
  };
}

/** A clock whose timers fire at once (in a microtask), recording how long each asked to wait. */
export class InstantClock implements Clock {
  /** Every timer's requested delay, in order. */
  readonly waits: number[] = [];
  constructor(private readonly at = GENERATOR_EPOCH_MS) {}
  now(): number {
    return this.at;
  }
  monotonic(): number {
    return this.at;
  }
  setTimer(ms: number, fn: () => void): () => void {
    this.waits.push(ms);
    queueMicrotask(fn);
    return () => {};
  }
}
