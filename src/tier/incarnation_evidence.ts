// Is this partition directory the one a journal or the bucket remembers, or a new one that
// reuses its ids? Decided by content, not by inode alone: a copied or restored directory, a
// new device number or a rebuilt state dir keep their incarnation when their segments match
// what is known; a topic deleted and recreated gets a new one.
//
// The evidence, in order:
//  1. Segments both sides have (same start offset): the first bytes of the local `.log`, as
//     many as the known copy holds, must hash (XXH3-128) to the known checksum. Up to three such
//     segments are hashed (the oldest, one in the middle, the newest); one mismatch is a
//     different partition ("different bytes at the same offsets").
//  2. No segment in common: local segments that all start after the last known offset are the
//     continuation (the known ones were evicted or expired); local segments that start inside
//     the known range, at no known boundary, restarted below it — a different partition.
//  3. Nothing to compare (no local segments, or nothing known): unknown; the caller decides.

/** A segment a journal or the bucket knows: where it starts and what its `.log` holds. */
export interface KnownSegment {
  start: bigint;
  endOffset: bigint;
  /** `.log` bytes. */
  size: number;
  /** XXH3-128 of the `.log`. */
  checksum: bigint;
}

/**
 * Hashes the first `size` bytes of the local segment starting at `start`; undefined when there
 * is no such local segment or it is shorter than `size`.
 */
export type LocalPrefixHash = (start: bigint, size: number) => Promise<bigint | undefined>;

/** The judgement, with the evidence in words (for the log line that reports it). */
export interface IncarnationVerdict {
  verdict: "same" | "different" | "unknown";
  reason: string;
}

/** Overlapping segments hashed at most. */
export const MAX_SEGMENTS_COMPARED = 3;

/**
 * Judges whether the local segments (their start offsets, and `hash` for their bytes) belong
 * to the partition that `known` describes.
 * @param what names the other side in the reason (`"journal"`, `"bucket"`)
 */
export async function judgeIncarnation(
  localStarts: readonly bigint[],
  known: readonly KnownSegment[],
  hash: LocalPrefixHash,
  what: string,
): Promise<IncarnationVerdict> {
  if (known.length === 0) return { verdict: "unknown", reason: `the ${what} knows no segment` };
  if (localStarts.length === 0) {
    return { verdict: "unknown", reason: "the partition directory holds no segment" };
  }
  const byStart = new Map(known.map((k) => [k.start, k]));
  const overlap = [...localStarts].filter((s) => byStart.has(s)).sort(compare);
  if (overlap.length > 0) {
    const picks = [...new Set([overlap[0], overlap[overlap.length >> 1], overlap.at(-1)!])]
      .slice(0, MAX_SEGMENTS_COMPARED);
    for (const start of picks) {
      const k = byStart.get(start)!;
      const local = await hash(start, k.size);
      if (local !== k.checksum) {
        return {
          verdict: "different",
          reason: `segment ${start}: the local bytes differ from the ${what}'s copy (xxh3-128)`,
        };
      }
    }
    return {
      verdict: "same",
      reason: `${picks.length} segment(s) both have match byte for byte (${
        picks.join(", ")
      }; xxh3-128)`,
    };
  }
  const firstLocal = [...localStarts].sort(compare)[0];
  const knownStart = known.reduce((m, k) => (k.start < m ? k.start : m), known[0].start);
  const knownEnd = known.reduce((m, k) => (k.endOffset > m ? k.endOffset : m), known[0].endOffset);
  if (firstLocal > knownEnd) {
    return {
      verdict: "same",
      reason: `local segments start at ${firstLocal}, after the ${what}'s last offset ${knownEnd}`,
    };
  }
  return {
    verdict: "different",
    reason: `local segments start at ${firstLocal}, inside the ${what}'s range ` +
      `${knownStart}..${knownEnd} but at none of its segment boundaries (offsets restarted)`,
  };
}

function compare(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
