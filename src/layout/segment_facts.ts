// The facts of one sealed segment — offsets, sizes, timestamps and the `.log` checksum — in the
// one shape every room uses: what a verified copy journals, what the `.log` object's metadata
// and the `.remote` marker carry, and what the read path plans with.
import type { SegmentBounds } from "../format/types.ts";
import type { Marker } from "../state/marker.ts";

/** What tierd knows about a sealed segment once it has been read (and, later, copied). */
export interface SegmentFacts {
  /** Offset of the last message (inclusive). */
  readonly endOffset: bigint;
  /** `.log` bytes. */
  readonly size: number;
  /** `.index` bytes. */
  readonly indexSize: number;
  /** µs. */
  readonly startTimestamp: bigint;
  readonly endTimestamp: bigint;
  readonly maxTimestamp: bigint;
  /** XXH3-128 of the whole `.log`. */
  readonly checksum: bigint;
}

/** The facts of a segment from its bounds (read from its files) and its `.log` checksum. */
export function factsFromBounds(bounds: SegmentBounds, checksum: bigint): SegmentFacts {
  return {
    endOffset: bounds.endOffset,
    size: bounds.size,
    indexSize: bounds.indexSize,
    startTimestamp: bounds.startTimestamp,
    endTimestamp: bounds.endTimestamp,
    maxTimestamp: bounds.maxTimestamp,
    checksum,
  };
}

/** True when two sets of facts describe the same bytes (offsets, sizes and checksum). */
export function sameFacts(a: SegmentFacts, b: SegmentFacts): boolean {
  return a.endOffset === b.endOffset && a.size === b.size && a.indexSize === b.indexSize &&
    a.checksum === b.checksum;
}

/** The `.remote` marker of segment `start` of a partition incarnation and generation. */
export function markerOf(
  start: bigint,
  facts: SegmentFacts,
  owner: { incarnation: bigint; generation: bigint },
): Marker {
  return {
    flags: 0,
    startOffset: start,
    endOffset: facts.endOffset,
    size: BigInt(facts.size),
    indexSize: BigInt(facts.indexSize),
    startTimestamp: facts.startTimestamp,
    endTimestamp: facts.endTimestamp,
    maxTimestamp: facts.maxTimestamp,
    incarnation: owner.incarnation,
    generation: owner.generation,
    logChecksum: facts.checksum,
  };
}

/** The facts a marker carries. */
export function factsOfMarker(m: Marker): SegmentFacts {
  return {
    endOffset: m.endOffset,
    size: Number(m.size),
    indexSize: Number(m.indexSize),
    startTimestamp: m.startTimestamp,
    endTimestamp: m.endTimestamp,
    maxTimestamp: m.maxTimestamp,
    checksum: m.logChecksum,
  };
}
