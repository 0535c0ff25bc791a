// The total-retention phase: remote copies past `message_expiry`, or beyond the partition's
// share of `max_topic_size`, are deleted oldest first — bounded per pass and per partition, only
// once deletable for `delete_grace`, and never at or after the lowest stored consumer offset. A deletion already journaled finishes
// even when retention has since been turned off; nothing is deleted while the barrier is unknown.
import type { TopicConfig } from "../../config/schema.ts";
import { deletableUnder, readConsumerBarrier } from "../../partition/consumer_offsets.ts";
import type { SegmentFiles } from "../../partition/segments.ts";
import type { ChosenDeletion } from "../../state/delete_lag.ts";
import { getSegment, segmentsOf } from "../../state/segment_state.ts";
import type { PartitionLedger } from "../partition_ledger.ts";
import {
  noProblems,
  noteFailure,
  type PhaseContext,
  type Problems,
  stopping,
  withSegmentDeadline,
} from "../phase.ts";
import { chooseRetentionDeletes } from "../policy.ts";

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
  const records = segmentsOf(ledger.state);
  const started = records.filter((r) =>
    r.state === "DELETE_SEGMENT_STARTED" && r.deleteCause === "retention"
  );
  const unlimited = !Number.isFinite(topic.message_expiry) &&
    !Number.isFinite(topic.max_topic_size);
  if (unlimited && started.length === 0) {
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
  // Resume deletions a crash or a store failure interrupted (unless a consumer has since moved
  // back onto them), then choose new ones.
  const resume = started.filter((r) => deletableUnder(barrier, r.meta!.endOffset));
  const remote = records.filter((r) => r.state === "COPY_SEGMENT_FINISHED" && r.meta);
  const totalBytes = remote.reduce((n, r) => n + (r.evicted ? r.meta!.size : 0), 0) +
    input.segments.reduce((n, s) => n + s.logSize, 0);
  const share = topic.max_topic_size / Math.max(1, input.partitionsInTopic);
  const limit = Math.max(
    0,
    Math.min(budget.remaining, cfg.delete_pending_per_partition - started.length),
  );
  // Everything retention wants gone now (the lag reports it all); this pass takes a prefix.
  const deletable = chooseRetentionDeletes(
    remote.map((r) => ({
      start: r.start,
      endOffset: r.meta!.endOffset,
      size: r.meta!.size,
      maxTimestamp: r.meta!.maxTimestamp,
      evicted: r.evicted,
    })),
    totalBytes,
    { expiryMs: topic.message_expiry, maxBytes: share },
    ctx.clock.now(),
    (end) => deletableUnder(barrier, end),
    Infinity,
  );
  const chosen = deletable.slice(0, limit);
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
      noteFailure(out, `retention delete of segment ${r.start}`, err);
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
