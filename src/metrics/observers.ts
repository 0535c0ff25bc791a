// Adapts what the tier worker, the chunk cache and the store credentials report to tierd's
// Prometheus metrics.
import { type Clock, systemClock } from "../base/clock.ts";
import type { CredentialObserver } from "../../providers/credentials/types.ts";
import type { CacheStats } from "../cache/stats.ts";
import type { PartitionId } from "../layout/partition.ts";
import type { Registry } from "./registry.ts";
import type { TierObserver } from "../tier/observer.ts";
import type { TierdMetrics } from "./tierd.ts";

/**
 * Sets `tierd_upload_stalled` to `value`, and `tierd_upload_stalled_since_seconds` to `now` when
 * a stall begins (0 when it ends): how long the agent has been stalled, for the status page and
 * for alerts.
 */
export function markStalled(m: TierdMetrics, value: 0 | 1, now: number): void {
  if (value === 1 && m.uploadStalled.value() !== 1) m.uploadStalledSince.set(undefined, now / 1000);
  if (value === 0) m.uploadStalledSince.set(undefined, 0);
  m.uploadStalled.set(undefined, value);
}

/** A {@link TierObserver} that counts into `m`. */
export function tierObserver(m: TierdMetrics, clock: Clock = systemClock): TierObserver {
  // The gauge holds one series per blocked partition: rebuilt from this map on each change.
  const blocked = new Map<string, { labels: PartitionId; reason: string }>();
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
    stalled: (v) => markStalled(m, v, clock.now()),
    stateDamaged: () => m.journalsDamaged.inc(),
    stateRebuilt: () => m.stateRebuilds.inc(),
    remoteObjectsMissing: (n) => m.remoteObjectsMissing.inc(undefined, n),
    evictionBlocked(id, reason) {
      const key = `${id.stream}/${id.topic}/${id.partition}`;
      if (reason === undefined) blocked.delete(key);
      else blocked.set(key, { labels: id, reason });
      m.evictionBlocked.reset();
      for (const b of blocked.values()) {
        const { stream, topic, partition } = b.labels;
        m.evictionBlocked.set({ stream, topic, partition, reason: b.reason }, 1);
      }
    },
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

/**
 * A {@link CredentialObserver} behind `tierd_credentials_expiry_seconds` (seconds left, computed
 * on each scrape) and `tierd_credentials_refreshes_total`.
 */
export function credentialObserver(
  m: TierdMetrics,
  registry: Registry,
  clock: Clock,
): CredentialObserver {
  const expiries = new Map<string, number | undefined>();
  registry.onCollect(() => {
    m.credentialsExpiry.reset();
    for (const [source, at] of expiries) {
      if (at !== undefined) {
        m.credentialsExpiry.set({ source }, Math.max(0, (at - clock.now()) / 1000));
      }
    }
  });
  return {
    expiry: (source, at) => void expiries.set(source, at),
    refresh: (source, outcome) => m.credentialRefreshes.inc({ source, outcome }),
  };
}
