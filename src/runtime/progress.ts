// Copy progress of the running agent, for the status page and `/v1/partitions`: every finished
// segment copy (from the tier worker's `upload` hook) with its bytes and time, per partition.
// From those: what was copied since start, and the copy rate over the last minute, which with
// the copy lag gives an ETA (`http/status_model.ts`). Time comes from the clock's monotonic reading only.
import type { Clock } from "../base/clock.ts";
import type { TierObserver } from "../tier/observer.ts";

/** How far back the copy rate looks. */
export const RATE_WINDOW_MS = 60_000;

/** Copies finished so far, and how fast they go. */
export interface CopyRate {
  /** Segments copied (or adopted) since the agent started. */
  segments: number;
  bytes: number;
  /** Over the last {@link RATE_WINDOW_MS} (or since the agent started, if later). */
  bytesPerSecond: number;
  segmentsPerSecond: number;
}

interface Copy {
  at: number;
  bytes: number;
}

interface Tally {
  segments: number;
  bytes: number;
  recent: Copy[];
}

/**
 * Counts finished copies per partition. Wrap the worker's observer with {@link observer}.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { systemClock } from "../base/clock.ts";
 *
 * const progress = new CopyProgress(systemClock);
 * // The tier worker is given `progress.observer(tierObserver(metrics))`; it reports each copy.
 * const observer = progress.observer();
 * observer.upload?.("ok", 0.5, 1 << 20, "0/0/0");
 * assert.equal(progress.rate("0/0/0").segments, 1);
 * assert.equal(progress.rate("0/0/0").bytes, 1 << 20);
 * ```
 */
export class CopyProgress {
  readonly #clock: Clock;
  readonly #partitions = new Map<string, Tally>();
  readonly #since: number;

  constructor(clock: Clock) {
    this.#clock = clock;
    this.#since = clock.monotonic();
  }

  /** `inner` with its `upload` hook also counted here (every other hook passes through). */
  observer(inner: TierObserver = {}): TierObserver {
    return {
      ...inner,
      upload: (outcome, seconds, bytes, partition) => {
        if (outcome !== "failed") this.copied(partition, bytes);
        inner.upload?.(outcome, seconds, bytes, partition);
      },
    };
  }

  /** Records one finished copy of `bytes` for `partition` (`"{s}/{t}/{p}"`). */
  copied(partition: string, bytes: number): void {
    let t = this.#partitions.get(partition);
    if (!t) this.#partitions.set(partition, t = { segments: 0, bytes: 0, recent: [] });
    const now = this.#clock.monotonic();
    while (t.recent.length > 0 && t.recent[0].at <= now - RATE_WINDOW_MS) t.recent.shift();
    t.segments++;
    t.bytes += bytes;
    t.recent.push({ at: now, bytes });
  }

  /** The copies of `partition`, or of every partition when it is omitted. */
  rate(partition?: string): CopyRate {
    const now = this.#clock.monotonic();
    const from = now - RATE_WINDOW_MS;
    const tallies = partition === undefined
      ? [...this.#partitions.values()]
      : [this.#partitions.get(partition)].filter((t): t is Tally => t !== undefined);
    const out: CopyRate = { segments: 0, bytes: 0, bytesPerSecond: 0, segmentsPerSecond: 0 };
    let recentBytes = 0;
    let recentSegments = 0;
    for (const t of tallies) {
      while (t.recent.length > 0 && t.recent[0].at <= from) t.recent.shift();
      out.segments += t.segments;
      out.bytes += t.bytes;
      for (const c of t.recent) {
        recentBytes += c.bytes;
        recentSegments++;
      }
    }
    if (recentSegments === 0) return out;
    // Right after start the window is shorter than a minute: divide by what it spans.
    const span = Math.max(1000, Math.min(RATE_WINDOW_MS, now - this.#since)) / 1000;
    out.bytesPerSecond = recentBytes / span;
    out.segmentsPerSecond = recentSegments / span;
    return out;
  }
}
