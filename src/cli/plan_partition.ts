// What `tierd plan` says of one partition: which local segments eviction would remove now and
// which remote copies total retention would delete now, each with why — decided by the very
// functions the agent's pass runs (`planEvictions`, the evictor's `admit`, `planRetention`) on
// the same config, the journal read read-only and the broker's directory listed. Retention is
// planned on the partition as it would be after those evictions, as the pass runs it. Nothing is
// written, and the store is not asked.
import type { Clock } from "../base/clock.ts";
import type { Config, TopicConfig } from "../config/schema.ts";
import { formatDuration as configDuration, humanSize } from "../config/units.ts";
import { readConsumerBarrier } from "../partition/consumer_offsets.ts";
import { listSegments } from "../partition/segments.ts";
import { applyEvent, type PartitionState, segmentsOf } from "../state/segment_state.ts";
import { describeBlock } from "../tier/eviction_gate.ts";
import type { Admission, Evictor } from "../tier/evictor.ts";
import { planEvictions } from "../tier/phases/evict.ts";
import { planRetention, retentionIdle } from "../tier/phases/retention.ts";
import {
  type EvictionReason,
  MAX_EVICTIONS_PER_PASS,
  type RetentionReason,
} from "../tier/policy.ts";
import type { TieredPartition } from "./inventory.ts";
import { formatDuration } from "./progress.ts";

/**
 * What would happen to a segment: `evict` (its local files go; the copy stays), `wait` (eviction
 * wants it gone but the evictor holds it: a consumer offset, a running broker), `delete` (its
 * remote copy goes), `later` (a deletion beyond this pass's `delete_batch_per_pass`).
 */
export type PlanAction = "evict" | "wait" | "delete" | "later";

/** One segment of the plan. */
export interface PlanRow {
  partition: string;
  action: PlanAction;
  segment: bigint;
  end: bigint;
  /** Bytes of its `.log`. */
  bytes: number;
  reason: string;
}

/** One partition's plan: its rows, and notes on what holds the rest back. */
export interface PartitionPlan {
  partition: string;
  rows: PlanRow[];
  notes: string[];
}

/** What the plan is made with: the agent's config, its evictor, a clock. */
export interface PlanEnv {
  config: Config;
  evictor: Evictor;
  clock: Clock;
}

/**
 * Plans one broker partition (one with a directory) as the agent's next pass would decide it.
 * @param partitionsInTopic the topic's partitions on the broker (they share `max_topic_size`)
 */
export async function planPartition(
  env: PlanEnv,
  part: TieredPartition & { dir: string },
  topic: TopicConfig,
  partitionsInTopic: number,
): Promise<PartitionPlan> {
  const { config, clock } = env;
  const out: PartitionPlan = { partition: part.label, rows: [], notes: [] };
  const note = (text: string) => out.notes.push(`${part.label}: ${text}`);
  const now = clock.now();
  const local = await listSegments(part.dir, {
    now,
    quiescenceMs: config.agent.seal_quiescence,
  });
  let state = part.state;
  if (state.incarnation === undefined) {
    note("no journal yet: nothing is copied, so nothing is evicted or deleted");
    return out;
  }

  const evictions = planEvictions(state, local, topic, now);
  for (const c of evictions.changed) {
    note(
      `segment ${c.start}: ${c.path} is ${c.localBytes} bytes, its verified copy ` +
        `${c.copiedBytes}: changed after it was copied, never evicted`,
    );
  }
  const chosen = evictions.chosen;
  let admission: Admission = { count: chosen.length };
  if (chosen.length > 0 && env.evictor.admit) {
    try {
      admission = await env.evictor.admit(part.id, part.dir, chosen.map((c) => c.segment));
    } catch (err) {
      admission = { count: 0 };
      note(`${env.evictor.action} could not be asked (${(err as Error).message}): nothing goes`);
    }
  }
  const sizeOf = new Map(local.map((s) => [s.start, s.logSize]));
  for (const [i, c] of chosen.entries()) {
    const admitted = i < admission.count;
    out.rows.push({
      partition: part.label,
      action: admitted ? "evict" : "wait",
      segment: c.segment.start,
      end: c.segment.endOffset,
      bytes: sizeOf.get(c.segment.start) ?? c.segment.size,
      reason: evictionWhy(c.reason, topic) +
        (admitted || !admission.block
          ? ""
          : `; waits: ${describeBlock({ ...admission.block, segment: c.segment.start })}`),
    });
  }
  if (chosen.length >= MAX_EVICTIONS_PER_PASS) {
    note(`at most ${MAX_EVICTIONS_PER_PASS} segments are evicted per pass; more may follow`);
  }
  if (evictions.pressured) {
    note(
      `local retention wants more gone than is copied yet (tiered_up_to_offset ${state.floor}): ` +
        "those segments go once their copies are verified",
    );
  }
  // Retention runs on the partition as eviction leaves it: evicted copies count as remote only
  // (with those whose local files are already gone, which the pass records evicted first).
  const present = new Set(local.map((s) => s.start));
  const gone = new Set(chosen.slice(0, admission.count).map((c) => c.segment.start));
  for (const r of segmentsOf(state)) {
    if (r.state === "COPY_SEGMENT_FINISHED" && !r.evicted && !present.has(r.start)) {
      gone.add(r.start);
    }
  }
  for (const start of gone) {
    state = applyEvent(state, {
      type: "evicted",
      segment: start,
      generation: state.generation,
      at: now,
    });
  }
  await planTotalRetention(env, part, topic, partitionsInTopic, {
    state,
    after: local.filter((s) => !gone.has(s.start)),
    now,
    out,
    note,
  });
  return out;
}

