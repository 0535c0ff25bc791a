// Throttling slows the operation class that met it: a 429 / 503 SlowDown on an upload spaces
// out every partition's uploads for a while, not just the one retry chain that saw it.
import { type Clock, sleep, systemClock } from "../src/base/clock.ts";

const STEP_MS = 100;
const MAX_MS = 5_000;

/** Per-class spacing that doubles on throttling and halves on success (AIMD-like). */
export class OpClassPacer<C extends string = string> {
  readonly #delay = new Map<C, number>();
  readonly #clock: Clock;

  /** @param options.clock the time source of the waits @default systemClock */
  constructor(options: { clock?: Clock } = {}) {
    this.#clock = options.clock ?? systemClock;
  }

  /** Current spacing of a class, ms. */
  delayOf(cls: C): number {
    return this.#delay.get(cls) ?? 0;
  }

  /** Waits the class's current spacing before an operation. */
  async pace(cls: C, signal?: AbortSignal): Promise<void> {
    const ms = this.delayOf(cls);
    if (ms > 0) await sleep(ms, signal, this.#clock);
  }

  /** The store throttled an operation of `cls`: slow the class down. */
  throttled(cls: C): void {
    this.#delay.set(cls, Math.min(MAX_MS, Math.max(STEP_MS, this.delayOf(cls) * 2)));
  }

  /** An operation of `cls` succeeded: speed the class back up. */
  succeeded(cls: C): void {
    const next = Math.floor(this.delayOf(cls) / 2);
    this.#delay.set(cls, next < STEP_MS / 2 ? 0 : next);
  }
}
