// Plain data shapes shared by the Iggy segment codecs and everything that reads segments.

/** The on-disk formats tierd understands (see `shared/formats/iggy.md`). */
export type FormatName = "iggy-0.8" | "iggy-0.9";

/** One decoded message. Timestamps are microseconds since the Unix epoch. */
export interface Message {
  /** Absolute partition offset. */
  offset: bigint;
  /** Server (append) timestamp. In 0.9 every message of a batch shares its batch's timestamp. */
  timestamp: bigint;
  /** Producer-side timestamp. */
  originTimestamp: bigint;
  /** Client message id (u128). */
  id: bigint;
  payload: Uint8Array;
  /** The raw user-headers blob (Iggy's key/value TLV encoding; may be empty). */
  userHeaders: Uint8Array;
}

/** One on-disk record: a message for Iggy 0.8, a batch for Iggy 0.9. */
export interface RecordInfo {
  /**
   * Start of the record: an index into the buffer a walk was given (the `.log` position when
   * the buffer is the whole file), or the file position from `recordHeader`/`scanRecordHeaders`.
   */
  position: number;
  /** Record size in bytes, header included. */
  size: number;
  firstOffset: bigint;
  /** Inclusive. */
  lastOffset: bigint;
  /** Server timestamp (µs). */
  timestamp: bigint;
  messageCount: number;
}

/**
 * One index entry, normalized across formats: `position` is always the START byte of the
 * record in the `.log` (0.8 stores end positions; they are converted).
 */
export interface IndexEntry {
  /** Absolute offset of the record's first message. */
  offset: bigint;
  /** Start byte of the record in the `.log`. */
  position: number;
  /** The record's server timestamp (µs). */
  timestamp: bigint;
}

/** What a segment holds, as the broker would derive it at boot. */
export interface SegmentBounds {
  startOffset: bigint;
  /** Offset of the last message (inclusive); `startOffset - 1n` for an empty segment. */
  endOffset: bigint;
  startTimestamp: bigint;
  endTimestamp: bigint;
  maxTimestamp: bigint;
  /** `.log` size in bytes. */
  size: number;
  /** `.index` size in bytes (0 when missing). */
  indexSize: number;
  messageCount: bigint;
}
