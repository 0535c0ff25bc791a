// Every metric tierd exports, defined once so the names, help texts and labels
// stay in one place; components take the typed handles they update from the returned object.
//
// Every labelled series whose label values are known in advance (upload and fetch outcomes of
// each configured topic, cache eviction reasons, read sources and outcomes) exists from the
// start at 0, so `rate()` and `increase()` see the first event. docs/metrics.md describes each
// metric; a test keeps it in step with this file.
import { systemClock } from "../base/clock.ts";
import type { EvictionReason } from "../cache/policy.ts";
import type { FetchOutcome } from "../cache/stats.ts";
import type { ReadErrorCode } from "../read/errors.ts";
import { registerHeapMetrics, registerProcessMetrics } from "./process.ts";
import { type Counter, type Gauge, type Histogram, Registry } from "./registry.ts";
import { VERSION } from "../version.ts";

/** Labels naming one partition. */
export type PartitionLabels = "stream" | "topic" | "partition";

/** Labels naming one topic. */
export type TopicLabels = "stream" | "topic";

/** The typed handles of every tierd metric. */
export interface TierdMetrics {
  /** `tierd_local_bytes{stream,topic,partition}`: bytes of the partition's local `.log` files. */
  localBytes: Gauge<PartitionLabels>;
  /** `tierd_remote_bytes{stream,topic,partition}`: bytes of its verified copies in the store. */
  remoteBytes: Gauge<PartitionLabels>;
  /** `tierd_tiered_up_to_offset{stream,topic,partition}`: the floor (-1 before the first copy). */
  tieredUpToOffset: Gauge<PartitionLabels>;
  /**
   * `tierd_uploads_total{stream,topic,outcome}`: segment uploads by topic and outcome (ok,
   * adopted, failed).
   */
  uploads: Counter<TopicLabels | "outcome">;
  /** `tierd_upload_duration_seconds`: time to copy one segment. */
  uploadDuration: Histogram;
  /** `tierd_upload_bytes_total{stream,topic}`: bytes sent to the store by uploads. */
  uploadBytes: Counter<TopicLabels>;
  /** `tierd_upload_stalled`: 1 while uploads cannot make progress (store outage). */
  uploadStalled: Gauge;
  /** `tierd_upload_stalled_since_seconds`: when the stall began (epoch seconds); 0 while none. */
  uploadStalledSince: Gauge;
  /** `tierd_fetches_total{stream,topic,outcome}`: ranged GETs issued for reads. */
  fetches: Counter<TopicLabels | "outcome">;
  /** `tierd_fetch_bytes_total{stream,topic}`: bytes those GETs received from the store. */
  fetchBytes: Counter<TopicLabels>;
  /** `tierd_fetch_duration_seconds`: time of one read fetch from the store. */
  fetchDuration: Histogram;
  /** `tierd_fetch_worker_threads`: worker threads sending chunk fetches now. */
  fetchWorkerThreads: Gauge;
  /** `tierd_fetch_worker_requests_total`: store GETs a worker thread answered. */
  fetchWorkerRequests: Counter;
  /** `tierd_cache_hits_total`: chunk cache hits. */
  cacheHits: Counter;
  /** `tierd_cache_misses_total`: chunk cache misses. */
  cacheMisses: Counter;
  /** `tierd_cache_bytes`: bytes held by the chunk cache. */
  cacheBytes: Gauge;
  /** `tierd_cache_evictions_total{reason}`: chunks evicted from the cache. */
  cacheEvictions: Counter<"reason">;
  /** `tierd_cache_budget_exhausted`: 1 while the cache cannot reserve budget for a fetch. */
  cacheBudgetExhausted: Gauge;
  /** `tierd_cache_chunk_writes_total{io}`: chunk files written, around or through the page cache. */
  cacheChunkWrites: Counter<"io">;
  /** `tierd_store_requests_total{op,outcome}`: every object store request. */
  storeRequests: Counter<"op" | "outcome">;
  /**
   * `tierd_store_request_cost_estimate{currency}`: what the requests since start cost at the
   * price table's prices (set when scraped).
   */
  storeRequestCost: Gauge<"currency">;
  /** `tierd_store_throttled_total{op}`: store requests answered with throttling. */
  storeThrottled: Counter<"op">;
  /** `tierd_store_request_duration_seconds{op}`: latency of store requests. */
  storeRequestDuration: Histogram<"op">;
  /**
   * `tierd_remote_copy_lag_bytes{stream,topic,partition}`: bytes of sealed local segments not
   * yet copied to the store (Kafka's KIP-958 `RemoteCopyLagBytes`).
   */
  copyLagBytes: Gauge<PartitionLabels>;
  /** `tierd_remote_copy_lag_segments{stream,topic,partition}`: how many such segments. */
  copyLagSegments: Gauge<PartitionLabels>;
  /**
   * `tierd_remote_delete_lag_bytes{stream,topic,partition}`: bytes of remote copies tierd has
   * decided to delete whose objects may still be in the store (Kafka's KIP-958
   * `RemoteDeleteLagBytes`).
   */
  deleteLagBytes: Gauge<PartitionLabels>;
  /** `tierd_remote_delete_lag_segments{stream,topic,partition}`: how many such segments. */
  deleteLagSegments: Gauge<PartitionLabels>;
  /**
   * `tierd_remote_delete_overdue_seconds{stream,topic,partition}`: how long the oldest of those
   * deletions has been due (its grace over); 0 when none is.
   */
  deleteOverdue: Gauge<PartitionLabels>;
  /**
   * `tierd_dangling_remote_log_segments{stream,topic}`: segments in DANGLING (named
   * `tierd_dangling_remote_log_count` in 0.1.0: a gauge may not end in `_count`).
   */
  danglingSegments: Gauge<"stream" | "topic">;
  /** `tierd_dangling_remote_log_bytes{stream,topic}`: local bytes of DANGLING segments. */
  danglingBytes: Gauge<"stream" | "topic">;
  /** `tierd_segments_lost_before_upload_total`: segments the broker deleted before a copy. */
  segmentsLostBeforeUpload: Counter;
  /** `tierd_evictions_total`: local segments evicted after a verified copy. */
  evictions: Counter;
  /**
   * `tierd_eviction_blocked{stream,topic,partition,reason}`: 1 while the partition's eviction
   * waits (`consumer_offset`, `broker_kept`, `broker_running`); no series when it does not.
   */
  evictionBlocked: Gauge<PartitionLabels | "reason">;
  /** `tierd_remote_deletes_total`: remote segments deleted (retention and dangling cleanup). */
  remoteDeletes: Counter;
  /** `tierd_remote_objects_missing_total`: objects the journal says exist but a GET did not find. */
  remoteObjectsMissing: Counter;
  /** `tierd_journals_damaged_total`: journals found damaged (kept aside, rebuilt). */
  journalsDamaged: Counter;
  /** `tierd_state_rebuilds_total`: partitions whose state was rebuilt from the bucket. */
  stateRebuilds: Counter;
  /** `tierd_markers_quarantined_total`: `.remote` markers moved aside as untrustworthy. */
  markersQuarantined: Counter;
  /**
   * `tierd_markers_unread`: markers trusted at boot from the clean-stop record that the first
   * pass has not read and checked yet.
   */
  markersUnread: Gauge;
  /**
   * `tierd_segments_damaged{stream,topic,partition}`: sealed segments whose records or index
   * failed verification before their copy (never copied or evicted until repaired).
   */
  segmentsDamaged: Gauge<PartitionLabels>;
  /** `tierd_journal_torn_tails_total`: journals whose torn tail was truncated at boot. */
  journalTornTails: Counter;
  /** `tierd_reads_total{source,outcome}`: record reads served (or refused) by the read path. */
  reads: Counter<"source" | "outcome">;
  /** `tierd_read_bytes_total{source}`: record bytes returned by reads. */
  readBytes: Counter<"source">;
  /**
   * `tierd_memory_collections_total`: full collections asked of the runtime because reads left
   * the agent resident beyond its idle size plus the read memory budget.
   */
  memoryCollections: Counter;
  /**
   * `tierd_credentials_expiry_seconds{source}`: seconds until the store credential from `source`
   * expires (refreshed at 90 % of its lifetime); no series for credentials that never expire.
   */
  credentialsExpiry: Gauge<"source">;
  /** `tierd_credentials_refreshes_total{source,outcome}`: credential refreshes by outcome. */
  credentialRefreshes: Counter<"source" | "outcome">;
  /**
   * `tierd_iggy_polls_total{listener,source}`: message polls on an Iggy front (`http`, `tcp`) by
   * who answered them: `tierd` (from the bucket, spliced with the broker's) or `broker`.
   */
  iggyPolls: Counter<"listener" | "source">;
  /** `tierd_iggy_poll_duration_seconds{listener,source}`: time to answer a poll. */
  iggyPollDuration: Histogram<"listener" | "source">;
  /** `tierd_iggy_forwarded_total{listener,command}`: requests or frames forwarded unchanged. */
  iggyForwarded: Counter<"listener" | "command">;
  /** `tierd_iggy_bytes_total{listener,direction}`: bytes through a front (to_broker, to_client). */
  iggyBytes: Counter<"listener" | "direction">;
  /** `tierd_iggy_errors_total{listener,kind}`: a front's failures by kind. */
  iggyErrors: Counter<"listener" | "kind">;
  /** `tierd_iggy_connections{listener}`: client connections open on a front. */
  iggyConnections: Gauge<"listener">;
  /** `tierd_build_info{version}`: always 1. */
  buildInfo: Gauge<"version">;
  /** `tierd_start_time_seconds`: when the process started, seconds since the epoch. */
  startTime: Gauge;
}

