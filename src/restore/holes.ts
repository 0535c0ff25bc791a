// Where a partition's chosen incarnation and generation does not hold what it should: a segment
// its manifest lists whose objects are gone, an object that cannot be used (its metadata lies,
// its bytes are another segment's), or offsets between two good copies that no object, recorded
// loss or recorded hole covers. Pure, so property tests can hammer it. Offsets before the first
// segment are not a hole: total retention deleted them, or they were never tiered.
import type { ManifestRange } from "../layout/manifest.ts";
import type { HoleEvent, LostBeforeUploadEvent } from "../state/events.ts";

/** A range of offsets the bucket was found not to hold, inclusive, and why. */
export interface Hole {
  from: bigint;
  /** Inclusive; undefined when nothing says where the missing segment ended. */
  to?: bigint;
  reason: string;
}

/** A usable copy: the offsets it covers. */
export interface GoodCopy {
  start: bigint;
  end: bigint;
}

/** An object that could not be used, at a segment start (and its end, when still known). */
export interface BadCopy {
  start: bigint;
  end?: bigint;
  reason: string;
}

/** What the holes are found from. */
export interface HoleInput {
  good: readonly GoodCopy[];
  bad: readonly BadCopy[];
  /** The generation's manifest, if it has a readable one. */
  manifest?: {
    segments: readonly { start: bigint; endOffset: bigint }[];
    lost?: readonly ManifestRange[];
    holes?: readonly ManifestRange[];
  };
}

/** The holes, and the ranges the manifest records as lost before upload (not holes). */
export interface HoleReport {
  holes: Hole[];
  lost: ManifestRange[];
}

interface Span {
  from: bigint;
  to?: bigint;
  kind: "good" | "hole" | "lost";
}

/**
 * Finds the holes of a generation from its usable copies, its unusable objects and its manifest.
 * @returns holes in offset order (each start once), and the manifest's lost ranges
 */
export function findHoles(input: HoleInput): HoleReport {
  const good = new Map(input.good.map((g) => [g.start, g]));
  const spans = new Map<bigint, Span>();
  const holes = new Map<bigint, Hole>();
  for (const g of input.good) spans.set(g.start, { from: g.start, to: g.end, kind: "good" });
  const lost = [...input.manifest?.lost ?? []];
  for (const l of lost) {
    if (!spans.has(l.from)) spans.set(l.from, { from: l.from, to: l.to, kind: "lost" });
  }
  const hole = (from: bigint, to: bigint | undefined, reason: string) => {
    if (good.has(from)) return;
    const known = holes.get(from);
    if (known) {
      // Already a hole (an unusable object): a later source may still know where it ends.
      if (known.to === undefined && to !== undefined) {
        known.to = to;
        spans.set(from, { from, to, kind: "hole" });
      }
      return;
    }
    holes.set(from, { from, ...(to !== undefined && { to }), reason });
    spans.set(from, { from, to, kind: "hole" });
  };
  for (const b of input.bad) hole(b.start, b.end, b.reason);
  for (const s of input.manifest?.segments ?? []) {
    hole(s.start, s.endOffset, "its objects are missing from the bucket (the manifest lists it)");
  }
  for (const h of input.manifest?.holes ?? []) {
    hole(h.from, h.to, "recorded as a hole by the owner before (the manifest says so)");
  }
  // Offsets between two spans that nothing covers: a segment the bucket lost with its manifest
  // entry, or one copied after the manifest was written.
  const ordered = [...spans.values()].sort((a, b) => (a.from < b.from ? -1 : 1));
  for (let i = 0; i + 1 < ordered.length; i++) {
    const cur = ordered[i];
    const next = ordered[i + 1];
    if (cur.to === undefined) {
      // A hole of unknown length ends where the next span starts.
      if (cur.kind === "hole") holes.get(cur.from)!.to = next.from - 1n;
      continue;
    }
    if (cur.to + 1n < next.from) {
      hole(
        cur.to + 1n,
        next.from - 1n,
        `no object in the bucket covers offsets ${cur.to + 1n}..${next.from - 1n}`,
      );
    }
  }
  return {
    holes: [...holes.values()].sort((a, b) => (a.from < b.from ? -1 : 1)),
    lost,
  };
}

/** A hole in words: `offsets 776..1551: …`. */
export function describeHole(h: Hole): string {
  return `offsets ${h.from}..${h.to ?? "?"}: ${h.reason}`;
}

/** An object a listing and its HEAD found unusable (see `InventoryProblem`). */
export interface ObjectProblem {
  key: string;
  reason: string;
  /** The segment it is of, when the key names one. */
  start?: bigint;
  endOffset?: bigint;
  /** Half of the segment's pair of objects is missing. */
  incomplete?: boolean;
}

/**
 * Sorts a generation's unusable objects: those a copy still under way (or cut off) left at the
 * end of the chain — half a pair (a `.log` without its `.index`, or the reverse) after the last
 * good copy that the manifest does not list — are `unfinished`, not holes: the copy phase uploads
 * a partition's segments in order, so only the newest can be unfinished, and a segment the owner
 * never verified is not missing from the bucket (the broker copies it again). The others are
 * `damaged`, each a bad copy (a hole) where its segment is known.
 */
export function sortProblems<P extends ObjectProblem>(
  problems: readonly P[],
  good: readonly GoodCopy[],
  manifest?: HoleInput["manifest"],
): { bad: BadCopy[]; damaged: P[]; unfinished: P[] } {
  const lastGood = good.reduce<bigint>((m, g) => (g.start > m ? g.start : m), -1n);
  const listed = new Set((manifest?.segments ?? []).map((s) => s.start));
  const unfinished = problems.filter((p) =>
    p.incomplete === true && p.start !== undefined && p.start > lastGood && !listed.has(p.start)
  );
  const damaged = problems.filter((p) => !unfinished.includes(p));
  const bad = damaged.flatMap((p) =>
    p.start === undefined
      ? []
      : [{ start: p.start, end: p.endOffset, reason: `${p.key}: ${p.reason}` }]
  );
  return { bad, damaged, unfinished };
}

/** The journal event of a hole found in generation `generation`. */
export function holeEvent(h: Hole, generation: bigint, at: number): HoleEvent {
  return {
    type: "hole",
    segment: h.from,
    generation,
    ...(h.to !== undefined && { endOffset: h.to }),
    reason: h.reason,
    at,
  };
}

/** The journal event recording a range as lost (a manifest's, or a hole accepted as lost). */
export function lostEvent(
  r: { from: bigint; to?: bigint },
  generation: bigint,
  at: number,
): LostBeforeUploadEvent {
  return {
    type: "lost_before_upload",
    segment: r.from,
    generation,
    ...(r.to !== undefined && { endOffset: r.to }),
    at,
  };
}
