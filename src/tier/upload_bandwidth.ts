// `tiered_storage.upload_bandwidth`, node-wide and live: one token bucket for every upload, at the
// rate the config says now — a SIGHUP that changes it takes effect on the next body sent.
import type { Clock } from "../base/clock.ts";
import type { UploadPace } from "../../providers/paced_uploads.ts";
import { TokenBucket } from "../cache/token_bucket.ts";

/** A token bucket whose rate follows `rate()` (bytes per second; `Infinity` for no limit). */
export class LiveBandwidth implements UploadPace {
  readonly #rate: () => number;
  readonly #clock?: Clock;
  #bucket: TokenBucket;

  constructor(rate: () => number, options: { clock?: Clock } = {}) {
    this.#rate = rate;
    this.#clock = options.clock;
    this.#bucket = new TokenBucket(rate(), { clock: options.clock });
  }

  /** The rate in force now. */
  get rate(): number {
    return this.#bucket.rate;
  }

  take(bytes: number, signal?: AbortSignal): Promise<void> {
    const rate = this.#rate();
    if (rate !== this.#bucket.rate) this.#bucket = new TokenBucket(rate, { clock: this.#clock });
    return this.#bucket.take(bytes, signal);
  }
}