/** Buckets for segment uploads: tens of milliseconds to several minutes. */
const UPLOAD_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** Buckets for single store requests and read fetches: a millisecond to ten seconds. */
const REQUEST_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * Registers every tierd metric in `registry`, and the `process_*` metrics (`process.ts`).
 *
 * @param registry where the metrics are registered (a fresh one by default)
 * @param startTimeMs process start, for `tierd_start_time_seconds` @default now
 * @returns the typed handles
 * @throws {RangeError} when `registry` already holds one of the names
 */
export function createTierdMetrics(
  registry: Registry = new Registry(),
  startTimeMs: number = systemClock.now(),
): TierdMetrics {
  const part = ["stream", "topic", "partition"] as const;
  const topic = ["stream", "topic"] as const;
  const m: TierdMetrics = {
    localBytes: registry.gauge("tierd_local_bytes", "Bytes of local segment files.", part),
    remoteBytes: registry.gauge("tierd_remote_bytes", "Bytes of verified remote copies.", part),
    tieredUpToOffset: registry.gauge(
      "tierd_tiered_up_to_offset",
      "End offset of the longest prefix of segments safely in the store (-1: none yet).",
      part,
    ),
    uploads: registry.counter(
      "tierd_uploads_total",
      "Segment uploads by topic and outcome.",
      [...topic, "outcome"],
    ),
    uploadDuration: registry.histogram(
      "tierd_upload_duration_seconds",
      "Time to copy one segment to the store.",
      [],
      UPLOAD_BUCKETS,
    ),
    uploadBytes: registry.counter(
      "tierd_upload_bytes_total",
      "Bytes uploaded to the store, by topic.",
      topic,
    ),
    uploadStalled: registry.gauge(
      "tierd_upload_stalled",
      "1 while uploads cannot make progress (store outage).",
    ),
    uploadStalledSince: registry.gauge(
      "tierd_upload_stalled_since_seconds",
      "When the current upload stall began, seconds since the epoch; 0 while uploads flow.",
    ),
    fetches: registry.counter(
      "tierd_fetches_total",
      "Ranged GETs issued for reads, by topic and outcome.",
      [...topic, "outcome"],
    ),
    fetchBytes: registry.counter(
      "tierd_fetch_bytes_total",
      "Bytes received from the store by the ranged GETs of reads, by topic.",
      topic,
    ),
    fetchDuration: registry.histogram(
      "tierd_fetch_duration_seconds",
      "Time of one read fetch from the store.",
      [],
      REQUEST_BUCKETS,
    ),
    fetchWorkerThreads: registry.gauge(
      "tierd_fetch_worker_threads",
      "Worker threads sending the cache's chunk fetches now.",
    ),
    fetchWorkerRequests: registry.counter(
      "tierd_fetch_worker_requests_total",
      "Store GETs sent and read by a worker thread.",
    ),
    cacheHits: registry.counter("tierd_cache_hits_total", "Chunk cache hits."),
    cacheMisses: registry.counter("tierd_cache_misses_total", "Chunk cache misses."),
    cacheBytes: registry.gauge("tierd_cache_bytes", "Bytes held by the chunk cache."),
    cacheEvictions: registry.counter(
      "tierd_cache_evictions_total",
      "Chunks evicted from the cache, by reason.",
      ["reason"],
    ),
    cacheBudgetExhausted: registry.gauge(
      "tierd_cache_budget_exhausted",
      "1 while the chunk cache cannot reserve budget for a fetch.",
    ),
    cacheChunkWrites: registry.counter(
      "tierd_cache_chunk_writes_total",
      "Chunk files written, by io: direct (around the page cache) or buffered.",
      ["io"],
    ),
    storeRequestCost: registry.gauge(
      "tierd_store_request_cost_estimate",
      "Estimated cost of the store requests since start, at [tiered_storage.request_prices].",
      ["currency"],
    ),
    storeRequests: registry.counter(
      "tierd_store_requests_total",
      "Object store requests by operation and outcome.",
      ["op", "outcome"],
    ),
    storeThrottled: registry.counter(
      "tierd_store_throttled_total",
      "Object store requests answered with throttling.",
      ["op"],
    ),
    storeRequestDuration: registry.histogram(
      "tierd_store_request_duration_seconds",
      "Latency of object store requests.",
      ["op"],
      REQUEST_BUCKETS,
    ),
    copyLagBytes: registry.gauge(
      "tierd_remote_copy_lag_bytes",
      "Bytes of sealed local segments not yet copied to the store.",
      part,
    ),
    copyLagSegments: registry.gauge(
      "tierd_remote_copy_lag_segments",
      "Sealed local segments not yet copied to the store.",
      part,
    ),
    deleteLagBytes: registry.gauge(
      "tierd_remote_delete_lag_bytes",
      "Bytes of remote copies tierd has decided to delete whose objects may still be in the " +
        "store (retention, dangling cleanup, retired generations).",
      part,
    ),
    deleteLagSegments: registry.gauge(
      "tierd_remote_delete_lag_segments",
      "Remote segments tierd has decided to delete whose objects may still be in the store.",
      part,
    ),
    deleteOverdue: registry.gauge(
      "tierd_remote_delete_overdue_seconds",
      "How long the oldest pending remote deletion has been due (its grace over); 0 when none is.",
      part,
    ),
    danglingSegments: registry.gauge(
      "tierd_dangling_remote_log_segments",
      "Segments in the DANGLING state (a failed or interrupted copy awaiting cleanup).",
      ["stream", "topic"],
    ),
    danglingBytes: registry.gauge(
      "tierd_dangling_remote_log_bytes",
      "Local bytes of segments in the DANGLING state.",
      ["stream", "topic"],
    ),
    segmentsLostBeforeUpload: registry.counter(
      "tierd_segments_lost_before_upload_total",
      "Segments the broker's retention deleted before tierd copied them.",
    ),
    evictions: registry.counter("tierd_evictions_total", "Local segments evicted."),
    evictionBlocked: registry.gauge(
      "tierd_eviction_blocked",
      "1 while a partition's eviction waits, labelled with why (consumer_offset: a consumer " +
        "has not stored an offset past the segment; broker_kept: the broker kept what it was " +
        "asked to delete; broker_running: unlink would act beside a running broker).",
      [...part, "reason"],
    ),
    remoteDeletes: registry.counter("tierd_remote_deletes_total", "Remote segments deleted."),
    remoteObjectsMissing: registry.counter(
      "tierd_remote_objects_missing_total",
      "Copies the journal or a marker records that the store no longer holds intact (GET, verify).",
    ),
    journalsDamaged: registry.counter(
      "tierd_journals_damaged_total",
      "Partition journals found damaged (not a torn tail): kept aside, state rebuilt from the bucket.",
    ),
    stateRebuilds: registry.counter(
      "tierd_state_rebuilds_total",
      "Partitions whose local state was rebuilt from the bucket.",
    ),
    markersQuarantined: registry.counter(
      "tierd_markers_quarantined_total",
      "Remote markers moved aside because they failed their checksum or incarnation.",
    ),
    markersUnread: registry.gauge(
      "tierd_markers_unread",
      "Remote markers trusted at boot from the clean-stop record, not yet read and checked.",
    ),
    segmentsDamaged: registry.gauge(
      "tierd_segments_damaged",
      "Sealed segments that failed verification before their copy (not copied, not evicted).",
      part,
    ),
    journalTornTails: registry.counter(
      "tierd_journal_torn_tails_total",
      "Journals whose torn tail was truncated when opened.",
    ),
    reads: registry.counter(
      "tierd_reads_total",
      "Record reads by where the bytes came from and outcome.",
      ["source", "outcome"],
    ),
    readBytes: registry.counter(
      "tierd_read_bytes_total",
      "Record bytes returned by reads.",
      ["source"],
    ),
    memoryCollections: registry.counter(
      "tierd_memory_collections_total",
      "Full collections asked of the runtime because reads left the agent resident beyond its " +
        "idle size plus the read memory budget.",
    ),
    credentialsExpiry: registry.gauge(
      "tierd_credentials_expiry_seconds",
      "Seconds until the store credential from this source expires.",
      ["source"],
    ),
    credentialRefreshes: registry.counter(
      "tierd_credentials_refreshes_total",
      "Store credential refreshes by source and outcome (ok, failed).",
      ["source", "outcome"],
    ),
    iggyPolls: registry.counter(
      "tierd_iggy_polls_total",
      "Message polls on an Iggy front by who answered them (tierd: from the bucket).",
      ["listener", "source"],
    ),
    iggyPollDuration: registry.histogram(
      "tierd_iggy_poll_duration_seconds",
      "Time to answer a message poll on an Iggy front.",
      ["listener", "source"],
      REQUEST_BUCKETS,
    ),
    iggyForwarded: registry.counter(
      "tierd_iggy_forwarded_total",
      "Requests or frames an Iggy front forwarded to the broker unchanged, by command.",
      ["listener", "command"],
    ),
    iggyBytes: registry.counter(
      "tierd_iggy_bytes_total",
      "Bytes through an Iggy front, by direction (to_broker, to_client).",
      ["listener", "direction"],
    ),
    iggyErrors: registry.counter(
      "tierd_iggy_errors_total",
      "Failures of an Iggy front by kind.",
      ["listener", "kind"],
    ),
    iggyConnections: registry.gauge(
      "tierd_iggy_connections",
      "Client connections open on an Iggy front.",
      ["listener"],
    ),
    buildInfo: registry.gauge("tierd_build_info", "Always 1; labelled with the version.", [
      "version",
    ]),
    startTime: registry.gauge(
      "tierd_start_time_seconds",
      "Start time of the process, seconds since the Unix epoch.",
    ),
  };
  m.buildInfo.set({ version: VERSION }, 1);
  m.startTime.set(undefined, startTimeMs / 1000);
  initKnownSeries(m);
  registerProcessMetrics(registry);
  registerHeapMetrics(registry);
  return m;
}

