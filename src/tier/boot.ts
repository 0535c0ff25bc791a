// Boot reconciliation of one partition, before its first pass. The incarnation is settled by
// content (a moved or restored directory keeps it; a recreated topic gets a new one), and a
// partition with no journal is rebuilt from the bucket; copies and cleanups a crash cut off
// become DANGLING; `.remote` markers are checked — untrusted ones quarantined, evictions a crash
// left unrecorded recorded, and copies the journal does not know adopted from the bucket. After a
// clean stop whose record still fits the journal and the marker names, the markers are not read
// before ready: the partition's first pass reads them (`reconcileMarkers`).
import { incarnationHex } from "../layout/partition.ts";
import type { DiscoveredPartition } from "../partition/discover.ts";
import { newIncarnation } from "../partition/incarnation.ts";
import type { SegmentFiles } from "../partition/segments.ts";
import { listMarkerNames, type QuarantinedMarker, scanMarkers } from "../state/marker_dir.ts";
import { type CleanStopEntry, markerNamesDigest } from "../state/clean_stop.ts";
import {
  getSegment,
  hasCopy,
  type PartitionState,
  retiredOf,
  segmentsOf,
} from "../state/segment_state.ts";
import { judgeIncarnation, type KnownSegment } from "./incarnation_evidence.ts";
import type { KeySpace, PartitionLedger } from "./partition_ledger.ts";
import { listLocal, type PhaseContext } from "./phase.ts";
import { adoptFromBucket, localPrefixHash, rebuildFromBucket, type Rebuilt } from "./rebuild.ts";
import { announceRetired, retiredEvents } from "./retirement.ts";
import { describeHole } from "../restore/holes.ts";

/** The reason a partition directory tierd never saw, with nothing in the bucket, gets. */
export const FIRST_SEEN = "first seen (nothing in the bucket)";

/** How the partition's incarnation was settled at boot. */
export type IncarnationOutcome =
  | { kind: "kept" }
  | { kind: "moved"; reason: string }
  | { kind: "rebuilt"; rebuilt: Rebuilt }
  | { kind: "new"; incarnation: bigint; reason: string };

/** What boot reconciliation changed. */
export interface BootOutcome {
  incarnation: IncarnationOutcome;
  /** Copies and cleanups found cut off, now DANGLING. */
  interrupted: number;
  quarantined: QuarantinedMarker[];
  /** Segments whose marker proves them evicted, now recorded so. */
  evictionsRecorded: number;
  /** Copies the journal did not know, adopted from the bucket. */
  adopted: number;
  /**
   * Markers trusted from the clean-stop record, not read at boot: the first pass reads and
   * checks them. 0 when boot read every marker.
   */
  markersUnread: number;
}

/** What reading and checking a partition's markers changed. */
export type MarkerOutcome = Pick<BootOutcome, "quarantined" | "evictionsRecorded" | "adopted">;

/**
 * Reconciles `ledger` with the partition directory `part`, its markers and the bucket.
 * @param cleanStop the partition's entry in the clean-stop record, if the last stop left one
 */
export async function reconcileAtBoot(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  part: DiscoveredPartition,
  keySpace: KeySpace,
  cleanStop?: CleanStopEntry,
): Promise<BootOutcome> {
  const local = await listLocal(ctx, part.dir);
  const incarnation = await settleIncarnation(ctx, ledger, part, local, keySpace);
  const interrupted = await interruptedWork(ctx, ledger);
  if (incarnation.kind === "kept" && cleanStop && await stillAsStopped(ledger, cleanStop)) {
    const none = { quarantined: [], evictionsRecorded: 0, adopted: 0 };
    return { incarnation, interrupted, ...none, markersUnread: cleanStop.markers };
  }
  const markers = await reconcileMarkers(ctx, ledger, local);
  return { incarnation, interrupted, ...markers, markersUnread: 0 };
}

/**
 * Whether the partition is as the clean stop left it: the same incarnation and generation, the
 * journal replayed byte for byte the one it closed, and the same marker names. Then its markers
 * were all read and checked, or written, by the run that stopped, and nothing of ours changed
 * them since; only damage in place can have, which the first pass's read still catches.
 */
