// Adapts what the tier worker, the chunk cache and the store credentials report to tierd's
// Prometheus metrics.
import { type Clock, systemClock } from "../base/clock.ts";
import type { CredentialObserver } from "../../providers/credentials/types.ts";
import type { CacheStats, FetchEvent } from "../cache/stats.ts";
import { partitionOfSegmentKey } from "../layout/object_keys.ts";
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

/**
 * The `stream` and `topic` labels of a partition's `"{s}/{t}/{p}"` label, or of the partition
 * a segment object's key names; both empty (the labels absent, to Prometheus) for anything else.
 */
function topicLabels(from: { label: string } | { key: string }): { stream: string; topic: string } {
  if ("key" in from) {
    const id = partitionOfSegmentKey(from.key);
    return id ? { stream: String(id.stream), topic: String(id.topic) } : { stream: "", topic: "" };
  }
  const m = /^(\d+)\/(\d+)\/\d+$/.exec(from.label);
  return m ? { stream: m[1], topic: m[2] } : { stream: "", topic: "" };
}

/**
 * Counts one read fetch from the store: `tierd_fetches_total{stream,topic,outcome}`, the bytes
 * it received in `tierd_fetch_bytes_total{stream,topic}`, and the time of a successful one in
 * `tierd_fetch_duration_seconds`. The topic is the one the object's key names.
 */
export function countFetch(m: TierdMetrics, e: Omit<FetchEvent, "kind">): void {
  const topic = topicLabels({ key: e.key });
  m.fetches.inc({ ...topic, outcome: e.outcome });
  if (e.outcome === "ok") {
    m.fetchBytes.inc(topic, e.bytes);
    m.fetchDuration.observe(undefined, e.seconds);
  }
}

/** A {@link TierObserver} that counts into `m`. */
export function tierObserver(m: TierdMetrics, clock: Clock = systemClock): TierObserver {
  // The gauge holds one series per blocked partition: rebuilt from this map on each change.
  const blocked = new Map<string, { labels: PartitionId; reason: string }>();
  return {
    upload(outcome, seconds, bytes, partition) {
      const topic = topicLabels({ label: partition });
      m.uploads.inc({ ...topic, outcome });
      if (outcome !== "failed") {
        m.uploadDuration.observe(undefined, seconds);
        m.uploadBytes.inc(topic, bytes);
      }
    },
    lostBeforeUpload: (n) => m.segmentsLostBeforeUpload.inc(undefined, n),
    evicted: (n) => m.evictions.inc(undefined, n),
    remoteDeleted: (n) => m.remoteDeletes.inc(undefined, n),
    markerQuarantined: () => m.markersQuarantined.inc(),
    markersUnread: (delta) => m.markersUnread.inc(undefined, delta),
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
    fetch: (e) => countFetch(m, e),
    usage: (u) => {
      m.cacheBytes.set(undefined, u.bytes);
      m.cacheBudgetExhausted.set(undefined, 0);
    },
    full: () => m.cacheBudgetExhausted.set(undefined, 1),
    chunkWrite: (io) => m.cacheChunkWrites.inc({ io }),
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
