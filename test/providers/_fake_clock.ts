// A manual clock for tests of deadlines and retries: time moves only when the test says so.
import type { Clock } from "../../providers/retry.ts";

/** A {@linkcode Clock} whose time moves only through `advance()`. */
export class FakeClock implements Clock {
  #now: number;
  #timers: Array<{ at: number; seq: number; fn: () => void }> = [];
  #seq = 0;

  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(ms: number, fn: () => void): () => void {
    const timer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn };
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
    const until = this.#now + ms;
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
}
