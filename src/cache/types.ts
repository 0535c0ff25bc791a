// The contract between the read path and the chunk cache (docs/architecture.md, "The chunk cache"):
// the read path asks for byte ranges of remote segment objects; the cache serves them from local
// chunk files or the store.

/** One remote `.log` object the cache may hold chunks of. */
export interface ChunkSource {
  /** Object key of the `.log`. */
  key: string;
  /** XXH3-128 of the whole object (32 hex digits): chunk files are named from it, so a
   * different object under the same key never serves stale bytes. */
  checksum: string;
  /** Object size in bytes. */
  size: number;
  /**
   * Record start positions of the object, ascending, starting with 0 (from the segment's
   * index: dense 0.8 gives every record, sparse 0.9 the indexed batches). Chunk `k` starts at
   * the boundary nearest `k × chunk_size`, so a record never costs two GETs.
   */
  recordStarts(): Promise<readonly number[]>;
}

/** Options of one ranged read. */
export interface RangeReadOptions {
  signal?: AbortSignal;
  /** Identifies a sequential reader across calls (for readahead and cold-reader isolation). */
  readerId?: string;
  /**
   * The object a sequential reader goes on to after `src` (the partition's next remote segment):
   * readahead that reaches the end of `src` carries on into its first chunks.
   */
  next?: ChunkSource;
}

/** Serves byte ranges of remote objects (through a cache, or straight from the store). */
export interface RangeReader {
  /** Bytes [start, start + length) of `src` (clamped to its size). */
  read(
    src: ChunkSource,
    start: number,
    length: number,
    options?: RangeReadOptions,
  ): Promise<Uint8Array>;
  /**
   * Drops whatever is kept of bytes [start, start + length) of `src`, so the next read of them
   * is a fresh GET: the read path found them failing a record checksum. Readers that keep no
   * bytes need not implement it.
   */
  invalidate?(src: ChunkSource, start: number, length: number): Promise<void>;
}

/**
 * A {@linkcode ChunkSource} that says where it sits in its partition, so the cache can tell a
 * reader near the head from a backfill far behind it (a cold reader). The read path
 * should pass these: without a position the cache estimates distances from the objects it has
 * seen (see `src/cache/heads.ts`).
 */
export interface PositionedChunkSource extends ChunkSource {
  position: {
    /** Names the partition (any stable string): its readers share one head. */
    partition: string;
    /** Byte position of this object's first byte in the partition's remote data (the sum of
     * the sizes of the older remote segments of the partition, or any byte-accurate origin). */
    base: number;
  };
}

/**
 * No room can be made in the cache budget (or on the cache disk) for a fetch: the read answers
 * 503 with `Retry-After`; the cache trims harder and counts it.
 */
export class CacheFullError extends Error {
  override readonly name = "CacheFullError";
  /**
   * @param key the object whose chunk did not fit
   * @param bytes the bytes that were needed
   * @param budget the budget in bytes
   */
  constructor(
    readonly key: string,
    readonly bytes: number,
    readonly budget: number,
    options?: ErrorOptions,
  ) {
    super(
      `chunk cache full: no room for ${bytes} bytes of ${key} (budget ${budget} bytes)`,
      options,
    );
  }
}

/**
 * A read waited `fetch_timeout` for the store: it answers 503 with `Retry-After`, and the fetch
 * goes on in the background so the retry hits the cache.
 */
export class CacheTimeoutError extends Error {
  override readonly name = "CacheTimeoutError";
  /**
   * @param key the object being read
   * @param timeoutMs how long the read waited
   */
  constructor(readonly key: string, readonly timeoutMs: number) {
    super(`read of ${key} waited ${timeoutMs} ms for the store; the fetch continues`);
  }

  /** Seconds a client should wait before retrying (for `Retry-After`). */
  get retryAfterSeconds(): number {
    return Math.max(1, Math.ceil(this.timeoutMs / 1000));
  }
}
