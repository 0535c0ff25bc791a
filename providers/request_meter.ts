// How busy the store is: a decorator that counts every request into one-second buckets, so
// background work can wait until the agent is idle (fewer requests per second than a
// threshold, for a while) before it spends its own.
import { type Clock, systemClock } from "../src/base/clock.ts";
import { decorateStore } from "./decorate.ts";
import type { ObjectStore } from "./types.ts";

/** Seconds of history kept. */
const HORIZON_S = 3600;

/** Counts requests per second over the last hour. */
export class RequestMeter {
  readonly #clock: Clock;
  readonly #counts = new Map<number, number>();

  /** @param options.clock @default systemClock */
  constructor(options: { clock?: Clock } = {}) {
    this.#clock = options.clock ?? systemClock;
  }

  /** A view of `store` whose requests are counted. */
  wrap(store: ObjectStore): ObjectStore {
    return decorateStore(store, (call) => {
      this.note();
      return call.run(call.signal);
    });
  }

  /** Counts one request now. */
  note(): void {
    const second = Math.floor(this.#clock.now() / 1000);
    this.#counts.set(second, (this.#counts.get(second) ?? 0) + 1);
    if (this.#counts.size > HORIZON_S) {
      for (const s of this.#counts.keys()) if (s <= second - HORIZON_S) this.#counts.delete(s);
    }
  }

  /** Requests per second over the last `windowMs` (at least one second). */
  rate(windowMs: number): number {
    const seconds = Math.max(1, Math.min(HORIZON_S, Math.ceil(windowMs / 1000)));
    const now = Math.floor(this.#clock.now() / 1000);
    let n = 0;
    for (let s = now - seconds + 1; s <= now; s++) n += this.#counts.get(s) ?? 0;
    return n / seconds;
  }
}
