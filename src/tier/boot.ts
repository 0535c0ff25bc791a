// Boot reconciliation of one partition, before its first pass: record its incarnation (a new
// one for a recreated directory), turn copies and cleanups a crash cut off into DANGLING, and
// check the `.remote` markers — quarantining untrusted ones and recording evictions a crash
// left unrecorded.
import type { DiscoveredPartition } from "../partition/discover.ts";
import { newIncarnation } from "../partition/incarnation.ts";
import { type QuarantinedMarker, scanMarkers } from "../state/marker_dir.ts";
import { getSegment, segmentsOf } from "../state/segment_state.ts";
import type { PartitionLedger } from "./partition_ledger.ts";
import { listLocal, type PhaseContext } from "./phase.ts";

/** What boot reconciliation changed. */
export interface BootOutcome {
  /** Set when a new incarnation was recorded (first sight, or a recreated directory). */
  incarnation?: bigint;
  /** Copies and cleanups found cut off, now DANGLING. */
  interrupted: number;
  quarantined: QuarantinedMarker[];
  /** Segments whose marker proves them evicted, now recorded so. */
  evictionsRecorded: number;
}

/** Reconciles `ledger` with the partition directory `part` and the markers beside the journal. */
export async function reconcileAtBoot(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  part: DiscoveredPartition,
): Promise<BootOutcome> {
  const incarnation = await checkIncarnation(ctx, ledger, part);
  const interrupted = await interruptedWork(ctx, ledger);
  const markers = await reconcileMarkers(ctx, ledger, part.dir);
  return { incarnation, interrupted, ...markers };
}

async function checkIncarnation(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  part: DiscoveredPartition,
): Promise<bigint | undefined> {
  const s = ledger.state;
  if (s.incarnation !== undefined && s.device === part.device && s.inode === part.inode) {
    return undefined;
  }
  const incarnation = newIncarnation();
  if (s.incarnation !== undefined) {
    ctx.log.warn("partition directory was recreated: new incarnation", {
      old_incarnation: s.incarnation,
      incarnation,
    });
  }
  await ledger.record({
    type: "incarnation",
    incarnation,
    device: part.device,
    inode: part.inode,
    at: ctx.clock.now(),
  });
  return incarnation;
}

/**
 * A copy still in COPY_SEGMENT_STARTED, or a dangling cleanup still in DELETE_SEGMENT_STARTED,
 * was cut off by a crash. It becomes DANGLING here, whether or not its local files survived, so
 * cleanup (and, for a segment the broker has since deleted, the lost_before_upload record) can
 * follow.
 */
async function interruptedWork(ctx: PhaseContext, ledger: PartitionLedger): Promise<number> {
  let count = 0;
  for (const [generation] of ledger.state.segments) {
    for (const r of segmentsOf(ledger.state, generation)) {
      const cleanup = r.state === "DELETE_SEGMENT_STARTED" && r.deleteCause === "dangling";
      if (r.state !== "COPY_SEGMENT_STARTED" && !cleanup) continue;
      await ledger.record({
        type: "dangling",
        segment: r.start,
        generation,
        reason: `${cleanup ? "cleanup" : "copy"} interrupted (found in ${r.state} at boot)`,
        at: ctx.clock.now(),
      });
      count++;
    }
  }
  return count;
}

/**
 * Quarantines untrusted markers; a trusted marker whose broker `.log` is gone is a remote
 * segment — records the eviction a crash may have left unrecorded.
 */
async function reconcileMarkers(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  dir: string,
): Promise<{ quarantined: QuarantinedMarker[]; evictionsRecorded: number }> {
  const { markers, quarantined } = await scanMarkers(
    ledger.stateDir,
    ledger.location().incarnation,
    ctx.clock,
  );
  for (const q of quarantined) {
    ctx.observer.markerQuarantined?.(q.path, q.reason);
    ctx.log.warn("untrusted .remote marker quarantined", {
      path: q.path,
      moved_to: q.movedTo,
      reason: q.reason,
    });
  }
  let evictionsRecorded = 0;
  if (markers.length === 0) return { quarantined, evictionsRecorded };
  const local = new Set((await listLocal(ctx, dir)).map((s) => s.start));
  for (const m of markers) {
    const rec = getSegment(ledger.state, m.marker.generation, m.start);
    if (rec?.state === "COPY_SEGMENT_FINISHED" && !rec.evicted && !local.has(m.start)) {
      await ledger.record({
        type: "evicted",
        segment: m.start,
        generation: m.marker.generation,
        at: ctx.clock.now(),
      });
      evictionsRecorded++;
    }
  }
  return { quarantined, evictionsRecorded };
}
