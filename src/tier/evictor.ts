// How a verified segment leaves the broker's directory: one small port with three ways through
// it. `broker` asks the running broker to drop its oldest segments (DeleteSegments), so its own
// view stays true — and never asks for a segment its consumer barrier keeps; `unlink` removes
// the files itself, which is only safe beside a stopped broker; `auto` without a broker API
// unlinks too, but only while no broker is seen running beside the directory.
import { readConsumerBarrier } from "../partition/consumer_offsets.ts";
import { fsyncDir } from "../base/durable.ts";
import type { PartitionId } from "../layout/partition.ts";
import type { SegmentFiles } from "../partition/segments.ts";
import type { BrokerClient } from "./broker_client.ts";
import type { BrokerWatch } from "./broker_presence.ts";
import { type EvictionBlock, EvictionHeldError } from "./eviction_gate.ts";
import { unlinkIfPresent } from "./partition_ledger.ts";

/** A segment eviction would remove: its start and its inclusive end offset. */
export interface EvictionCandidateRange {
  start: bigint;
  endOffset: bigint;
}

/** How many of the candidates may be handed to {@link Evictor.remove} now, and why not more. */
export interface Admission {
  /** A prefix of this many candidates may go. */
  count: number;
  /** Why the rest waits (set whenever `count` is below the candidates). */
  block?: Omit<EvictionBlock, "text">;
  /** The lowest stored consumer offset, when the evictor read it. */
  consumerOffset?: bigint;
}

/** Removes a prefix of a partition's sealed segments from the broker's directory. */
export interface Evictor {
  /** `"broker"`, `"unlink"` or `"auto"`, for logs. */
  readonly via: string;
  /** What the removal is called in an error line (`"broker DeleteSegments"`). */
  readonly action: string;
  /** The warning logged when a removal fails. */
  readonly refused: string;
  /**
   * How many of `candidates` (oldest first) may go now; checked before any is verified, so a
   * segment that must wait costs no hashing and no store requests. @default all of them
   */
  admit?(
    id: PartitionId,
    dir: string,
    candidates: readonly EvictionCandidateRange[],
  ): Promise<Admission>;
  /**
   * Removes `segments` (the oldest sealed ones, oldest first) of partition `id` in `dir`. The
   * broker may keep some (its consumer barrier): the caller checks the directory afterwards.
   * @throws {EvictionHeldError} when it found, right before removing, that eviction must wait
   * @throws when the removal could not be asked for or done; nothing is assumed gone then
   */
  remove(id: PartitionId, dir: string, segments: readonly SegmentFiles[]): Promise<void>;
}

/**
 * Eviction through the broker's DeleteSegments call. Iggy (0.8 and 0.9 alike) deletes a sealed
 * segment only when its end offset is at or below the lowest offset any consumer or consumer
 * group stored (`seg.end_offset > barrier` is kept: `delete_oldest_segments` in 0.8,
 * `remove_sealed_segments_up_to` in 0.9), and answers 204 either way, logging a warning per kept
 * segment; 0.9 even commits the request as a truncation watermark that its reconciler retries
 * (and warns about) every second until the barrier moves. So the request names only the segments
 * that barrier lets go, read from the same offset files the broker writes.
 */
export class BrokerEvictor implements Evictor {
  readonly via = "broker";
  readonly action = "broker DeleteSegments";
  readonly refused = "broker refused DeleteSegments; segments stay local";
  constructor(readonly client: BrokerClient) {}

  async admit(
    _id: PartitionId,
    dir: string,
    candidates: readonly EvictionCandidateRange[],
  ): Promise<Admission> {
    // An unreadable offset file may hide a lower offset: the broker, which knows its barrier
    // exactly, then keeps what it must, and the eviction phase backs off.
    const lowest = (await readConsumerBarrier(dir)).lowest;
    if (lowest === undefined) return { count: candidates.length };
    const count = candidates.findIndex((c) => c.endOffset > lowest);
    if (count === -1) return { count: candidates.length, consumerOffset: lowest };
    return {
      count,
      consumerOffset: lowest,
      block: {
        reason: "consumer_offset",
        segment: candidates[count].start,
        consumerOffset: lowest,
      },
    };
  }

  async remove(id: PartitionId, _dir: string, segments: readonly SegmentFiles[]): Promise<void> {
    await this.client.deleteSegments(id, segments.length);
  }
}

/** Eviction by unlinking the files (for a stopped broker, or one that re-reads its directory). */
export class UnlinkEvictor implements Evictor {
  readonly via: string = "unlink";
  readonly action: string = "unlink";
  readonly refused = "could not unlink the segment files; segments stay local";

  async remove(_id: PartitionId, dir: string, segments: readonly SegmentFiles[]): Promise<void> {
    for (const seg of segments) {
      // .log first: an .index without its .log is ignored (0.8) or removed (0.9) at boot,
      // while a .log without its .index would make 0.8 rebuild a broken index.
      await unlinkIfPresent(seg.logPath);
      await unlinkIfPresent(seg.indexPath);
    }
    await fsyncDir(dir);
  }
}

/**
 * `evict_via = "auto"` without `[agent.broker]`: unlinks like {@link UnlinkEvictor}, but only
 * while no broker is seen running beside the data directory — checked before the segments are
 * verified and again right before the first unlink.
 */
export class GuardedUnlinkEvictor extends UnlinkEvictor {
  override readonly via = "auto";
  override readonly action = "unlink (auto)";
  constructor(readonly presence: BrokerWatch) {
    super();
  }

  async admit(
    _id: PartitionId,
    _dir: string,
    candidates: readonly EvictionCandidateRange[],
  ): Promise<Admission> {
    const seen = await this.presence.check();
    if (!seen.running || candidates.length === 0) return { count: candidates.length };
    return {
      count: 0,
      block: { reason: "broker_running", segment: candidates[0].start, evidence: seen.evidence },
    };
  }

  override async remove(
    id: PartitionId,
    dir: string,
    segments: readonly SegmentFiles[],
  ): Promise<void> {
    const seen = await this.presence.check();
    if (seen.running) {
      throw new EvictionHeldError({ reason: "broker_running", evidence: seen.evidence });
    }
    await super.remove(id, dir, segments);
  }
}
