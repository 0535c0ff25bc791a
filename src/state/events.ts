// The facts a partition's journal records: its incarnation and generation, floor advances,
// evictions, and every step of a segment's remote lifecycle (docs/architecture.md,
// "Segment lifecycle").

import type { SegmentFacts } from "../layout/segment_facts.ts";

/** Why a remote segment is being deleted: cleanup of a failed copy, or total retention. */
export type DeleteCause = "dangling" | "retention";

/** The partition directory was first seen (or seen recreated): a new incarnation id. */
export interface IncarnationEvent {
  type: "incarnation";
  /** Random u64; written as 16 hex digits in object keys. */
  incarnation: bigint;
  /** `st_dev` of the partition directory. */
  device: number;
  /** `st_ino` of the partition directory. */
  inode: number;
  /** Milliseconds since the epoch. */
  at: number;
}

/** A purge was detected (segments restarted below the floor): a new, higher generation. */
export interface GenerationEvent {
  type: "generation";
  generation: bigint;
  at: number;
}

/** An upload of the segment starting at `segment` began. */
export interface CopyStartedEvent {
  type: "copy_started";
  /** The segment's start offset. */
  segment: bigint;
  generation: bigint;
  /** A store-side upload id known at start, if any. */
  uploadId?: string;
  at: number;
}

/** The upload turned multipart; journaled so the DANGLING cleanup can abort it after a crash. */
export interface MultipartStartedEvent {
  type: "multipart_started";
  segment: bigint;
  generation: bigint;
  /** The object key of the multipart upload. */
  key: string;
  uploadId: string;
  at: number;
}

/** The segment is verified in the store (after an upload, or adopted from DANGLING). */
export interface CopyFinishedEvent {
  type: "copy_finished";
  segment: bigint;
  generation: bigint;
  endOffset: bigint;
  size: number;
  indexSize: number;
  startTimestamp: bigint;
  endTimestamp: bigint;
  maxTimestamp: bigint;
  /** XXH3-128 of the `.log` (32 lowercase hex digits on disk). */
  checksum: bigint;
  at: number;
}

/** A copy failed or was found interrupted, or a cleanup attempt failed. */
export interface DanglingEvent {
  type: "dangling";
  segment: bigint;
  generation: bigint;
  reason: string;
  at: number;
}

/** Deletion of the segment's objects began. */
export interface DeleteStartedEvent {
  type: "delete_started";
  segment: bigint;
  generation: bigint;
  cause: DeleteCause;
  at: number;
}

/** Deletion of the segment's objects completed. */
export interface DeleteFinishedEvent {
  type: "delete_finished";
  segment: bigint;
  generation: bigint;
  at: number;
}

/** The broker's retention removed the segment before it was copied: a gap in the remote chain. */
export interface LostBeforeUploadEvent {
  type: "lost_before_upload";
  segment: bigint;
  generation: bigint;
  /** The lost segment's end offset, when it is known. */
  endOffset?: bigint;
  at: number;
}

/**
 * The bucket holds no usable copy of a segment the partition had: restore or a rebuild from the
 * bucket found its object missing or unusable (a manifest lists it, or the copies around it leave
 * the range uncovered). Reads answer the range as a gap; the floor stops before it, so nothing
 * after it is evicted, until it is settled (the segment copied again, its object found good, or
 * the loss recorded with `lost_before_upload`).
 */
export interface HoleEvent {
  type: "hole";
  segment: bigint;
  generation: bigint;
  /** The last offset of the missing range, when known. */
  endOffset?: bigint;
  /** Why no copy could be used, naming the object. */
  reason: string;
  at: number;
}

/**
 * This agent retired an incarnation or generation of the partition: the topic was recreated (a
 * new incarnation) or the partition purged (a new generation). Only what was retired this way is
 * ever swept from the bucket, after `orphan_grace`. Never the current incarnation and generation.
 */
export interface RetiredEvent {
  type: "retired";
  incarnation: bigint;
  generation: bigint;
  /** Why, in words (`recreated: …`, `purged: …`). */
  reason: string;
  at: number;
}

/** The objects of a retired incarnation or generation are deleted from the bucket. */
export interface RetiredSweptEvent {
  type: "retired_swept";
  incarnation: bigint;
  generation: bigint;
  at: number;
}

/** `tiered_up_to_offset` advanced (monotone within a generation). */
export interface FloorEvent {
  type: "floor";
  generation: bigint;
  tieredUpTo: bigint;
  at: number;
}

/** The segment's local files are confirmed gone; only the remote copy remains. */
export interface EvictedEvent {
  type: "evicted";
  segment: bigint;
  generation: bigint;
  at: number;
}

/**
 * The broker's files of an evicted segment are back, with the bytes of its verified copy (an
 * operator copied them back, or a restore left them): the segment is local again.
 */
export interface UnevictedEvent {
  type: "unevicted";
  segment: bigint;
  generation: bigint;
  at: number;
}

/** One journal record. */
export type JournalEvent =
  | IncarnationEvent
  | GenerationEvent
  | CopyStartedEvent
  | MultipartStartedEvent
  | CopyFinishedEvent
  | DanglingEvent
  | DeleteStartedEvent
  | DeleteFinishedEvent
  | LostBeforeUploadEvent
  | FloorEvent
  | EvictedEvent
  | UnevictedEvent
  | HoleEvent
  | RetiredEvent
  | RetiredSweptEvent;

/** The events that concern one segment (they carry `segment` and `generation`). */
export type SegmentEvent = Extract<JournalEvent, { segment: bigint }>;

/** Every event type name. */
export type JournalEventType = JournalEvent["type"];

/** The journal event of a verified copy of segment `segment` with these facts. */
export function copyFinishedEvent(
  segment: bigint,
  generation: bigint,
  facts: SegmentFacts,
  at: number,
): CopyFinishedEvent {
  return {
    type: "copy_finished",
    segment,
    generation,
    endOffset: facts.endOffset,
    size: facts.size,
    indexSize: facts.indexSize,
    startTimestamp: facts.startTimestamp,
    endTimestamp: facts.endTimestamp,
    maxTimestamp: facts.maxTimestamp,
    checksum: facts.checksum,
    at,
  };
}