async function stillAsStopped(ledger: PartitionLedger, entry: CleanStopEntry): Promise<boolean> {
  const s = ledger.state;
  const journal = ledger.openedJournal;
  if (s.incarnation !== entry.incarnation || s.generation !== entry.generation) return false;
  if (journal.bytes !== entry.journalBytes || journal.digest !== entry.journalDigest) return false;
  const names = await listMarkerNames(ledger.stateDir);
  return names.length === entry.markers && markerNamesDigest(names) === entry.markerNamesDigest;
}

/**
 * The journal's incarnation stays when the directory is the one it was recorded for (same
 * device and inode, and no broker file back where the journal says it was evicted), or when
 * its segments match what the journal knows (a copied or restored directory, new device
 * numbers). Without a journal the bucket decides. Otherwise the partition is new.
 */
async function settleIncarnation(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  part: DiscoveredPartition,
  local: readonly SegmentFiles[],
  keySpace: KeySpace,
): Promise<IncarnationOutcome> {
  const s = ledger.state;
  if (s.incarnation !== undefined && s.device === part.device && s.inode === part.inode) {
    // The same inode is no proof: ext4 gives a deleted directory's inode to the next one made,
    // so a topic deleted and recreated often comes back under it. Broker files where the
    // journal says they were evicted (or shorter than their copy) mean the content changed
    // behind tierd's back: then the bytes decide.
    if (!reappeared(local, s)) return { kind: "kept" };
    return await settleReappeared(ctx, ledger, part, local);
  }
  const at = ctx.clock.now();
  if (s.incarnation !== undefined) {
    const verdict = await judgeIncarnation(
      local.map((l) => l.start),
      knownByJournal(s),
      localPrefixHash(local),
      "journal",
    );
    if (verdict.verdict !== "different") {
      await ledger.record({
        type: "incarnation",
        incarnation: s.incarnation,
        device: part.device,
        inode: part.inode,
        at,
      });
      ctx.log.info("partition directory moved or restored: same incarnation", {
        incarnation: incarnationHex(s.incarnation),
        evidence: verdict.reason,
      });
      return { kind: "moved", reason: verdict.reason };
    }
    return await startNew(ctx, ledger, part, `recreated: ${verdict.reason}`, s.incarnation);
  }
  const { rebuilt, rejected } = await rebuildFromBucket(ctx, ledger, part, local, keySpace);
  if (rebuilt) {
    ctx.observer.stateRebuilt?.(ledger.label, rebuilt.segments);
    ctx.log.warn("no journal for this partition: rebuilt its state from the bucket", {
      incarnation: incarnationHex(rebuilt.incarnation),
      generation: rebuilt.generation,
      segments: rebuilt.segments,
      evicted: rebuilt.evicted,
      evidence: rebuilt.verdict.reason,
    });
    for (const p of rebuilt.problems) {
      ctx.log.error("remote object not usable while rebuilding; not adopted", {
        key: p.key,
        reason: p.reason,
      });
    }
    if (rebuilt.holes.length > 0) {
      ctx.log.error("the bucket has holes: read as gaps, nothing after them evicted", {
        holes: rebuilt.holes.map(describeHole),
      });
    }
    return { kind: "rebuilt", rebuilt };
  }
  const reason = rejected.length === 0
    ? FIRST_SEEN
    : `none of the bucket's incarnations matches: ${rejected.join("; ")}`;
  return await startNew(ctx, ledger, part, reason);
}

/**
 * Broker files stand where the journal says they were evicted, or are shorter than their copy:
 * the bytes decide. Other bytes than the journal's copies: the topic was recreated (under the
 * same inode) — a new incarnation, the old one retired. The same bytes: the files came back (an
 * operator copied them, a restore left them), and those segments are recorded local again so
 * the journal fits the directory.
 * @param part the directory (its device and inode)
 */
export async function settleReappeared(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  part: Pick<DiscoveredPartition, "device" | "inode">,
  local: readonly SegmentFiles[],
): Promise<IncarnationOutcome> {
  const s = ledger.state;
  const verdict = await judgeIncarnation(
    local.map((l) => l.start),
    knownByJournal(s),
    localPrefixHash(local),
    "journal",
  );
  if (verdict.verdict === "different") {
    return await startNew(ctx, ledger, part, `recreated: ${verdict.reason}`, s.incarnation);
  }
  const at = ctx.clock.now();
  const back = local.filter((l) => {
    const r = getSegment(s, s.generation, l.start);
    return r?.evicted === true && r.meta !== undefined && l.logSize === r.meta.size;
  });
  if (back.length > 0) {
    await ledger.record(
      ...back.map((l) => ({
        type: "unevicted" as const,
        segment: l.start,
        generation: s.generation,
        at,
      })),
    );
    ctx.log.warn("evicted segments are back in the broker's directory, with their bytes", {
      segments: back.map((l) => String(l.start)),
      evidence: verdict.reason,
    });
  }
  return { kind: "kept" };
}

