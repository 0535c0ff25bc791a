// What every phase of a partition's pass is given: each phase takes its inputs explicitly and
// returns its own outcome (with its `problems`, see problem.ts), so it can be tested alone.
import type { Clock } from "../base/clock.ts";
import type { ListingProgress } from "../../providers/listing.ts";
import type { PartBufferPool } from "../../providers/part_pool.ts";
import type { RetryingStore } from "../../providers/retrying_store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import type { Config } from "../config/schema.ts";
import type { KeySpaceOwner } from "../layout/key_space.ts";
import type { Logger } from "../log.ts";
import { listSegments, type SegmentFiles } from "../partition/segments.ts";
import type { TierObserver } from "./observer.ts";
import type { Bandwidth } from "./verify_content.ts";

/** The tier worker's store operation classes (throttling slows one class, not the other). */
export type OpClass = "upload" | "housekeeping";

/** What the phases of one partition share: the worker's services and the partition's logger. */
export interface PhaseContext {
  config: Config;
  /** The store, with retries, pacing and deadlines under the worker's root. */
  store: RetryingStore;
  clock: Clock;
  /** The partition's logger (lines carry `partition`). */
  log: Logger;
  observer: TierObserver;
  /** Multipart part buffers shared by every partition. */
  partPool?: PartBufferPool;
  /** Paces the reads-back of copies whose store keeps no checksum (`fetch_bandwidth`). */
  readBandwidth?: Bandwidth;
  /**
   * The key space's owner (this agent): named in manifests and tombstones, and whose lineage
   * decides which manifests in the bucket are this key space's. Absent in unit tests: then
   * every manifest counts, and none is written with an owner.
   */
  owner?: KeySpaceOwner;
  /** The store in words, for errors (`s3 http://… bucket 'b'`). */
  storeDescription?: string;
  /** Told each page of the bucket's listing while a partition's state is rebuilt from it. */
  rebuildProgress?: (progress: ListingProgress) => void;
}

/** True once the worker was told to stop. */
export function stopping(ctx: PhaseContext): boolean {
  return ctx.store.root.expired();
}

/**
 * Runs `work` with a view of the store bounded by `segment_upload_timeout` (one segment's
 * worth of requests, retries included) plus `extraMs`, and paced as `cls`; the deadline is
 * released after.
 */
export async function withSegmentDeadline<T>(
  ctx: PhaseContext,
  cls: OpClass,
  work: (store: ObjectStore, signal: AbortSignal) => Promise<T>,
  extraMs = 0,
): Promise<T> {
  const deadline = ctx.store.deadline(ctx.config.tiered_storage.segment_upload_timeout + extraMs);
  try {
    return await work(ctx.store.within(deadline, cls), deadline.signal);
  } finally {
    deadline.dispose();
  }
}

/** The partition's local segments now, sealed or not, oldest first. */
export function listLocal(ctx: PhaseContext, dir: string): Promise<SegmentFiles[]> {
  return listSegments(dir, {
    now: ctx.clock.now(),
    quiescenceMs: ctx.config.agent.seal_quiescence,
  });
}
