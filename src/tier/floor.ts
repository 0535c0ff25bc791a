// tiered_up_to_offset (DESIGN §5): the end offset of the longest contiguous prefix of a
// partition's segments that are safely in the store (or recorded as lost before upload).

/** The facts about one segment the floor needs. */
export interface FloorSegment {
  start: bigint;
  /** Inclusive end offset, when known (copy finished or a recorded loss). */
  endOffset?: bigint;
  /** COPY_SEGMENT_FINISHED or beyond (evicted, deleted by retention). */
  copied: boolean;
  /** Recorded as `lost_before_upload`: a gap the floor may skip. */
  lost: boolean;
}

/**
 * Computes the floor from segment records sorted or not. Returns `current` when the prefix
 * does not reach past it: the floor never moves backwards within a generation.
 */
export function computeFloor(segments: FloorSegment[], current: bigint): bigint {
  const sorted = [...segments].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  let floor = current;
  let expected: bigint | undefined;
  for (const s of sorted) {
    // Inside a range already covered (a cleaned-up dangling copy within a recorded loss): the
    // covering record supersedes it.
    if (expected !== undefined && s.start < expected) continue;
    if (!(s.copied || s.lost) || s.endOffset === undefined) break;
    if (expected !== undefined && s.start !== expected) break; // a hole nobody recorded
    if (s.endOffset > floor) floor = s.endOffset;
    expected = s.endOffset + 1n;
  }
  return floor;
}
