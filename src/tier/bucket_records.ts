// What the bucket proves, written into a partition's journal: one rule for the agent rebuilding
// a lost or damaged journal (tier/rebuild.ts) and for `tierd restore` on a new host. Each
// segment the bucket holds whole becomes a verified copy (evicted unless its local files are
// kept), each range its manifest records lost a loss, each hole a hole — or, on the operator's
// word, a loss — and the evicted copies get their markers and kept index copies.
import { forEachBounded } from "../base/concurrency.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { copyFinishedEvent, type JournalEvent } from "../state/events.ts";
import { getSegment, type PartitionState } from "../state/segment_state.ts";
import { type Hole, holeEvent, lostEvent } from "../restore/holes.ts";
import type { PartitionLedger } from "./partition_ledger.ts";
import type { RemoteSegment } from "./remote_inventory.ts";

/** What was found in the bucket for one generation of a partition. */
export interface BucketFindings {
  /** The segments whose objects are whole and match their metadata. */
  segments: readonly RemoteSegment[];
  /** Ranges no usable copy covers. */
  holes: readonly Hole[];
  /** Ranges the manifest records as lost before upload. */
  lost: readonly { from: bigint; to: bigint }[];
}

/** How the findings are recorded. */
export interface RecordingRule {
  /** When the events happen (ms since the epoch). */
  at: number;
  /** Whether the local files of the segment at `start` stay (else it is recorded evicted). */
  kept(start: bigint): boolean;
  /** Record each hole as a loss the operator accepted (`restore --accept-holes`). */
  holesAsLost?: boolean;
}

/** The events that record `found`, and what was recorded of the holes. */
export interface BucketEvents {
  events: JournalEvent[];
  /** The holes recorded as holes (read as gaps until settled). */
  holes: Hole[];
  /** How many holes were recorded as losses on the operator's word. */
  accepted: number;
}

/**
 * The journal events that record `found` in `generation` of `state`; changes nothing. A segment
 * the journal already records (other than as a hole, which a whole copy settles) keeps its record.
 *
 * @param state the partition's state now
 * @param generation the generation the findings are of
 * @param found what the bucket holds
 * @param rule when, which local files stay, what a hole becomes
 */
export function bucketEvents(
  state: PartitionState,
  generation: bigint,
  found: BucketFindings,
  rule: RecordingRule,
): BucketEvents {
  const { at } = rule;
  const out: BucketEvents = { events: [], holes: [], accepted: 0 };
  const recordOf = (start: bigint) => getSegment(state, generation, start);
  for (const seg of found.segments) {
    const r = recordOf(seg.start);
    if (r !== undefined && r.state !== "HOLE") continue;
    out.events.push(
      { type: "copy_started", segment: seg.start, generation, at },
      copyFinishedEvent(seg.start, generation, seg.facts, at),
    );
    if (!rule.kept(seg.start)) {
      out.events.push({ type: "evicted", segment: seg.start, generation, at });
    }
  }
  for (const l of found.lost) {
    if (recordOf(l.from) === undefined) out.events.push(lostEvent(l, generation, at));
  }
  for (const h of found.holes) {
    const r = recordOf(h.from);
    if (rule.holesAsLost && (r === undefined || r.state === "HOLE")) {
      out.events.push(lostEvent(h, generation, at));
      out.accepted++;
    } else if (r === undefined) {
      out.events.push(holeEvent(h, generation, at));
      out.holes.push(h);
    }
  }
  return out;
}

/**
 * The starts the floor of a journal rebuilt from the bucket counts from: every copy, hole and
 * recorded loss (see `floorBeforeFirstCopy`).
 */
export function recordedStarts(found: BucketFindings): bigint[] {
  return [
    ...found.segments.map((s) => s.start),
    ...found.holes.map((h) => h.from),
    ...found.lost.map((l) => l.from),
  ];
}

/**
 * Writes the marker and kept index copy of each of `segments` the journal records evicted in
 * `generation`: what a read of an evicted segment and the boot scan need.
 *
 * @param concurrency index objects fetched at once
 */
export async function writeEvictedEvidence(
  ledger: PartitionLedger,
  store: ObjectStore,
  generation: bigint,
  segments: readonly RemoteSegment[],
  concurrency: number,
): Promise<void> {
  await forEachBounded(segments, concurrency, async (seg) => {
    const rec = getSegment(ledger.state, generation, seg.start);
    if (!rec?.evicted) return;
    const index = await store.get(seg.keys.index);
    await ledger.writeIndexCopy(seg.start, index.bytes);
    await ledger.writeMarker(rec);
  });
}
