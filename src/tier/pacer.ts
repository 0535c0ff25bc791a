// Throttling slows the operation class that met it (DESIGN §6): a 429 / 503 SlowDown on an
// upload spaces out every partition's uploads for a while, not just the one retry chain.
import { sleep } from "../../providers/retry.ts";

/** The tier worker's store operation classes. */
export type OpClass = "upload" | "housekeeping";

const STEP_MS = 100;
const MAX_MS = 5_000;

/** Per-class spacing that doubles on throttling and halves on success (AIMD-like). */
export class OpClassPacer {
  readonly #delay = new Map<OpClass, number>();

  /** Current spacing of a class, ms. */
  delayOf(cls: OpClass): number {
    return this.#delay.get(cls) ?? 0;
  }

  /** Waits the class's current spacing before an operation. */
  async pace(cls: OpClass, signal?: AbortSignal): Promise<void> {
    const ms = this.delayOf(cls);
    if (ms > 0) await sleep(ms, signal);
  }

  /** The store throttled an operation of `cls`: slow the class down. */
  throttled(cls: OpClass): void {
    this.#delay.set(cls, Math.min(MAX_MS, Math.max(STEP_MS, this.delayOf(cls) * 2)));
  }

  /** An operation of `cls` succeeded: speed the class back up. */
  succeeded(cls: OpClass): void {
    const next = Math.floor(this.delayOf(cls) / 2);
    this.#delay.set(cls, next < STEP_MS / 2 ? 0 : next);
  }
}
