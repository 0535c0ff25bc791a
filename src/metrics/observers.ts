// Adapts what the tier worker and the chunk cache report to tierd's Prometheus metrics.
import type { CacheStats } from "../cache/stats.ts";
import type { TierObserver } from "../tier/observer.ts";
import type { TierdMetrics } from "./tierd.ts";

/** A {@link TierObserver} that counts into `m`. */
export function tierObserver(m: TierdMetrics): TierObserver {
  return {
    upload(outcome, seconds, bytes) {
      m.uploads.inc({ outcome });
      if (outcome !== "failed") {
        m.uploadDuration.observe(undefined, seconds);
        m.uploadBytes.inc(undefined, bytes);
      }
    },
    lostBeforeUpload: (n) => m.segmentsLostBeforeUpload.inc(undefined, n),
    evicted: (n) => m.evictions.inc(undefined, n),
    remoteDeleted: (n) => m.remoteDeletes.inc(undefined, n),
    markerQuarantined: () => m.markersQuarantined.inc(),
    journalTornTail: () => m.journalTornTails.inc(),
    stalled: (v) => m.uploadStalled.set(undefined, v),
    segmentsDamaged: (id, n) =>
      m.segmentsDamaged.set({ stream: id.stream, topic: id.topic, partition: id.partition }, n),
  };
}

/** A {@link CacheStats} observer that counts into `m`. */
export function cacheObserver(m: TierdMetrics): CacheStats {
  return {
    hit: () => m.cacheHits.inc(),
    miss: () => m.cacheMisses.inc(),
    eviction: (reason) => m.cacheEvictions.inc({ reason }),
    fetch(e) {
      m.fetches.inc({ outcome: e.outcome });
      if (e.outcome === "ok") m.fetchDuration.observe(undefined, e.seconds);
    },
    usage: (u) => {
      m.cacheBytes.set(undefined, u.bytes);
      m.cacheBudgetExhausted.set(undefined, 0);
    },
    full: () => m.cacheBudgetExhausted.set(undefined, 1),
  };
}
