// What the tier worker reports as it works, for metrics and tests. Every hook is optional.
import type { PartitionId } from "../layout/partition.ts";
import type { EvictionBlockReason } from "./eviction_gate.ts";

/** Hooks the tier worker calls; the metrics layer implements them. */
export interface TierObserver {
  /** One segment copy ended; `partition` is its `"{s}/{t}/{p}"` label. */
  upload?(
    outcome: "ok" | "adopted" | "failed",
    seconds: number,
    bytes: number,
    partition: string,
  ): void;
  /**
   * A copy under way has `stored` bytes of its `.log` in the store (`key`), so far in this
   * attempt; undefined once the copy ended (and `upload` reports it).
   */
  uploadProgress?(key: string, stored: number | undefined): void;
  lostBeforeUpload?(count: number): void;
  evicted?(count: number): void;
  remoteDeleted?(count: number): void;
  markerQuarantined?(path: string, reason: string): void;
  /**
   * Markers trusted at boot from the clean-stop record and not read yet changed by `delta`
   * (positive as partitions open, negative as their first pass reads them or they close).
   */
  markersUnread?(delta: number): void;
  journalTornTail?(path: string): void;
  /** 1 while uploads cannot reach the store, 0 once they can. */
  stalled?(value: 0 | 1): void;
  /** A partition's local state was found damaged (`reason` names the file and the position). */
  stateDamaged?(partition: string, reason: string): void;
  /** A partition's local state was rebuilt from the bucket (`segments` copies recorded). */
  stateRebuilt?(partition: string, segments: number): void;
  /**
   * After each pass of a partition: how many of its sealed segments are damaged (never copied,
   * never evicted) — 0 once repaired, or when the partition goes.
   */
  segmentsDamaged?(partition: PartitionId, count: number): void;
  /** Copies the journal or a marker says exist were not found in the store. */
  remoteObjectsMissing?(count: number): void;
  /**
   * A partition's eviction started waiting for `reason`, or (`undefined`) no longer waits; called
   * when the reason changes, and once with `undefined` when the partition is closed.
   */
  evictionBlocked?(partition: PartitionId, reason: EvictionBlockReason | undefined): void;
}
