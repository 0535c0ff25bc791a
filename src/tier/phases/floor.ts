// The floor phase: `tiered_up_to_offset` only moves forward, over segments safely in the store
// and over gaps the broker's retention left before a copy (recorded as `lost_before_upload`,
// never hidden, and only when the bucket does not hold them either); a purge, which restarts
// offsets below the floor, starts a new generation.
import type { SegmentFiles } from "../../partition/segments.ts";
import { isCleanedDangling, retiredOf, segmentsOf } from "../../state/segment_state.ts";
import type { PartitionLedger } from "../partition_ledger.ts";
import { isRetryable } from "../../../providers/types.ts";
import type { PhaseContext } from "../phase.ts";
import { adoptFromBucket } from "../rebuild.ts";
import { computeFloor } from "../policy.ts";
import { announceRetired, retiredEvents } from "../retirement.ts";

/**
 * Advances the floor over the longest contiguous prefix of copied (or lost) segments.
 * @returns the floor after the phase
 */
export async function advanceFloor(ctx: PhaseContext, ledger: PartitionLedger): Promise<bigint> {
  const state = ledger.state;
  const floor = computeFloor(
    segmentsOf(state).map((r) => ({
      start: r.start,
      endOffset: r.meta?.endOffset ?? r.lostEndOffset,
      copied: r.meta !== undefined &&
        (r.state === "COPY_SEGMENT_FINISHED" || r.deleteCause === "retention"),
      lost: r.state === "LOST_BEFORE_UPLOAD",
    })),
    state.floor,
  );
  if (floor > state.floor) {
    await ledger.record({
      type: "floor",
      generation: state.generation,
      tieredUpTo: floor,
      at: ctx.clock.now(),
    });
    ctx.log.debug("floor advanced", { tiered_up_to_offset: floor });
  }
  return ledger.state.floor;
}

/**
 * Offsets below the first local segment that no journal record covers were deleted by the
 * broker before tierd copied them — unless the bucket holds them (a journal cut short, a state
 * dir restored from an old backup): those copies are adopted first, and only a range that no
 * broker file, marker or object holds is recorded as `lost_before_upload`, visibly. While the
 * bucket cannot be asked, nothing is recorded.
 * @returns how many gaps were recorded (0 or 1)
 */
export async function recordLosses(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  segments: readonly SegmentFiles[],
): Promise<number> {
  if (segments.length === 0) return 0;
  const found = await unrecordedGap(ctx, ledger, segments);
  if (!found) return 0;
  let gap = found;
  try {
    const { adopted } = await adoptFromBucket(ctx, ledger, segments);
    if (adopted > 0) {
      ctx.log.warn("copies the journal did not know were found in the bucket and adopted", {
        adopted,
        range_from: gap.from,
        range_to: gap.to,
      });
      const left = await unrecordedGap(ctx, ledger, segments);
      if (!left) return 0;
      gap = left;
    }
  } catch (err) {
    if (!isRetryable(err)) throw err;
    ctx.log.warn(
      "cannot ask the bucket about offsets the journal does not cover; not recording them lost yet",
      {
        range_from: gap.from,
        range_to: gap.to,
        err,
      },
    );
    return 0;
  }
  await ledger.record({
    type: "lost_before_upload",
    segment: gap.from,
    generation: ledger.state.generation,
    endOffset: gap.to,
    at: ctx.clock.now(),
  });
  ctx.observer.lostBeforeUpload?.(1);
  ctx.log.warn("offsets deleted by the broker before they were copied", {
    lost_from: gap.from,
    lost_to: gap.to,
  });
  return 1;
}

/** The offsets below the first local segment that no record covers, if any. */
async function unrecordedGap(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  segments: readonly SegmentFiles[],
): Promise<{ from: bigint; to: bigint } | undefined> {
  await advanceFloor(ctx, ledger);
  const state = ledger.state;
  const firstLocal = segments[0].start;
  const next = state.floor + 1n;
  if (next >= firstLocal) return undefined;
  // The gap ends at the first record that still means something (a copy, or a dangling one
  // that needs its own cleanup first), or at the first local segment.
  const blocker = segmentsOf(state).find((r) =>
    r.start >= next && r.start < firstLocal && !isCleanedDangling(r)
  );
  const to = (blocker?.start ?? firstLocal) - 1n;
  return to < next ? undefined : { from: next, to };
}

/**
 * A purge restarts a partition's offsets below the floor: the active segment then starts at
 * or below `tiered_up_to_offset`, which never happens otherwise. Bumps the generation, and
 * retires the old one (its objects are swept after `orphan_grace`).
 * @returns the new generation, when there was a purge
 */
export async function detectPurge(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  segments: readonly SegmentFiles[],
): Promise<bigint | undefined> {
  const active = segments.at(-1);
  const { floor } = ledger.state;
  if (!active || floor < 0n || active.start > floor) return undefined;
  const old = ledger.state.generation;
  const generation = old + 1n;
  ctx.log.warn("partition was purged (offsets restarted below the floor): new generation", {
    floor,
    active_start: active.start,
    generation,
  });
  const at = ctx.clock.now();
  const reason = `purged: the active segment starts at ${active.start}, at or below the floor ` +
    `${floor}`;
  // The old generation is retired right after the new one is recorded (never before: a torn
  // append then leaves it unretired, which only delays its sweep).
  await ledger.record(
    { type: "generation", generation, at },
    ...retiredEvents(ledger.state.incarnation!, [old], reason, at),
  );
  const incarnation = ledger.state.incarnation!;
  await announceRetired(
    ctx,
    ledger,
    retiredOf(ledger.state).filter((r) => r.incarnation === incarnation && r.generation === old),
  );
  return generation;
}
