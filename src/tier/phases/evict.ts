// The eviction phase: while a topic's local retention is exceeded, a prefix of sealed segments
// under the floor leaves the broker's directory — each one's copy proven first (HEADs, then its
// bytes: the store's checksum against the local file's, or a read-back), its kept index copy and
// marker written durably, then removed through the evictor port, and recorded only once the
// directory shows it gone. A copy found damaged or missing goes DANGLING: cleaned up and copied
// again while the local files are still there. What the evictor does not admit (a consumer
// barrier, a running broker) waits, and so does a request the broker answered without removing
// anything, with an exponential backoff: the partition's `EvictionGate` holds why, says it once,
// and reports it.
import { join } from "node:path";
import type { TopicConfig } from "../../config/schema.ts";
import type { FormatName } from "../../format/types.ts";
import { probeAbsence } from "../../../providers/absence.ts";
import { StoreError } from "../../../providers/types.ts";
import { segmentStem } from "../../layout/partition.ts";
import type { SegmentFiles } from "../../partition/segments.ts";
import {
  type CopiedRecord,
  getSegment,
  hasCopy,
  type PartitionState,
  type SegmentRecord,
  segmentsOf,
} from "../../state/segment_state.ts";
import { CopyMismatchError, SegmentChangedError } from "../copy_segment.ts";
import { attemptKey, EvictionGate, EvictionHeldError } from "../eviction_gate.ts";
import type { Admission, Evictor } from "../evictor.ts";
import { proveCopy } from "../prove_copy.ts";
import { type PartitionLedger, unlinkIfPresent } from "../partition_ledger.ts";
import { listLocal, type PhaseContext, stopping, withSegmentDeadline } from "../phase.ts";
import { noProblems, noteFailure, onSegment, type Problems } from "../problem.ts";
import {
  chooseEvictions,
  type EvictionCandidate,
  type EvictionChoice,
  explainEvictions,
} from "../policy.ts";

/** What the eviction phase did. */
export interface EvictOutcome extends Problems {
  evicted: number;
  /** Local retention wants segments evicted that the floor does not cover yet. */
  pressured: boolean;
}

/** Inputs of the eviction phase. */
export interface EvictInput {
  /** The broker directory of the partition. */
  dir: string;
  segments: readonly SegmentFiles[];
  format: FormatName | undefined;
  topic: TopicConfig;
  evictor: Evictor;
  /** The partition's block and backoff across passes. @default a fresh gate (no memory) */
  gate?: EvictionGate;
}

/** Evicts what local retention asks for and the floor allows (at most 16 segments). */
export async function evictPhase(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  input: EvictInput,
): Promise<EvictOutcome> {
  const out: EvictOutcome = { ...noProblems(), evicted: 0, pressured: false };
  const recorded = await finishHalfDone(ctx, ledger, input);
  out.evicted += recorded;
  if (recorded > 0) ctx.observer.evicted?.(recorded);
  const plan = planEvictions(ledger.state, input.segments, input.topic, ctx.clock.now());
  for (const c of plan.changed) {
    // A sealed segment never changes; one that did (truncated behind our back) is not the
    // segment in the store, so it is never evicted, and said so on every pass.
    out.problems.push({
      kind: "segment_changed",
      what: c.path,
      detail: `${c.localBytes} bytes, but its verified copy has ${c.copiedBytes}: ` +
        "changed after it was copied; not evicted",
      segment: c.start,
      storeFault: false,
    });
    ctx.log.error("local segment changed after its copy was verified; not evicting it", {
      segment: c.start,
      path: c.path,
      local_bytes: c.localBytes,
      copied_bytes: c.copiedBytes,
    });
  }
  const chosen = plan.chosen.map((c) => c.segment);
  out.pressured = plan.pressured;
  const gate = input.gate ?? new EvictionGate(ledger.id, ctx.log, ctx.clock);
  if (chosen.length === 0) {
    gate.clear(); // nothing is wanted gone: nothing waits
    return out;
  }
  if (stopping(ctx)) return out;
  if (!input.format) {
    out.problems.push({
      kind: "format_unknown",
      what: `partition ${ledger.label}`,
      detail: "format unknown; nothing evicted",
      storeFault: false,
    });
    return out;
  }

  let admission: Admission;
  try {
    admission = await input.evictor.admit?.(ledger.id, input.dir, chosen) ??
      { count: chosen.length };
  } catch (err) {
    noteFailure(out, { kind: "evict", what: input.evictor.action }, err);
    ctx.log.warn(input.evictor.refused, { err });
    return out;
  }
  const admitted = chosen.slice(0, admission.count);
  if (admitted.length === 0) {
    gate.hold(admission.block!);
    return out;
  }
  const key = attemptKey(admitted[0].start, admission.consumerOffset);
  if (gate.backingOff(key)) return out; // the broker kept these last time: not yet again
  const ready = await verifyChosen(ctx, ledger, input, admitted, input.format, out);
  if (ready.length === 0) return out;
  try {
    await input.evictor.remove(ledger.id, input.dir, ready);
  } catch (err) {
    if (err instanceof EvictionHeldError) {
      gate.hold({ ...err.block, segment: ready[0].start });
      return out;
    }
    noteFailure(out, { kind: "evict", what: input.evictor.action }, err);
    ctx.log.warn(input.evictor.refused, { err });
    return out;
  }
  // Record only what is actually gone (the broker may keep some for its consumers).
  const after = new Set((await listLocal(ctx, input.dir)).map((s) => s.start));
  const removed: SegmentFiles[] = [];
  for (const seg of ready) {
    if (after.has(seg.start)) continue;
    await unlinkIfPresent(seg.indexPath); // a broker that dropped the .log may leave this
    await ledger.record({
      type: "evicted",
      segment: seg.start,
      generation: ledger.state.generation,
      at: ctx.clock.now(),
    });
    removed.push(seg);
  }
  const evicted = removed.length;
  if (evicted === 0) {
    // Answered, yet everything stayed: back off before asking the same again (Iggy answers
    // DeleteSegments with 204 whatever it deleted; 0.9 deletes a little after it answers).
    gate.keptAll(key, ready[0].start, admission.consumerOffset);
    ctx.log.debug("the evictor removed nothing; backing off", { segment: ready[0].start });
  } else {
    gate.progressed();
    if (admission.block) gate.hold(admission.block);
    else gate.clear();
  }
  out.evicted += evicted;
  if (evicted > 0) {
    ctx.observer.evicted?.(evicted);
    ctx.log.info("segments evicted locally", evictedFields(ledger, removed, input.evictor.via));
  }
  return out;
}

