// Checks that a partition's segments form a contiguous chain of offsets. A gap is reported,
// never hidden: Iggy 0.9 refuses a partition with a hole in the middle.

/** A hole between two consecutive segments. */
export interface ChainGap {
  /** Start offset of the segment before the hole. */
  before: bigint;
  /** Start offset of the segment after the hole. */
  after: bigint;
  /** First missing offset. */
  missingFrom: bigint;
  /** Last missing offset (negative length means the segments overlap). */
  missingTo: bigint;
}

/** Returns every gap or overlap between consecutive segments, given their inclusive bounds. */
export function findChainGaps(segments: { start: bigint; endOffset: bigint }[]): ChainGap[] {
  const gaps: ChainGap[] = [];
  for (let i = 1; i < segments.length; i++) {
    const prev = segments[i - 1];
    const next = segments[i];
    if (next.start !== prev.endOffset + 1n) {
      gaps.push({
        before: prev.start,
        after: next.start,
        missingFrom: prev.endOffset + 1n,
        missingTo: next.start - 1n,
      });
    }
  }
  return gaps;
}