/**
 * Records a new incarnation. When the journal had one (the directory was recreated), that one is
 * retired — every generation it has records of, and its current one — right after, in the same
 * append, and its tombstones are written: only the sweep deletes it, after `orphan_grace`.
 * Incarnations of the bucket that were never this journal's are not retired: not ours to delete.
 */
async function startNew(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  part: Pick<DiscoveredPartition, "device" | "inode">,
  reason: string,
  old?: bigint,
): Promise<IncarnationOutcome> {
  const incarnation = newIncarnation();
  if (old !== undefined) {
    ctx.log.warn("partition directory was recreated: new incarnation", {
      old_incarnation: incarnationHex(old),
      incarnation: incarnationHex(incarnation),
      evidence: reason,
    });
  } else if (reason !== FIRST_SEEN) {
    ctx.log.warn("new incarnation", { incarnation: incarnationHex(incarnation), evidence: reason });
  }
  const at = ctx.clock.now();
  const before = ledger.state;
  const retiring = old === undefined
    ? []
    : retiredEvents(old, [before.generation, ...before.segments.keys()], reason, at);
  await ledger.record(
    { type: "incarnation", incarnation, device: part.device, inode: part.inode, at },
    ...retiring,
  );
  if (old !== undefined) {
    await announceRetired(
      ctx,
      ledger,
      retiredOf(ledger.state).filter((r) => r.incarnation === old),
    );
  }
  return { kind: "new", incarnation, reason };
}

/**
 * Whether a local segment stands where the journal says the broker's files are gone (evicted),
 * or is shorter than its verified copy: neither happens to a partition that merely went on. (A
 * restart below the floor is a purge, which the pass handles.)
 */
function reappeared(local: readonly SegmentFiles[], s: PartitionState): boolean {
  return local.some((l) => {
    const r = getSegment(s, s.generation, l.start);
    return r?.meta !== undefined && (r.evicted || l.logSize < r.meta.size);
  });
}

/** The verified copies of the current generation a journal knows. */
function knownByJournal(s: PartitionState): KnownSegment[] {
  return segmentsOf(s).filter(hasCopy).map((r) => ({
    start: r.start,
    endOffset: r.meta.endOffset,
    size: r.meta.size,
    checksum: r.meta.checksum,
  }));
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
 * segment — records the eviction a crash may have left unrecorded; a trusted marker the journal
 * has no record of (a journal cut short) is checked against the bucket and adopted.
 */
export async function reconcileMarkers(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  local: readonly SegmentFiles[],
): Promise<MarkerOutcome> {
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
  const present = new Set(local.map((s) => s.start));
  const unknown = new Set<bigint>();
  for (const m of markers) {
    const rec = getSegment(ledger.state, m.marker.generation, m.start);
    if (!rec && m.marker.generation === ledger.state.generation) unknown.add(m.start);
    if (rec?.state === "COPY_SEGMENT_FINISHED" && !rec.evicted && !present.has(m.start)) {
      await ledger.record({
        type: "evicted",
        segment: m.start,
        generation: m.marker.generation,
        at: ctx.clock.now(),
      });
      evictionsRecorded++;
    }
  }
  let adopted = 0;
  if (unknown.size > 0) {
    const result = await adoptFromBucket(ctx, ledger, local, unknown);
    adopted = result.adopted;
    ctx.log.warn("markers the journal does not list: their copies adopted from the bucket", {
      markers: unknown.size,
      adopted,
    });
    const missing = unknown.size - adopted;
    if (missing > 0) {
      ctx.observer.remoteObjectsMissing?.(missing);
      ctx.log.error("markers name copies the bucket does not hold (or cannot prove)", {
        markers: [...unknown].map(String),
        problems: result.problems,
      });
    }
  }
  return { quarantined, evictionsRecorded, adopted };
}