async function planTotalRetention(
  env: PlanEnv,
  part: TieredPartition & { dir: string },
  topic: TopicConfig,
  partitionsInTopic: number,
  at: {
    state: PartitionState;
    after: Awaited<ReturnType<typeof listSegments>>;
    now: number;
    out: PartitionPlan;
    note: (text: string) => void;
  },
): Promise<void> {
  const { state, out, note } = at;
  if (retentionIdle(state, topic)) return;
  const barrier = await readConsumerBarrier(part.dir);
  if (barrier.bad.length > 0) {
    note(
      `total retention is paused: unreadable consumer offset file(s) ` +
        barrier.bad.map((b) => `${b.path} (${b.reason})`).join(", "),
    );
    return;
  }
  const ts = env.config.tiered_storage;
  const plan = planRetention({
    state,
    segments: at.after,
    topic,
    partitionsInTopic,
    barrier,
    budget: ts.delete_batch_per_pass,
    pendingPerPartition: ts.delete_pending_per_partition,
    nowMs: at.now,
  });
  const share = topic.max_topic_size / Math.max(1, partitionsInTopic);
  const grace = ts.delete_grace > 0
    ? `; goes once it has stayed deletable for delete_grace (${configDuration(ts.delete_grace)})`
    : "";
  // Each deletion takes two objects of the pass's budget (delete_batch_per_pass).
  let budget = ts.delete_batch_per_pass;
  const take = (): PlanAction => {
    const action = budget > 0 ? "delete" : "later";
    budget -= 2;
    return action;
  };
  for (const r of plan.resume) {
    out.rows.push({
      partition: part.label,
      action: take(),
      segment: r.start,
      end: r.meta.endOffset,
      bytes: r.meta.size,
      reason: "its deletion is journaled and not finished; the agent finishes it",
    });
  }
  for (const c of plan.chosen) {
    out.rows.push({
      partition: part.label,
      action: take(),
      segment: c.segment.start,
      end: c.segment.endOffset,
      bytes: c.segment.size,
      reason: retentionWhy(c.reason, topic, share) + grace,
    });
  }
  if (budget < 0) {
    note(
      `a pass deletes at most delete_batch_per_pass (${ts.delete_batch_per_pass}) objects, ` +
        "two per segment, across all partitions; the rest follow in later passes",
    );
  }
  const last = plan.chosen.at(-1)?.segment.endOffset;
  if (barrier.lowest !== undefined && (last === undefined || last < barrier.lowest)) {
    note(
      `nothing at or after the lowest stored consumer offset (${barrier.lowest}) is deleted`,
    );
  }
}

/** Why local retention wants a segment gone, in words. */
function evictionWhy(r: EvictionReason, topic: TopicConfig): string {
  const why: string[] = [];
  if (r.byAge) {
    why.push(
      `newest message ${formatDuration(r.ageMs / 1000)} old, local_retention_age ` +
        configDuration(topic.local_retention_age),
    );
  }
  if (r.bySize) {
    why.push(
      `${humanSize(r.localBytes)} local, over local_retention_size ` +
        humanSize(topic.local_retention_size),
    );
  }
  return why.join("; ");
}

/** Why total retention deletes a copy, in words. */
function retentionWhy(r: RetentionReason, topic: TopicConfig, share: number): string {
  const why: string[] = [];
  if (r.expired) {
    why.push(
      `newest message ${formatDuration(r.ageMs / 1000)} old, message_expiry ` +
        configDuration(topic.message_expiry),
    );
  }
  if (r.oversize) {
    why.push(
      `evicted, and the partition holds ${humanSize(r.partitionBytes)}, over its share of ` +
        `max_topic_size (${humanSize(share)})`,
    );
  }
  return why.join("; ");
}