/** Every `outcome` of `tierd_uploads_total` (the `TierObserver.upload` outcomes). */
export const UPLOAD_OUTCOMES = ["ok", "adopted", "failed"] as const;

/** Every `outcome` of `tierd_fetches_total`. */
const FETCH_OUTCOMES: Record<FetchOutcome, true> = {
  ok: true,
  error: true,
  not_found: true,
  aborted: true,
  cache_full: true,
};

const EVICTION_REASONS: Record<EvictionReason, true> = {
  budget: true,
  prefetch_unread: true,
  corrupt: true,
  cold: true,
};

const READ_FAILURES: Record<ReadErrorCode | "error", true> = {
  unknown_partition: true,
  offset_below_retention: true,
  offset_past_end: true,
  remote_object_missing: true,
  remote_data_corrupt: true,
  local_data_corrupt: true,
  store_unavailable: true,
  fetch_timeout: true,
  cache_full: true,
  store_failed: true,
  read_budget_exceeded: true,
  partition_rebuilding: true,
  offset_gap: true,
  error: true,
};

/** Where a read's bytes came from (`source` of `tierd_reads_total`; `none` for a failure). */
const READ_SOURCES = ["local", "remote", "mixed"] as const;

/** Creates at 0 every series whose label values are known before the first event. */
function initKnownSeries(m: TierdMetrics): void {
  for (const reason of Object.keys(EVICTION_REASONS)) m.cacheEvictions.init({ reason });
  for (const io of ["direct", "buffered"]) m.cacheChunkWrites.init({ io });
  for (const source of READ_SOURCES) {
    m.readBytes.init({ source });
    for (const outcome of ["ok", "gap", "cancelled"]) m.reads.init({ source, outcome });
  }
  for (const outcome of Object.keys(READ_FAILURES)) m.reads.init({ source: "none", outcome });
}

