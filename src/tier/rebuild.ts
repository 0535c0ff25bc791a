// The bucket rebuilds what the host lost. With no journal (a new or wiped state dir, or a
// damaged journal set aside), the partition's incarnation is chosen by evidence among the
// bucket's candidates — never by date — and a fresh journal records what the bucket proves,
// markers and kept index copies included, and the holes it has. With a journal that is only behind (truncated, or markers it does not list), the
// copies it lacks are adopted from the bucket instead of being called lost.
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import { partitionRoot, segmentKeys } from "../layout/object_keys.ts";
import { fromUserMetadata } from "../layout/object_metadata.ts";
import type { DiscoveredPartition } from "../partition/discover.ts";
import type { SegmentFiles } from "../partition/segments.ts";
import type { JournalEvent } from "../state/events.ts";
import { getSegment, hasCopy, segmentsOf } from "../state/segment_state.ts";
import { hashFile } from "./file_hash.ts";
import {
  type IncarnationVerdict,
  judgeIncarnation,
  type KnownSegment,
  type LocalPrefixHash,
} from "./incarnation_evidence.ts";
import type { KeySpace, PartitionLedger } from "./partition_ledger.ts";
import { type PhaseContext, withSegmentDeadline } from "./phase.ts";
import { floorBeforeFirstCopy } from "./policy.ts";
import {
  headSegments,
  type InventoryProblem,
  listRemoteGenerations,
  type RemoteSegment,
} from "./remote_inventory.ts";
import {
  type Candidate,
  CandidatesCompete,
  describeCandidate,
  findCandidates,
} from "./remote_candidates.ts";
import { describeHole, findHoles, type Hole, sortProblems } from "../restore/holes.ts";
import {
  bucketEvents,
  type BucketFindings,
  recordedStarts,
  writeEvictedEvidence,
} from "./bucket_records.ts";

/** Index copies fetched at once while rebuilding. */
const FETCH_CONCURRENCY = 8;

/** What a rebuild from the bucket found and recorded. */
export interface Rebuilt {
  incarnation: bigint;
  generation: bigint;
  /** Segments recorded as verified copies. */
  segments: number;
  /** Of those, the ones with no local files (recorded evicted, marker written). */
  evicted: number;
  /** Offsets the bucket should hold and does not (recorded as holes). */
  holes: Hole[];
  problems: InventoryProblem[];
  verdict: IncarnationVerdict;
}

