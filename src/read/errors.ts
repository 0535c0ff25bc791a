// Typed failures of the read path; the HTTP statuses they answer are in docs/architecture.md,
// "The read path". Each names what it is about (partition, offset, object key or file) so the
// HTTP layer and the CLI can say exactly what went wrong.

/** Why a read failed. */
export type ReadErrorCode =
  /** The partition is not a tiered partition tierd knows. */
  | "unknown_partition"
  /** The offset is below the first offset still available (local or remote). */
  | "offset_below_retention"
  /** No record at or after the requested offset or timestamp (yet). */
  | "offset_past_end"
  /** The journal says an object exists, but the store does not have it: data loss. */
  | "remote_object_missing"
  /** Bytes from the store failed validation or their record checksums. */
  | "remote_data_corrupt"
  /** A local segment file failed validation. */
  | "local_data_corrupt"
  /** The store is throttling or unreachable. */
  | "store_unavailable"
  /** The store did not answer within `fetch_timeout`; the fetch goes on in the background. */
  | "fetch_timeout"
  /** The chunk cache has no room for the bytes this read needs; it is trimming. */
  | "cache_full"
  /** The store refused the request for another reason (credentials, malformed answer). */
  | "store_failed"
  /** Reads in flight hold the whole read memory budget; retry shortly. */
  | "read_budget_exceeded"
  /** The partition's state is not known yet (opening, rebuilding from the bucket); retry. */
  | "partition_rebuilding"
  /** The offsets asked for are a gap (lost before upload, or a hole in the bucket), nothing after. */
  | "offset_gap";

/** A read that could not be answered. */
export class ReadError extends Error {
  override readonly name: string = "ReadError";

  /**
   * @param code what kind of failure this is
   * @param message a sentence naming the partition, offset, key or file concerned
   * @param options the underlying error, if any
   */
  constructor(readonly code: ReadErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** The requested partition is unknown (not a tiered topic, or no directory and no journal). */
export class UnknownPartition extends ReadError {
  override readonly name = "UnknownPartition";
  constructor(readonly partition: string, why: string) {
    super("unknown_partition", `partition ${partition}: ${why}`);
  }
}

/** The requested offset was deleted by retention (locally and remotely). */
export class OffsetBelowRetention extends ReadError {
  override readonly name = "OffsetBelowRetention";
  /**
   * @param offset the requested offset
   * @param firstAvailable the first offset that can still be read
   */
  constructor(
    readonly partition: string,
    readonly offset: bigint,
    readonly firstAvailable: bigint,
  ) {
    super(
      "offset_below_retention",
      `partition ${partition}: offset ${offset} is below retention; the first available offset ` +
        `is ${firstAvailable}`,
    );
  }
}

/** Nothing to read at or after the requested start. */
export class OffsetPastEnd extends ReadError {
  override readonly name = "OffsetPastEnd";
  /**
   * @param start `offset N` or `timestamp T`, as requested
   * @param nextOffset the offset the next appended record will have, when known
   */
  constructor(readonly partition: string, start: string, readonly nextOffset?: bigint) {
    super(
      "offset_past_end",
      `partition ${partition}: no record at or after ${start}` +
        (nextOffset === undefined ? "" : ` (the next offset is ${nextOffset})`),
    );
  }
}

/** An object the journal records as copied is not in the store. Never repaired silently. */
export class RemoteObjectMissing extends ReadError {
  override readonly name = "RemoteObjectMissing";
  /**
   * @param key the missing object
   * @param segment start offset of the segment it belongs to, when known
   */
  constructor(readonly key: string, readonly segment?: bigint, options?: ErrorOptions) {
    super(
      "remote_object_missing",
      `object ${key} is recorded as copied but the store does not have it (data loss)`,
      options,
    );
  }
}

/** Bytes of a segment failed validation: record checksums, lengths or offsets. */
export class SegmentCorrupt extends ReadError {
  override readonly name = "SegmentCorrupt";
  /**
   * @param where whether the bytes came from the store or a local file
   * @param file the object key or file path
   * @param segment start offset of the segment, when known
   */
  constructor(
    readonly where: "remote" | "local",
    readonly file: string,
    cause: Error,
    readonly segment?: bigint,
  ) {
    super(
      where === "remote" ? "remote_data_corrupt" : "local_data_corrupt",
      `${where === "remote" ? "object" : "file"} ${file}: ${cause.message}`,
      { cause },
    );
  }
}

/** The store throttled or could not be reached; worth a retry after `retryAfterSeconds`. */
export class StoreUnavailable extends ReadError {
  override readonly name = "StoreUnavailable";
  constructor(readonly key: string, readonly retryAfterSeconds: number, cause: Error) {
    super("store_unavailable", `store unavailable reading ${key}: ${cause.message}`, { cause });
  }
}

/** The store did not answer within `fetch_timeout`; the fetch continues so a retry hits the cache. */
export class FetchTimeout extends ReadError {
  override readonly name = "FetchTimeout";
  constructor(readonly key: string, readonly timeoutMs: number) {
    super(
      "fetch_timeout",
      `the store did not answer within ${timeoutMs} ms reading ${key}; the fetch continues, retry`,
    );
  }

  /** Seconds a client should wait before retrying: about as long as this read waited. */
  get retryAfterSeconds(): number {
    return Math.max(1, Math.ceil(this.timeoutMs / 1000));
  }
}

/** The store refused the request (credentials, unsupported, malformed answer). */
export class StoreFailed extends ReadError {
  override readonly name = "StoreFailed";
  constructor(readonly key: string, cause: Error) {
    super("store_failed", `store request for ${key} failed: ${cause.message}`, { cause });
  }
}

/** The chunk cache could not make room for the read's bytes (budget or disk); retry later. */
export class CacheFull extends ReadError {
  override readonly name = "CacheFull";
  constructor(readonly key: string, readonly retryAfterSeconds: number, cause: Error) {
    super("cache_full", `reading ${key}: ${cause.message}`, { cause });
  }
}

/**
 * The partition's state is not known yet: the agent is opening it (replaying its journal), or
 * rebuilding it from the bucket, or could not and tries again. Nothing about its offsets can be
 * said until then — never "below retention" or "past the end" — so the answer is "retry".
 */
export class PartitionRebuilding extends ReadError {
  override readonly name = "PartitionRebuilding";
  /**
   * @param partition `"{s}/{t}/{p}"`
   * @param why what the agent is doing with it, or what failed
   * @param retryAfterSeconds when to ask again
   */
  constructor(readonly partition: string, why: string, readonly retryAfterSeconds = 5) {
    super(
      "partition_rebuilding",
      `partition ${partition}: its state is not known yet (${why}); retry`,
    );
  }
}

/**
 * The read starts in a range the partition has no bytes for — lost before upload, or a hole in
 * the bucket — and nothing readable follows it. Not "past the end": the offsets existed.
 */
export class OffsetInGap extends ReadError {
  override readonly name = "OffsetInGap";
  /**
   * @param gap the missing range, inclusive (`to` undefined: its end is not known)
   * @param why what the range is (`lost before upload`, the hole's reason)
   */
  constructor(
    readonly partition: string,
    readonly offset: bigint,
    readonly gap: { from: bigint; to?: bigint },
    why: string,
  ) {
    super(
      "offset_gap",
      `partition ${partition}: offset ${offset} lies in offsets ${gap.from}..${
        gap.to ?? "?"
      }, which cannot be read (${why}), and no record follows them yet`,
    );
  }
}