/**
 * What an eviction line says: exactly the segments whose local files this eviction removed,
 * the bytes that left the disk (their `.log` and `.index`), and the highest offset that left
 * it — not the floor, which may reach past segments local retention keeps.
 */
function evictedFields(
  ledger: PartitionLedger,
  removed: readonly SegmentFiles[],
  via: string,
): { count: number; bytes: number; from_offset: bigint; up_to_offset: bigint; via: string } {
  // Each was evicted from a verified copy, so each has its facts; the start bounds them below.
  const ends = removed.map((s) => {
    const r = getSegment(ledger.state, ledger.state.generation, s.start);
    return r && hasCopy(r) ? r.meta.endOffset : s.start;
  });
  return {
    count: removed.length,
    bytes: removed.reduce((n, s) => n + s.logSize + Math.max(0, s.indexSize), 0),
    from_offset: removed.reduce((m, s) => (s.start < m ? s.start : m), removed[0].start),
    up_to_offset: ends.reduce((m, e) => (e > m ? e : m), ends[0]),
    via,
  };
}

/**
 * Finishes evictions a crash or the broker left half done: files gone, not yet recorded. Said
 * on a line of its own: these files were gone before this pass, nothing left the disk now.
 */
async function finishHalfDone(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  input: EvictInput,
): Promise<number> {
  const present = new Set(input.segments.map((s) => s.start));
  const recorded: CopiedRecord[] = [];
  for (const r of segmentsOf(ledger.state)) {
    if (r.state !== "COPY_SEGMENT_FINISHED" || r.evicted || present.has(r.start)) continue;
    await ledger.writeMarker(r);
    // A crash between unlinking the .log and the .index leaves the .index behind.
    await unlinkIfPresent(join(input.dir, `${segmentStem(r.start)}.index`));
    await ledger.record({
      type: "evicted",
      segment: r.start,
      generation: ledger.state.generation,
      at: ctx.clock.now(),
    });
    recorded.push(r);
  }
  if (recorded.length > 0) {
    // The broker's own retention, or a crash between an unlink and its record.
    ctx.log.info("evictions recorded for segments already gone from the disk", {
      count: recorded.length,
      from_offset: recorded[0].start,
      up_to_offset: recorded.at(-1)!.meta.endOffset,
    });
  }
  return recorded.length;
}

/** A local segment whose size is not its verified copy's: changed after it was copied. */
export interface ChangedSegment {
  start: bigint;
  path: string;
  localBytes: number;
  copiedBytes: number;
}

/** What eviction chooses from a partition's state and local segments, before the evictor admits. */
export interface EvictionPlan {
  /** The segments local retention wants gone now and the floor allows, oldest first, with why. */
  chosen: EvictionChoice[];
  /** Local retention wants more evicted than the floor allows yet. */
  pressured: boolean;
  /** Copied segments whose local size differs from the copy's: never evicted. */
  changed: ChangedSegment[];
}

/**
 * The eviction decision of a pass, free of I/O: the local segments as eviction sees them, then
 * {@linkcode explainEvictions} under the topic's local retention. The eviction phase acts on it;
 * `tierd plan` prints it.
 * @param state the partition's journal state
 * @param segments the broker's local segments, oldest first
 * @param topic the topic's retention
 * @param nowMs the time of the decision
 */
