// The total-retention phase: remote copies past `message_expiry`, or beyond the partition's
// share of `max_topic_size`, are deleted oldest first — bounded per pass and per partition, only
// once deletable for `delete_grace`, and never at or after the lowest stored consumer offset. A deletion already journaled finishes
// even when retention has since been turned off; nothing is deleted while the barrier is unknown.
import type { TopicConfig } from "../../config/schema.ts";
import {
  type ConsumerBarrier,
  deletableUnder,
  readConsumerBarrier,
} from "../../partition/consumer_offsets.ts";
import type { SegmentFiles } from "../../partition/segments.ts";
import type { ChosenDeletion } from "../../state/delete_lag.ts";
import {
  type CopiedRecord,
  getSegment,
  type PartitionState,
  type RecordWithCopy,
  type SegmentRecord,
  segmentsOf,
} from "../../state/segment_state.ts";
import type { PartitionLedger } from "../partition_ledger.ts";
import { type PhaseContext, stopping, withSegmentDeadline } from "../phase.ts";
import { noProblems, noteFailure, onSegment, type Problems } from "../problem.ts";
import { explainRetentionDeletes, type RetentionChoice } from "../policy.ts";

/** Deletions left in this pass, shared by every partition (`delete_batch_per_pass`). */
export interface DeleteBudget {
  remaining: number;
}

/** What the retention phase did. */
export interface RetentionOutcome extends Problems {
  remoteDeleted: number;
  /**
   * Copies retention wants deleted that this pass left unjournaled (waiting for `delete_grace`,
   * the pass's budget or `delete_pending_per_partition`): part of the remote-deletion lag.
   */
  chosen: ChosenDeletion[];
}

/** Inputs of the retention phase. */
export interface RetentionInput {
  /** The broker directory of the partition (its consumer offsets live there). */
  dir: string;
  /** Local segments as they are after eviction. */
  segments: readonly SegmentFiles[];
  topic: TopicConfig;
  /** How many partitions share the topic's `max_topic_size`. */
  partitionsInTopic: number;
  budget: DeleteBudget;
  /**
   * When each copy (`"{generation}:{start}"`) was first found deletable, kept by the caller
   * across passes: a copy is deleted only once it has stayed deletable for `delete_grace`. It
   * lives in memory, so after a restart the grace starts again (a deletion comes later, never
   * sooner); a copy that stops being deletable (a consumer moved back, retention changed, an
   * unreadable offset file) starts its grace afresh.
   */
  deletableSince: Map<string, number>;
}

