// The no-cache RangeReader: one ranged GET per read. Used by tests, by `tierd read`, and as the
// fallback where no chunk cache is configured.
import { type Clock, systemClock } from "../base/clock.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import {
  type ChunkSource,
  type FetchOutcome,
  fetchOutcomeOf,
  type RangeReader,
  type RangeReadOptions,
} from "../cache/mod.ts";
import { countFetch } from "../metrics/observers.ts";
import type { TierdMetrics } from "../metrics/tierd.ts";

/** Options of {@link DirectRangeReader}. */
export interface DirectRangeReaderOptions {
  /**
   * Counts `tierd_fetches_total{stream,topic,outcome}` and `tierd_fetch_bytes_total`, and
   * observes `tierd_fetch_duration_seconds`, as the chunk cache does.
   */
  metrics?: TierdMetrics;
  /** Times fetches. @default systemClock */
  clock?: Clock;
}

/**
 * Reads byte ranges of remote objects straight from the store.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimStore } from "../../providers/sim/store.ts";
 *
 * const store = new SimStore();
 * await store.put("iggy/a.log", new TextEncoder().encode("0123456789"));
 * const source = {
 *   key: "iggy/a.log",
 *   checksum: "0".repeat(32),
 *   size: 10,
 *   recordStarts: () => Promise.resolve([0]),
 * };
 * const reader = new DirectRangeReader(store);
 * assert.equal(new TextDecoder().decode(await reader.read(source, 2, 4)), "2345");
 * ```
 */
export class DirectRangeReader implements RangeReader {
  readonly #store: ObjectStore;
  readonly #metrics?: TierdMetrics;
  readonly #clock: Clock;

  constructor(store: ObjectStore, options: DirectRangeReaderOptions = {}) {
    this.#store = store;
    this.#metrics = options.metrics;
    this.#clock = options.clock ?? systemClock;
  }

  /**
   * Bytes [start, start + length) of `src`, clamped to `src.size`.
   *
   * @throws {StoreError} what the store throws (`NotFound`, `Throttled`, `Transport`, …), and
   *   `Transport` when the store answers with fewer bytes than the range holds
   * @throws {RangeError} for a negative or non-integer start or length
   */
  async read(
    src: ChunkSource,
    start: number,
    length: number,
    options: RangeReadOptions = {},
  ): Promise<Uint8Array> {
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(length) || start < 0 || length < 0) {
      throw new RangeError(`bad range ${start}+${length} of ${src.key}`);
    }
    const want = Math.max(0, Math.min(length, src.size - start));
    if (want === 0) return new Uint8Array(0);
    const started = this.#clock.monotonic();
    const count = (outcome: FetchOutcome, bytes: number) => {
      if (!this.#metrics) return;
      const seconds = (this.#clock.monotonic() - started) / 1000;
      countFetch(this.#metrics, { key: src.key, outcome, bytes, seconds });
    };
    try {
      const { bytes } = await this.#store.get(src.key, {
        range: { start, length: want },
        signal: options.signal,
      });
      if (bytes.length !== want) {
        throw new StoreError(
          "Transport",
          `short body: ${bytes.length} of ${want} bytes at ${start} of ${src.key}`,
          { op: "get", key: src.key },
        );
      }
      count("ok", bytes.length);
      return bytes;
    } catch (err) {
      count(fetchOutcomeOf(err), 0);
      throw err;
    }
  }
}