export function planEvictions(
  state: PartitionState,
  segments: readonly SegmentFiles[],
  topic: TopicConfig,
  nowMs: number,
): EvictionPlan {
  const changed: ChangedSegment[] = [];
  const candidates = segments.map((s): EvictionCandidate => {
    const r = getSegment(state, state.generation, s.start);
    const copied = r?.state === "COPY_SEGMENT_FINISHED";
    if (copied && r.meta && r.meta.size !== s.logSize) {
      changed.push({
        start: s.start,
        path: s.logPath,
        localBytes: s.logSize,
        copiedBytes: r.meta.size,
      });
    }
    return {
      start: s.start,
      endOffset: r?.meta?.endOffset ?? s.start - 1n,
      size: s.logSize,
      maxTimestamp: r?.meta?.maxTimestamp ?? 0n,
      copied: copied && r.meta?.size === s.logSize,
      sealed: s.sealed,
    };
  });
  const retention = { ageMs: topic.local_retention_age, sizeBytes: topic.local_retention_size };
  const chosen = explainEvictions(candidates, state.floor, retention, nowMs);
  // Under pressure: local retention wants more evicted than the floor allows yet.
  const wanted = chooseEvictions(
    candidates.map((c) => ({ ...c, copied: true })),
    1n << 64n,
    retention,
    nowMs,
  );
  return { chosen, pressured: wanted.length > chosen.length, changed };
}

/**
 * Re-verifies each chosen copy right before its local files go, and writes its marker. Stops at
 * the first that fails, so the evicted set stays a prefix of the chain.
 */
async function verifyChosen(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  input: EvictInput,
  chosen: readonly EvictionCandidate[],
  format: FormatName,
  out: EvictOutcome,
): Promise<SegmentFiles[]> {
  const ready: SegmentFiles[] = [];
  for (const c of chosen) {
    const seg = input.segments.find((s) => s.start === c.start)!;
    const rec = getSegment(ledger.state, ledger.state.generation, c.start);
    try {
      await verifyOne(ctx, ledger, seg, rec, format);
      ready.push(seg);
    } catch (err) {
      noteFailure(out, onSegment("evict", c.start), err);
      let damage: "damaged" | "unreadable" | "none" = "none";
      if (err instanceof SegmentChangedError) {
        ctx.log.error("local segment changed after its copy was verified; not evicting it", {
          segment: c.start,
          path: seg.logPath,
          err,
        });
      } else if (isDamaged(err) && (damage = await damageOf(ctx, err)) !== "none") {
        // The broker still has the bytes: copy them again (cleanup first, as for any failed copy).
        await ledger.record({
          type: "dangling",
          segment: c.start,
          generation: ledger.state.generation,
          reason: `eviction: remote copy damaged: ${(err as Error).message}`.slice(0, 500),
          at: ctx.clock.now(),
        });
        // Counted as missing only when it is: a copy the store lists but cannot read is copied
        // again all the same, without paging anyone.
        if (damage === "damaged") ctx.observer.remoteObjectsMissing?.(1);
        ctx.log.warn("not evicting: the remote copy is damaged or gone; it will be copied again", {
          segment: c.start,
          err,
        });
      } else {
        ctx.log.warn("not evicting: the remote copy could not be verified", {
          segment: c.start,
          err,
        });
      }
      break;
    }
  }
  return ready;
}

/** A copy that is not the segment any more: other bytes, or an object gone. */
function isDamaged(err: unknown): boolean {
  return err instanceof CopyMismatchError ||
    (err instanceof StoreError && err.kind === "NotFound");
}

/**
 * A mismatch is damage as it is; a `NotFound` is looked at again (a HEAD, then a listing): gone
 * is damage, listed but unreadable is `unreadable`, found again is `none` (the store wavered: the
 * copy is fine, and eviction goes on next pass), and so is a store fault while asking.
 */
async function damageOf(
  ctx: PhaseContext,
  err: unknown,
): Promise<"damaged" | "unreadable" | "none"> {
  if (!(err instanceof StoreError)) return "damaged";
  const key = err.detail.key;
  if (key === undefined) return "damaged";
  try {
    const where = await withSegmentDeadline(
      ctx,
      "housekeeping",
      (store) => probeAbsence(store, key),
    );
    return where === "absent" ? "damaged" : where === "listed" ? "unreadable" : "none";
  } catch {
    return "none";
  }
}

/** Proves the copy right before the local files go, then writes the index copy and marker. */
async function verifyOne(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  seg: SegmentFiles,
  rec: SegmentRecord | undefined,
  format: FormatName,
): Promise<void> {
  if (rec?.state !== "COPY_SEGMENT_FINISHED") {
    throw new Error(
      `segment ${seg.start} has no verified copy to prove (${rec?.state ?? "LOCAL"})`,
    );
  }
  const meta = rec.meta;
  // The local file must be the segment that was copied (a purge that regrew past the floor
  // while the agent was down leaves other bytes under the same name and size), and the store
  // must hold its bytes: both in one read of the file.
  await proveCopy(ctx, {
    logPath: seg.logPath,
    indexPath: seg.indexPath,
    keys: ledger.keys(seg.start),
    meta: { ...meta, format },
  });
  await ledger.writeMarker(rec, seg.indexPath);
}
