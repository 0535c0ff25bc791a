// The copy phase: sealed segments go to the store oldest first, one at a time per partition.
// Each copy is journaled before it starts and when it is verified; a failed one becomes
// DANGLING and holds back the segments after it until its cleanup has run. A damaged segment
// (a record or index entry that does not verify) is never copied: it is reported on every pass
// and holds back the segments after it until its files change.
//
// While one segment uploads, the next one's files are already being read and verified (its
// checksums and part checks computed): the agent's thread would otherwise wait on the store for
// most of an upload, and the verify pass is the one read that hashes the segment, much of the CPU
// a copy costs. The next copy takes that work when its turn comes; a copy that never comes (a
// failure, a stop) just drops it.
import { FormatError } from "../../format/errors.ts";
import type { FormatName } from "../../format/types.ts";
import type { SegmentFiles } from "../../partition/segments.ts";
import { getSegment, mayStartCopy } from "../../state/segment_state.ts";
import { copyFinishedEvent } from "../../state/events.ts";
import type { ObjectFacts } from "../../layout/object_metadata.ts";
import { copySegment, type SegmentSource, segmentSource } from "../copy_segment.ts";
import type { PartitionLedger } from "../partition_ledger.ts";
import { type DamagedSegment, SegmentDamage } from "../segment_damage.ts";
import { type PhaseContext, stopping, withSegmentDeadline } from "../phase.ts";
import { noProblems, noteFailure, type Problems } from "../problem.ts";

/** A hole (or overlap) between two consecutive local segments. */
export interface ChainGap {
  afterEnd: bigint;
  nextStart: bigint;
}

/** What the copy phase did. */
export interface CopyOutcome extends Problems {
  copied: number;
  /** Copies found already complete in the store (a retry, or a second agent). */
  adopted: number;
  failed: number;
  /** Holes between consecutive local segments met on the way (reported, never hidden). */
  gaps: ChainGap[];
  /** The damaged segment the phase stopped at, if it did (never copied). */
  damaged: DamagedSegment[];
}

/** Inputs of the copy phase. */
export interface CopyInput {
  segments: readonly SegmentFiles[];
  /** The partition's format; nothing is copied while it is unknown (no bytes yet). */
  format: FormatName | undefined;
  /** Gaps already logged once (by the partition), so each is logged only once. */
  reportedGaps: Set<string>;
  /** The topic's storage class or tier for its copies (`[[topic]] storage_class`). */
  storageClass?: string;
  /**
   * Segments found damaged on earlier passes (by the partition): reported again without being
   * read while their files stay as they were. @default a fresh one (nothing remembered)
   */
  damage?: SegmentDamage;
}

/** Copies the partition's sealed segments that have no copy yet, oldest first. */
export async function copyPhase(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  input: CopyInput,
): Promise<CopyOutcome> {
  const out: CopyOutcome = {
    ...noProblems(),
    copied: 0,
    adopted: 0,
    failed: 0,
    gaps: [],
    damaged: [],
  };
  const { format } = input;
  const damage = input.damage ?? new SegmentDamage();
  if (!format) return out;
  let prevEnd: bigint | undefined;
  let ahead: Lookahead | undefined;
  for (let i = 0; i < input.segments.length; i++) {
    const seg = input.segments[i];
    if (prevEnd !== undefined) checkChain(ctx, prevEnd, seg.start, input.reportedGaps, out);
    if (!seg.sealed || stopping(ctx)) return out;
    const rec = getSegment(ledger.state, ledger.state.generation, seg.start);
    prevEnd = rec?.meta?.endOffset;
    if (rec && !mayStartCopy(rec)) {
      // Copied; or copied and since deleted remotely by total retention (still local until the
      // broker's own retention drops it): either way later segments may go on.
      if (rec.state === "COPY_SEGMENT_FINISHED" || rec.deleteCause === "retention") continue;
      if (rec.state === "COPY_SEGMENT_STARTED") {
        // Found mid-copy: the previous run crashed. Clean it up before a new copy.
        await ledger.record({
          type: "dangling",
          segment: seg.start,
          generation: rec.generation,
          reason: "copy interrupted (found in COPY_SEGMENT_STARTED)",
          at: ctx.clock.now(),
        });
      }
      return out; // oldest first: later segments wait for this one
    }
    const mine = ahead?.seg === seg ? ahead.source : undefined;
    ahead = lookahead(ctx, ledger, input.segments[i + 1], format, damage);
    const copied = await copyOne(ctx, ledger, seg, format, damage, out, mine, input.storageClass);
    if (!copied) return out;
    prevEnd = copied.endOffset;
  }
  return out;
}

/** The next segment's verification, started while the current one uploads. */
interface Lookahead {
  seg: SegmentFiles;
  /** Settles as `segmentSource` would; never rejects unobserved. */
  source: Promise<SegmentSource>;
}

/** Starts verifying `next` when it will be the next to copy (sealed, no record, not damaged). */
function lookahead(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  next: SegmentFiles | undefined,
  format: FormatName,
  damage: SegmentDamage,
): Lookahead | undefined {
  if (!next?.sealed || damage.known(next)) return undefined;
  const rec = getSegment(ledger.state, ledger.state.generation, next.start);
  if (!mayStartCopy(rec)) return undefined;
  const source = segmentSource(
    next,
    format,
    ledger.keys(next.start),
    ctx.config.tiered_storage.part_size,
  );
  source.catch(() => {}); // observed by the copy that takes it, or dropped with it
  return { seg: next, source };
}