/** Applies total retention to the partition's remote copies. */
export async function retentionPhase(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  input: RetentionInput,
): Promise<RetentionOutcome> {
  const out: RetentionOutcome = { ...noProblems(), remoteDeleted: 0, chosen: [] };
  const { topic, budget } = input;
  if (retentionIdle(ledger.state, topic)) {
    input.deletableSince.clear();
    return out;
  }
  const barrier = await readConsumerBarrier(input.dir);
  if (barrier.bad.length > 0) {
    input.deletableSince.clear();
    // Nothing is deleted, not even a deletion already started: the barrier is unknown.
    ctx.log.warn("unreadable consumer offset file: remote deletion paused", {
      files: barrier.bad,
    });
    return out;
  }
  const cfg = ctx.config.tiered_storage;
  const generation = ledger.state.generation;
  const plan = planRetention({
    state: ledger.state,
    segments: input.segments,
    topic,
    partitionsInTopic: input.partitionsInTopic,
    barrier,
    budget: budget.remaining,
    pendingPerPartition: cfg.delete_pending_per_partition,
    nowMs: ctx.clock.now(),
  });
  const { resume } = plan;
  const chosen = plan.chosen.map((c) => c.segment);
  // Everything retention wants gone now (the lag reports it all); this pass takes a prefix.
  const deletable = plan.deletable.map((c) => c.segment);
  // A copy goes once it has been deletable for delete_grace; the others wait their turn. Every
  // deletable copy's grace runs, including those past this pass's limit: the grace is about
  // how long it has been deletable, not about when the budget reached it.
  const now = ctx.clock.now();
  const since = new Map<string, number>();
  for (const c of deletable) {
    const key = `${generation}:${c.start}`;
    since.set(key, input.deletableSince.get(key) ?? now);
  }
  const due = chosen.filter((c) =>
    now - since.get(`${generation}:${c.start}`)! >= cfg.delete_grace
  );
  input.deletableSince.clear();
  for (const [key, first] of since) input.deletableSince.set(key, first);
  if (due.length < chosen.length) {
    ctx.log.debug("remote copies deletable, waiting for delete_grace", {
      waiting: chosen.length - due.length,
      delete_grace_ms: cfg.delete_grace,
    });
  }
  const toDelete = [...resume, ...due.map((c) => ({ start: c.start, generation }))];
  for (const r of toDelete) {
    if (budget.remaining <= 0 || stopping(ctx)) break;
    try {
      await deleteOne(ctx, ledger, r.start, r.generation);
      budget.remaining -= 2;
      out.remoteDeleted++;
    } catch (err) {
      noteFailure(out, onSegment("retention_delete", r.start), err);
      ctx.log.warn("remote retention delete failed; retried next pass", {
        segment: r.start,
        err,
      });
      break;
    }
  }
  for (const c of deletable) {
    if (getSegment(ledger.state, generation, c.start)?.state !== "COPY_SEGMENT_FINISHED") continue;
    const dueAt = since.get(`${generation}:${c.start}`)! + cfg.delete_grace;
    out.chosen.push({ generation, start: c.start, size: c.size, dueAt });
  }
  if (out.remoteDeleted > 0) {
    ctx.observer.remoteDeleted?.(out.remoteDeleted);
    ctx.log.info("remote segments deleted by total retention", { count: out.remoteDeleted });
  }
  return out;
}

async function deleteOne(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  start: bigint,
  generation: bigint,
): Promise<void> {
  const keys = ledger.keys(start, generation);
  await withSegmentDeadline(ctx, "housekeeping", async (store) => {
    // Journaled only when its turn comes: a segment the budget leaves for a later pass is
    // chosen again then, under the barrier of that pass.
    if (getSegment(ledger.state, generation, start)?.state !== "DELETE_SEGMENT_STARTED") {
      await ledger.record({
        type: "delete_started",
        segment: start,
        generation,
        cause: "retention",
        at: ctx.clock.now(),
      });
    }
    const failures = await store.deleteMany([keys.log, keys.index]);
    if (failures.length > 0) throw failures[0].error;
  });
  await ledger.record({
    type: "delete_finished",
    segment: start,
    generation,
    at: ctx.clock.now(),
  });
  await ledger.removeMarker(start);
}

/**
 * True when total retention has nothing to do in a partition: the topic sets no retention and no
 * deletion is journaled unfinished (then the barrier is not even read).
 */
export function retentionIdle(state: PartitionState, topic: TopicConfig): boolean {
  const unlimited = !Number.isFinite(topic.message_expiry) &&
    !Number.isFinite(topic.max_topic_size);
  return unlimited && retentionStarted(state).length === 0;
}

/** Copies whose retention deletion is journaled but not finished (a crash, a store failure). */
function retentionStarted(state: PartitionState): RecordWithCopy[] {
  return segmentsOf(state).filter((r): r is RecordWithCopy =>
    r.state === "DELETE_SEGMENT_STARTED" && r.deleteCause === "retention"
  );
}

/** What total retention decides from. */
export interface RetentionPlanInput {
  state: PartitionState;
  /** Local segments as they are after eviction. */
  segments: readonly SegmentFiles[];
  topic: TopicConfig;
  /** How many partitions share the topic's `max_topic_size`. */
  partitionsInTopic: number;
  /** The consumer barrier, read with no unreadable file (those pause every deletion). */
  barrier: ConsumerBarrier;
  /** Deletions left in this pass (`delete_batch_per_pass`, shared by every partition). */
  budget: number;
  /** `delete_pending_per_partition`. */
  pendingPerPartition: number;
  nowMs: number;
}