/**
 * Creates at 0 the per-topic upload and fetch series of every topic listed (the tiered
 * `[[topic]]` entries): each `outcome` of `tierd_uploads_total` and `tierd_fetches_total`, and
 * the byte counters. So `rate()` sees a topic's first copy or fetch, and an alert on its
 * failures evaluates to 0, not to nothing.
 */
export function initTopicSeries(
  m: TierdMetrics,
  topics: readonly { stream: number; topic: number }[],
): void {
  for (const { stream, topic } of topics) {
    for (const outcome of UPLOAD_OUTCOMES) m.uploads.init({ stream, topic, outcome });
    for (const outcome of Object.keys(FETCH_OUTCOMES)) m.fetches.init({ stream, topic, outcome });
    m.uploadBytes.init({ stream, topic });
    m.fetchBytes.init({ stream, topic });
  }
}

/** What the per-partition gauges are computed from (see `summarizePartitions`). */
export interface PartitionGaugeInput {
  stream: number;
  topic: number;
  partition: number;
  localBytes: number;
  remoteBytes: number;
  /** -1n before the first copy. */
  floor: bigint;
  segments: { dangling: number };
  danglingBytes: number;
  /** Sealed local segments not yet copied, and their bytes. */
  copyLag: { segments: number; bytes: number };
  /** Remote deletions pending, and when the oldest was due (ms since the epoch). */
  deleteLag: { segments: number; bytes: number; oldestDueAt?: number };
}