/** Hashes the first `size` bytes of a local segment, for the incarnation evidence. */
export function localPrefixHash(local: readonly SegmentFiles[]): LocalPrefixHash {
  const byStart = new Map(local.map((s) => [s.start, s]));
  return async (start, size) => {
    const seg = byStart.get(start);
    if (!seg || seg.logSize < size) return undefined;
    try {
      return await hashFile(seg.logPath, size);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
  };
}

/**
 * Finds, among the partition's candidates in the bucket (../tier/remote_candidates.ts: retired
 * generations and other agents' are not candidates), the one the local segments continue, and
 * rebuilds the (empty) journal from it: incarnation with the directory's device and inode,
 * generation, a verified copy per usable object, evictions for those with no local files (with
 * their markers and kept index copies), the holes the bucket has and the ranges its manifest
 * records lost. A candidate the local bytes contradict is rejected; the one they continue is
 * chosen, or — with no local bytes to compare — the only one there is.
 * @returns what was rebuilt, or undefined when the bucket holds no matching incarnation
 *   (`rejected` says why each candidate was not taken)
 * @throws {CandidatesCompete} when several candidates fit and nothing decides between them
 */
export async function rebuildFromBucket(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  part: DiscoveredPartition,
  local: readonly SegmentFiles[],
  keySpace: KeySpace,
): Promise<{ rebuilt?: Rebuilt; rejected: string[] }> {
  const set = await withSegmentDeadline(
    ctx,
    "housekeeping",
    (store) =>
      findCandidates(store, keySpace, ledger.id, {
        lineage: ctx.owner?.lineage(),
        listing: {
          clock: ctx.clock,
          describe: ctx.storeDescription,
          onPage: (p) => {
            ctx.rebuildProgress?.(p);
            if (p.pages % 50 === 0) {
              ctx.log.info("listing the bucket to rebuild the partition's state", { ...p });
            }
          },
        },
      }),
  );
  const rejected = set.excluded.map((e) => `${describeCandidate(e.candidate)}: ${e.reason}`);
  const hash = localPrefixHash(local);
  const localStarts = local.map((s) => s.start);
  const fitting: { candidate: Candidate; inventory: Inventory; verdict: IncarnationVerdict }[] = [];
  for (const candidate of set.eligible) {
    const inventory = await withSegmentDeadline(
      ctx,
      "housekeeping",
      (store) => headSegments(store, candidate.objects),
    );
    const verdict = await judgeIncarnation(
      localStarts,
      inventory.segments.map(knownSegment),
      hash,
      "bucket",
    );
    if (verdict.verdict === "different") {
      rejected.push(`${describeCandidate(candidate)}: ${verdict.reason}`);
      continue;
    }
    fitting.push({ candidate, inventory, verdict });
  }
  const same = fitting.filter((f) => f.verdict.verdict === "same");
  const pool = same.length > 0 ? same : fitting;
  if (pool.length === 0) return { rejected };
  if (pool.length > 1) throw new CandidatesCompete(ledger.label, pool.map((f) => f.candidate));
  const { candidate, inventory, verdict } = pool[0];
  const rebuilt = await recordRebuilt(ctx, ledger, part, candidate, inventory, local);
  return { rebuilt: { ...rebuilt, problems: inventory.problems, verdict }, rejected };
}

/** What HEADs found of a candidate's objects. */
type Inventory = { segments: RemoteSegment[]; problems: InventoryProblem[] };

async function recordRebuilt(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  part: DiscoveredPartition,
  candidate: Candidate,
  inventory: Inventory,
  local: readonly SegmentFiles[],
): Promise<Omit<Rebuilt, "problems" | "verdict">> {
  const at = ctx.clock.now();
  const events: JournalEvent[] = [{
    type: "incarnation",
    incarnation: candidate.incarnation,
    device: part.device,
    inode: part.inode,
    at,
  }];
  if (candidate.generation > 0n) {
    events.push({ type: "generation", generation: candidate.generation, at });
  }
  await ledger.record(...events);
  const good = inventory.segments.map((s) => ({ start: s.start, end: s.facts.endOffset }));
  const sorted = sortProblems(inventory.problems, good, candidate.manifest);
  for (const u of sorted.unfinished) {
    ctx.log.warn("an unfinished copy at the end of the partition: not a hole", {
      key: u.key,
      reason: u.reason,
    });
  }
  const report = findHoles({ good, bad: sorted.bad, manifest: candidate.manifest });
  const found = { segments: inventory.segments, holes: report.holes, lost: report.lost };
  const evicted = await recordFindings(ctx, ledger, found, local);
  await recordRetentionBase(ctx, ledger, recordedStarts(found));
  return {
    incarnation: candidate.incarnation,
    generation: candidate.generation,
    segments: inventory.segments.length,
    evicted,
    holes: report.holes,
  };
}

/**
 * The floor of the rebuilt journal starts right before the bucket's first copy, hole or
 * recorded loss (`floorBeforeFirstCopy`), so it can advance over the copies (it never crosses a
 * hole, nor offsets no record covers) and nothing below it is reported lost.
 */
async function recordRetentionBase(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  starts: readonly bigint[],
): Promise<void> {
  if (ledger.state.floor >= 0n) return;
  const base = floorBeforeFirstCopy(starts, ledger.state.floor);
  if (base === ledger.state.floor) return;
  await ledger.record({
    type: "floor",
    generation: ledger.state.generation,
    tieredUpTo: base,
    at: ctx.clock.now(),
  });
}

/**
 * Records what the bucket proves (bucket_records.ts): each segment not yet recorded as a
 * verified copy, evicted when no local `.log` has its start, with its marker and kept index
 * copy; the manifest's losses; the holes, each said loudly.
 * @returns how many were recorded evicted
 */
async function recordFindings(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  found: BucketFindings,
  local: readonly SegmentFiles[],
): Promise<number> {
  const localStarts = new Set(local.map((s) => s.start));
  const generation = ledger.state.generation;
  const { events, holes } = bucketEvents(ledger.state, generation, found, {
    at: ctx.clock.now(),
    kept: (start) => localStarts.has(start),
  });
  if (events.length > 0) await ledger.record(...events);
  for (const h of holes) {
    ctx.log.error(
      localStarts.has(h.from)
        ? "the bucket lacks a copy the broker still has; it is copied again"
        : "the bucket lacks a copy of offsets the broker no longer has: a hole, read as a gap",
      { hole: describeHole(h) },
    );
  }
  await withSegmentDeadline(
    ctx,
    "housekeeping",
    (store) => writeEvictedEvidence(ledger, store, generation, found.segments, FETCH_CONCURRENCY),
  );
  return events.filter((e) => e.type === "evicted").length;
}

/**
 * Adopts the copies of the current generation that the bucket holds and the journal does not
 * know (a journal cut short, markers it does not list): HEAD each `.log`, record it verified,
 * evicted when its local files are gone. Only starts in `only` when given.
 * @returns how many were adopted, and the objects that could not be used
 */
export async function adoptFromBucket(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  local: readonly SegmentFiles[],
  only?: ReadonlySet<bigint>,
): Promise<{ adopted: number; problems: InventoryProblem[] }> {
  const loc = ledger.location();
  const root = partitionRoot(loc);
  const gens = await withSegmentDeadline(
    ctx,
    "housekeeping",
    (store) => listRemoteGenerations(store, root),
  );
  const gen = gens.find((g) =>
    g.incarnation === loc.incarnation && g.generation === loc.generation
  );
  if (!gen) return { adopted: 0, problems: [] };
  const state = ledger.state;
  const wanted = new Map<bigint, string>();
  for (const [start, key] of gen.logs) {
    if (only && !only.has(start)) continue;
    if (getSegment(state, state.generation, start)) continue;
    wanted.set(start, key);
  }
  if (wanted.size === 0) return { adopted: 0, problems: [] };
  const inventory = await withSegmentDeadline(
    ctx,
    "housekeeping",
    (store) =>
      headSegments(store, {
        ...gen,
        logs: wanted,
        indexes: new Map([...gen.indexes].filter(([start]) => wanted.has(start))),
      }),
  );
  // Only a prefix-consistent chain may be adopted: a segment whose range overlaps a record
  // the journal has is not ours to invent.
  const known = segmentsOf(state).filter(hasCopy);
  const fits = inventory.segments.filter((s) =>
    !known.some((r) => s.start <= r.meta.endOffset && r.start <= s.facts.endOffset)
  );
  await recordFindings(ctx, ledger, { segments: fits, holes: [], lost: [] }, local);
  return { adopted: fits.length, problems: inventory.problems };
}

/**
 * The facts the bucket holds for one segment of the current generation, or undefined when the
 * object is not there.
 */
export async function headCopy(
  store: ObjectStore,
  ledger: PartitionLedger,
  start: bigint,
): Promise<KnownSegment | undefined> {
  const keys = segmentKeys(ledger.location(), start);
  try {
    const head = await store.head(keys.log);
    const facts = fromUserMetadata(keys.log, head.metadata);
    return { start, endOffset: facts.endOffset, size: facts.size, checksum: facts.checksum };
  } catch (err) {
    if (err instanceof StoreError && err.kind === "NotFound") return undefined;
    throw err;
  }
}

/** What a remote copy says of its segment, for the incarnation evidence. */
export function knownSegment(s: RemoteSegment): KnownSegment {
  return {
    start: s.start,
    endOffset: s.facts.endOffset,
    size: s.facts.size,
    checksum: s.facts.checksum,
  };
}
