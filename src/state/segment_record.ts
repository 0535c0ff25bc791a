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

/** One segment of one generation, as the journal knows it. Records are never mutated. */
export interface SegmentRecord {
  /** Start offset (the segment's name). */
  readonly start: bigint;
  /** The generation its objects are keyed under. */
  readonly generation: bigint;
  readonly state: SegmentState;
  /** Milliseconds since the epoch when it entered `state`. */
  readonly since: number;
  /** Store upload id to abort during cleanup (set while an upload may be incomplete). */
  readonly uploadId?: string;
  /** Object key of the journaled multipart upload. */
  readonly multipartKey?: string;
  /** Local files confirmed gone (only ever after COPY_SEGMENT_FINISHED). */
  readonly evicted: boolean;
  /** Set from COPY_SEGMENT_FINISHED on (kept through retention deletion). */
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