/** What total retention would delete: deletions to finish, then new ones with why. */
export interface RetentionPlan {
  /** Journaled deletions to finish (the barrier lets them go). */
  resume: RecordWithCopy[];
  /** New deletions, oldest first, each once it has stayed deletable for `delete_grace`. */
  chosen: RetentionChoice[];
  /**
   * Every copy retention wants gone now, oldest first, of which `chosen` is the prefix this pass
   * may take (the budget and `delete_pending_per_partition`): the remote-deletion lag counts them.
   */
  deletable: RetentionChoice[];
}

/**
 * The total-retention decision of a pass, free of I/O: deletions to resume, then
 * {@linkcode explainRetentionDeletes} over the copies of the current generation. The retention
 * phase acts on it (after `delete_grace`); `tierd plan` prints it.
 */
export function planRetention(input: RetentionPlanInput): RetentionPlan {
  const { state, topic, barrier } = input;
  const records = segmentsOf(state);
  const started = retentionStarted(state);
  // Resume deletions a crash or a store failure interrupted (unless a consumer has since moved
  // back onto them), then choose new ones.
  const resume = started.filter((r) => deletableUnder(barrier, r.meta.endOffset));
  const copies = records.filter((r): r is CopiedRecord => r.state === "COPY_SEGMENT_FINISHED");
  const totalBytes = copies.reduce((n, r) => n + (r.evicted ? r.meta.size : 0), 0) +
    input.segments.reduce((n, s) => n + s.logSize, 0);
  const remote = deletableRun(records, state.floor, new Set(input.segments.map((s) => s.start)));
  const share = topic.max_topic_size / Math.max(1, input.partitionsInTopic);
  const limit = Math.max(0, Math.min(input.budget, input.pendingPerPartition - started.length));
  const deletable = explainRetentionDeletes(
    remote.map((r) => ({
      start: r.start,
      endOffset: r.meta.endOffset,
      size: r.meta.size,
      maxTimestamp: r.meta.maxTimestamp,
      evicted: r.evicted,
    })),
    totalBytes,
    { expiryMs: topic.message_expiry, maxBytes: share },
    input.nowMs,
    (end) => deletableUnder(barrier, end),
    Infinity,
  );
  // The choice is a prefix whatever the limit, so this pass's share is the first `limit`.
  return { resume, chosen: deletable.slice(0, limit), deletable };
}

/**
 * The verified copies total retention may choose from: those in the unbroken run of settled
 * segments from the oldest on, up to the floor. Deleting oldest first then keeps the store's
 * chain a suffix. An older segment whose copy is still on its way (a copy started, a copy gone
 * bad and being cleaned up to be made again, a hole the broker can still fill) ends the run: a
 * newer copy deleted past it would leave that one, once it lands, below a gap. So does the
 * floor: above it a segment may not have been copied at all yet.
 *
 * @param records the generation's records, oldest first
 * @param floor the partition's tiered_up_to_offset
 * @param local the starts of the segments the broker still has
 */
export function deletableRun(
  records: readonly SegmentRecord[],
  floor: bigint,
  local: ReadonlySet<bigint>,
): CopiedRecord[] {
  const out: CopiedRecord[] = [];
  for (const r of records) {
    switch (r.state) {
      case "COPY_SEGMENT_FINISHED":
        if (r.meta.endOffset > floor) return out;
        out.push(r);
        continue;
      case "LOST_BEFORE_UPLOAD":
        continue; // nothing will ever land there
      case "DELETE_SEGMENT_STARTED":
      case "DELETE_SEGMENT_FINISHED":
        // Retention's own deletions are settled; a dangling copy's cleanup is settled only
        // where the broker no longer has the segment to copy again.
        if (r.deleteCause === "retention" || !local.has(r.start)) continue;
        return out;
      case "HOLE":
        if (!local.has(r.start)) continue;
        return out;
      case "COPY_SEGMENT_STARTED":
      case "DANGLING":
        return out;
    }
  }
  return out;
}
