// One segment's record in a partition's folded journal state: where it stands in the remote
// lifecycle (docs/architecture.md, "Segment lifecycle") and what its verified copy holds.
import type { SegmentFacts } from "../layout/segment_facts.ts";
import type { DeleteCause } from "./events.ts";

/** Every remote lifecycle state, in a fixed order (the segment table stores the index). */
export const SEGMENT_STATES = [
  "COPY_SEGMENT_STARTED",
  "COPY_SEGMENT_FINISHED",
  "DANGLING",
  "DELETE_SEGMENT_STARTED",
  "DELETE_SEGMENT_FINISHED",
  "LOST_BEFORE_UPLOAD",
  "HOLE",
] as const;

/**
 * A segment's remote lifecycle state (KIP-405 plus DANGLING, LOST_BEFORE_UPLOAD and HOLE). A
 * segment with no record is LOCAL.
 */
export type SegmentState = typeof SEGMENT_STATES[number];

/**
 * One segment of one generation, as the journal knows it: a union on `state`, so that what a
 * state guarantees (a verified copy's facts, a dangling copy's reason, a hole's reason) is a
 * required field where it exists and absent where it does not. Records are never mutated.
 */
export type SegmentRecord =
  | CopyStartedRecord
  | CopiedRecord
  | DanglingRecord
  | DeletingRecord
  | LostRecord
  | HoleRecord;

/** What every record has. */
interface RecordBase {
  /** Start offset (the segment's name). */
  readonly start: bigint;
  /** The generation its objects are keyed under. */
  readonly generation: bigint;
  /** Milliseconds since the epoch when it entered `state`. */
  readonly since: number;
  /** Local files confirmed gone (only ever after COPY_SEGMENT_FINISHED). */
  readonly evicted: boolean;
  /** Store upload id to abort during cleanup (set while an upload may be incomplete). */
  readonly uploadId?: string;
  /** Object key of the journaled multipart upload. */
  readonly multipartKey?: string;
  /** A verified copy's facts: only records that hold one (see {@linkcode hasCopy}). */
  readonly meta?: SegmentFacts;
  /** Why the segment last became DANGLING (kept through its cleanup). */
  readonly danglingReason?: string;
  /** Set from DELETE_SEGMENT_STARTED on. */
  readonly deleteCause?: DeleteCause;
  /** End offset reported with LOST_BEFORE_UPLOAD or HOLE, when known. */
  readonly lostEndOffset?: bigint;
  /** Why the bucket holds no usable copy (HOLE). */
  readonly holeReason?: string;
}

/** A copy is being made (its multipart upload, once journaled, is named). */
export interface CopyStartedRecord extends RecordBase {
  readonly state: "COPY_SEGMENT_STARTED";
  readonly meta?: undefined;
  readonly deleteCause?: undefined;
}

/** A verified copy is in the store: its facts are known. */
export interface CopiedRecord extends RecordBase {
  readonly state: "COPY_SEGMENT_FINISHED";
  readonly meta: SegmentFacts;
  readonly deleteCause?: undefined;
}

/** An incomplete or bad copy awaiting cleanup: no copy, a reason. */
export interface DanglingRecord extends RecordBase {
  readonly state: "DANGLING";
  readonly meta?: undefined;
  readonly danglingReason: string;
  readonly deleteCause?: undefined;
}

/**
 * Objects being (or done being) deleted: a dangling copy's cleanup (no facts, its reason kept)
 * or retention's delete of a verified copy (its facts kept).
 */
export type DeletingRecord = DanglingCleanupRecord | RetentionDeleteRecord;

/** The cleanup of a dangling copy. */
export interface DanglingCleanupRecord extends RecordBase {
  readonly state: "DELETE_SEGMENT_STARTED" | "DELETE_SEGMENT_FINISHED";
  readonly deleteCause: "dangling";
  readonly meta?: undefined;
  readonly danglingReason: string;
}

/** Retention deleting a verified copy. */
export interface RetentionDeleteRecord extends RecordBase {
  readonly state: "DELETE_SEGMENT_STARTED" | "DELETE_SEGMENT_FINISHED";
  readonly deleteCause: Exclude<DeleteCause, "dangling">;
  readonly meta: SegmentFacts;
}

/** The broker dropped the segment before it could be copied. */
export interface LostRecord extends RecordBase {
  readonly state: "LOST_BEFORE_UPLOAD";
  readonly meta?: undefined;
  readonly deleteCause?: undefined;
}

/** The bucket holds no usable copy and the broker no longer has the segment. */
export interface HoleRecord extends RecordBase {
  readonly state: "HOLE";
  readonly meta?: undefined;
  readonly deleteCause?: undefined;
  readonly holeReason: string;
}

/** A record holding a verified copy's facts: copied, or deleted by retention. */
export type RecordWithCopy = CopiedRecord | RetentionDeleteRecord;

/** Whether `r` holds a verified copy's facts (narrows `r.meta` to present). */
export function hasCopy(r: SegmentRecord): r is RecordWithCopy {
  return r.meta !== undefined;
}