/** Reports a hole or overlap between consecutive segments (logged once per partition). */
function checkChain(
  ctx: PhaseContext,
  prevEnd: bigint,
  nextStart: bigint,
  reported: Set<string>,
  out: CopyOutcome,
): void {
  if (nextStart === prevEnd + 1n) return;
  out.gaps.push({ afterEnd: prevEnd, nextStart });
  const key = `${prevEnd}:${nextStart}`;
  if (reported.has(key)) return;
  reported.add(key);
  ctx.log.warn("gap in the broker's segment chain", {
    previous_end_offset: prevEnd,
    next_start_offset: nextStart,
  });
}

/** Copies one segment; returns its facts, or undefined when it could not be copied. */
async function copyOne(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  seg: SegmentFiles,
  format: FormatName,
  damage: SegmentDamage,
  out: CopyOutcome,
  verified?: Promise<SegmentSource>,
  storageClass?: string,
): Promise<ObjectFacts | undefined> {
  const known = damage.known(seg);
  if (known) {
    // The same files that failed before: reported again, not read again.
    reportDamage(ctx, out, known, damage.due(seg.start, ctx.clock.now()));
    return undefined;
  }
  let src: SegmentSource;
  try {
    const keys = ledger.keys(seg.start); // as they are now, whenever the verification ran
    src = verified
      ? { ...await verified, keys }
      : await segmentSource(seg, format, keys, ctx.config.tiered_storage.part_size);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined; // broker removed it
    if (err instanceof FormatError) {
      // Damaged: never uploaded as good, never evicted (no record, so the floor stops before
      // it). Nothing was sent, nothing to clean up.
      const noted = damage.note(seg, err, ctx.clock.now());
      reportDamage(ctx, out, noted.damage, noted.log);
      return undefined;
    }
    // Unreadable: nothing was sent, nothing to clean up. Loud, and retried next pass.
    noteFailure(out, { kind: "segment_unreadable", what: seg.logPath, segment: seg.start }, err);
    ctx.log.error("cannot read sealed segment; not copied", { segment: seg.start, err });
    return undefined;
  }
  if (damage.clear(seg.start)) {
    ctx.log.info("a segment reported damaged now verifies; copying it", {
      segment: seg.start,
      path: seg.logPath,
    });
  }
  const generation = ledger.state.generation;
  await ledger.record({
    type: "copy_started",
    segment: seg.start,
    generation,
    at: ctx.clock.now(),
  });
  const started = ctx.clock.monotonic();
  const cfg = ctx.config.tiered_storage;
  try {
    const outcome = await withSegmentDeadline(
      ctx,
      "upload",
      (store, signal) =>
        copySegment(store, src, {
          concurrency: cfg.upload_concurrency,
          pool: ctx.partPool,
          storageClass: storageClass || undefined,
          signal,
          onProgress: (stored) => ctx.observer.uploadProgress?.(src.keys.log, stored),
          onUploadId: (key, uploadId) =>
            ledger.record({
              type: "multipart_started",
              segment: seg.start,
              generation,
              key,
              uploadId,
              at: ctx.clock.now(),
            }),
        }),
    );
    await ledger.record(copyFinishedEvent(seg.start, generation, src.meta, ctx.clock.now()));
    ctx.observer.uploadProgress?.(src.keys.log, undefined);
    const seconds = (ctx.clock.monotonic() - started) / 1000;
    if (outcome === "adopted") out.adopted++;
    else out.copied++;
    ctx.observer.upload?.(
      outcome === "adopted" ? "adopted" : "ok",
      seconds,
      src.meta.size,
      ledger.label,
    );
    // The stall gauge follows each copy as it ends: a pass under an outage can run for several
    // upload deadlines, far too late for the pass's own summary.
    ctx.observer.stalled?.(0);
    ctx.log.info(outcome === "adopted" ? "segment already in store" : "segment copied", {
      segment: seg.start,
      end_offset: src.meta.endOffset,
      bytes: src.meta.size,
      key: src.keys.log,
      seconds: Number(seconds.toFixed(3)),
    });
    return src.meta;
  } catch (err) {
    out.failed++;
    const problem = noteFailure(out, { kind: "copy", what: src.keys.log, segment: seg.start }, err);
    if (problem.storeFault) ctx.observer.stalled?.(1);
    ctx.observer.uploadProgress?.(src.keys.log, undefined);
    ctx.observer.upload?.(
      "failed",
      (ctx.clock.monotonic() - started) / 1000,
      0,
      ledger.label,
    );
    await ledger.record({
      type: "dangling",
      segment: seg.start,
      generation,
      reason: String((err as Error).message).slice(0, 500),
      at: ctx.clock.now(),
    });
    ctx.log.warn("segment copy failed; dangling until cleaned up", {
      segment: seg.start,
      key: src.keys.log,
      err,
    });
    return undefined;
  }
}

/** A damaged segment goes into the outcome on every pass; its error line only when `log`. */
function reportDamage(
  ctx: PhaseContext,
  out: CopyOutcome,
  damage: DamagedSegment,
  log: boolean,
): void {
  out.damaged.push(damage);
  out.problems.push({
    kind: "segment_damaged",
    what: `segment ${damage.segment}`,
    detail: damage.reason,
    segment: damage.segment,
    storeFault: false,
  });
  if (!log) return;
  ctx.log.error("sealed segment is damaged: not copied, not evicted, later segments wait", {
    segment: damage.segment,
    file: damage.file,
    position: damage.position,
    code: damage.code,
    reason: damage.reason,
    since: new Date(damage.since).toISOString(),
  });
}
