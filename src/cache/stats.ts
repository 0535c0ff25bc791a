// What the chunk cache reports: an observer interface the metrics code adapts to Prometheus
// (metric names in the comments), and the counters behind `ChunkCache.stats()`.
import type { EvictionReason, Usage } from "./policy.ts";

/** How a store fetch ended (the `outcome` label of `tierd_fetches_total`). */
export type FetchOutcome =
  | "ok" // bytes fetched (and, for a chunk, written to the cache)
  | "error" // the store failed (after retries)
  | "not_found" // the object is gone (the read path decides what that means)
  | "aborted" // cancelled: the reader gave up (first fetch) or the cache closed
  | "cache_full"; // no room could be made in the budget: nothing was fetched

/**
 * How a chunk file was written: around the page cache (`direct`), or through it (`buffered`: the
 * runtime or file system has no direct I/O, `cache.direct_io` is off, or the chunk is shorter than
 * a page or its memory not page-aligned). The `io` label of `tierd_cache_chunk_writes_total`.
 */
export type ChunkWriteIo = "direct" | "buffered";

/** Which fetch: a cold read's exact range, a chunk for a read, or a readahead chunk. */
export type FetchKind = "first" | "chunk" | "prefetch";

/** One store fetch, as reported to {@linkcode CacheStats.fetch}. */
export interface FetchEvent {
  kind: FetchKind;
  /** The object fetched from (the metrics label its count by the topic its key names). */
  key: string;
  outcome: FetchOutcome;
  /** Bytes received (0 unless `ok`). */
  bytes: number;
  /** Wall time of the fetch, waits for a slot and for bandwidth included. */
  seconds: number;
}

/**
 * An observer of the chunk cache; every method is optional. The metrics code adapts it to
 * `tierd_cache_hits_total`, `tierd_cache_misses_total`, `tierd_cache_bytes`,
 * `tierd_cache_evictions_total{reason}`, `tierd_fetches_total{stream,topic,outcome}`,
 * `tierd_fetch_bytes_total{stream,topic}`, `tierd_fetch_duration_seconds` and
 * `tierd_cache_chunk_writes_total{io}`.
 */
export interface CacheStats {
  /** A read found a chunk resident; `bytes` were served from it. */
  hit?(bytes: number): void;
  /** A read found a chunk missing (fetched, or joined a fetch in flight). */
  miss?(bytes: number): void;
  /** A chunk file left the cache. */
  eviction?(reason: EvictionReason, bytes: number): void;
  /** A store fetch ended. */
  fetch?(event: FetchEvent): void;
  /** Resident and reserved bytes and files changed (gauges). */
  usage?(usage: Usage): void;
  /** A fetch failed with `CacheFullError` or the disk ran out of space. */
  full?(): void;
  /** A chunk file of `bytes` was written, by way of `io`. */
  chunkWrite?(io: ChunkWriteIo, bytes: number): void;
}

/** The cache's counters and gauges at one moment. */
export interface CacheStatsSnapshot {
  /** Bytes of resident chunk files (`tierd_cache_bytes`). */
  bytes: number;
  /** Resident chunk files. */
  objects: number;
  /** Bytes and files promised to fetches in flight. */
  reservedBytes: number;
  reservedObjects: number;
  /** The budget: the smaller of `cache.size` and `size_percent` of the disk; `max_objects`. */
  budgetBytes: number;
  maxObjects: number;
  /** Chunk reads served from a resident chunk. */
  hits: number;
  /** Chunk reads that had to wait for the store. */
  misses: number;
  evictions: Record<EvictionReason, number>;
  fetches: Record<FetchOutcome, number>;
  /** Bytes received from the store. */
  fetchedBytes: number;
  /** Readahead chunk fetches started. */
  prefetches: number;
  /** Readahead chunks skipped because no room could be made without evicting a read chunk. */
  prefetchesSkipped: number;
  /** Reads answered from a cold read's exact-range first fetch. */
  firstFetchAnswers: number;
  /** `CacheFullError`s and disk-full writes. */
  full: number;
  /** Chunk files found corrupt or truncated. */
  corrupt: number;
  /** Chunk files written, by how they were written. */
  chunkWrites: Record<ChunkWriteIo, number>;
}

/** Counts what happens and forwards each event to an optional observer. */
export class StatsRecorder {
  readonly #observer?: CacheStats;
  readonly counts = {
    hits: 0,
    misses: 0,
    evictions: { budget: 0, prefetch_unread: 0, corrupt: 0, cold: 0 } as Record<
      EvictionReason,
      number
    >,
    fetches: { ok: 0, error: 0, not_found: 0, aborted: 0, cache_full: 0 } as Record<
      FetchOutcome,
      number
    >,
    fetchedBytes: 0,
    prefetches: 0,
    prefetchesSkipped: 0,
    firstFetchAnswers: 0,
    full: 0,
    corrupt: 0,
    chunkWrites: { direct: 0, buffered: 0 } as Record<ChunkWriteIo, number>,
  };

  constructor(observer?: CacheStats) {
    this.#observer = observer;
  }

  hit(bytes: number): void {
    this.counts.hits++;
    this.#observer?.hit?.(bytes);
  }

  miss(bytes: number): void {
    this.counts.misses++;
    this.#observer?.miss?.(bytes);
  }

  eviction(reason: EvictionReason, bytes: number): void {
    this.counts.evictions[reason]++;
    if (reason === "corrupt") this.counts.corrupt++;
    this.#observer?.eviction?.(reason, bytes);
  }

  fetch(event: FetchEvent): void {
    this.counts.fetches[event.outcome]++;
    this.counts.fetchedBytes += event.bytes;
    this.#observer?.fetch?.(event);
  }

  usage(usage: Usage): void {
    this.#observer?.usage?.(usage);
  }

  full(): void {
    this.counts.full++;
    this.#observer?.full?.();
  }

  chunkWrite(io: ChunkWriteIo, bytes: number): void {
    this.counts.chunkWrites[io]++;
    this.#observer?.chunkWrite?.(io, bytes);
  }
}