/**
 * Sets the per-partition and per-topic gauges from scratch, so a partition that disappeared
 * also disappears from the scrape.
 *
 * @param now ms since the epoch, for how long deletions have been overdue
 */
export function observePartitions(
  m: TierdMetrics,
  partitions: readonly PartitionGaugeInput[],
  now: number,
) {
  const perPartition = [
    m.localBytes,
    m.remoteBytes,
    m.tieredUpToOffset,
    m.copyLagBytes,
    m.copyLagSegments,
    m.deleteLagBytes,
    m.deleteLagSegments,
    m.deleteOverdue,
  ];
  for (const g of perPartition) g.reset();
  m.danglingSegments.reset();
  m.danglingBytes.reset();
  for (const p of partitions) {
    const labels = { stream: p.stream, topic: p.topic, partition: p.partition };
    m.localBytes.set(labels, p.localBytes);
    m.remoteBytes.set(labels, p.remoteBytes);
    m.tieredUpToOffset.set(labels, Number(p.floor));
    m.copyLagBytes.set(labels, p.copyLag.bytes);
    m.copyLagSegments.set(labels, p.copyLag.segments);
    m.deleteLagBytes.set(labels, p.deleteLag.bytes);
    m.deleteLagSegments.set(labels, p.deleteLag.segments);
    const due = p.deleteLag.oldestDueAt;
    m.deleteOverdue.set(labels, due === undefined ? 0 : Math.max(0, (now - due) / 1000));
    const topic = { stream: p.stream, topic: p.topic };
    m.danglingSegments.inc(topic, p.segments.dangling);
    m.danglingBytes.inc(topic, p.danglingBytes);
  }
}

/**
 * Feeds `tierd_fetch_worker_threads` and `tierd_fetch_worker_requests_total` from the store's
 * fetch workers at every render.
 */
export function watchFetchWorkers(
  registry: Registry,
  m: TierdMetrics,
  workers: { threads(): number; readonly offThread: number },
): void {
  let counted = 0;
  registry.onCollect(() => {
    m.fetchWorkerThreads.set(undefined, workers.threads());
    m.fetchWorkerRequests.inc(undefined, workers.offThread - counted);
    counted = workers.offThread;
  });
}
