// The download bandwidth limit (`tiered_storage.fetch_bandwidth`): one token bucket shared by
// every store fetch of the cache, on an injectable clock so tests never sleep.
import { type Clock, sleep, systemClock } from "../base/clock.ts";

/** Options of {@linkcode TokenBucket}. */
export interface TokenBucketOptions {
  /** Bytes that may go at once after an idle spell. @default 64 KiB */
  burst?: number;
  /** The time source. @default systemClock */
  clock?: Clock;
}

/**
 * A token bucket over bytes, in its "virtual scheduling" form: each `take` is granted at the
 * moment the bytes granted before it (less the burst) are paid for at `rate`, in call order. A
 * fetch pays before it starts, so over any window `T` at most `burst + rate × T` bytes are
 * granted. `Infinity` turns the limit off.
 *
 * @example
 * ```ts
 * import { SimStore } from "../../providers/sim/store.ts";
 *
 * const store = new SimStore();
 * await store.put("iggy/a.log", new Uint8Array(1 << 20));
 * const bucket = new TokenBucket(50 * 1024 * 1024); // 50 MiB/s
 * const range = { start: 0, length: 64 * 1024 };
 * await bucket.take(range.length); // waits while the last second's budget is spent
 * const { bytes } = await store.get("iggy/a.log", { range });
 * ```
 */
export class TokenBucket {
  readonly #msPerByte: number;
  readonly #burstMs: number;
  readonly #clock: Clock;
  /** When every byte granted so far is paid for (the "theoretical arrival time"). */
  #paidUntil = -Infinity;

  /**
   * @param rate bytes per second; `Infinity` (or any non-positive or non-finite value) for no limit
   * @param options burst and clock
   */
  constructor(readonly rate: number, options: TokenBucketOptions = {}) {
    const limited = Number.isFinite(rate) && rate > 0;
    this.#msPerByte = limited ? 1000 / rate : 0;
    this.#burstMs = (options.burst ?? 64 * 1024) * this.#msPerByte;
    this.#clock = options.clock ?? systemClock;
  }

  /** True when the bucket limits anything. */
  get limited(): boolean {
    return this.#msPerByte > 0;
  }

  /**
   * Waits until `bytes` may be downloaded. A waiter that aborts keeps its place paid for (the
   * bytes are not handed back), which errs on the side of the limit.
   *
   * @param bytes the bytes about to be fetched
   * @param signal aborts the wait
   * @throws the signal's reason when it aborts first
   */
  async take(bytes: number, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (!this.limited) return;
    const now = this.#clock.now();
    this.#paidUntil = Math.max(this.#paidUntil, now) + bytes * this.#msPerByte;
    const wait = this.#paidUntil - this.#burstMs - now;
    if (wait > 0) await sleep(wait, signal, this.#clock);
  }
}
