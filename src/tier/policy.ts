// Pure decisions of the tier worker: how far the floor reaches, which local segments to evict
// and which remote copies total retention deletes. Free of I/O so property tests hammer them.

/** A local segment as eviction sees it. */
export interface EvictionCandidate {
  start: bigint;
  endOffset: bigint;
  /** Bytes of the local `.log`. */
  size: number;
  /** Max message timestamp, µs. */
  maxTimestamp: bigint;
  /** COPY_SEGMENT_FINISHED (verified in the store). */
  copied: boolean;
  sealed: boolean;
}

/** Local retention of a topic: "unlimited" is Infinity. */
export interface LocalRetention {
  /** ms; evict once `now - maxTimestamp >= age`. */
  ageMs: number;
  /** bytes; evict oldest while the partition's local bytes exceed this. */
  sizeBytes: number;
}

/** At most this many segments are evicted per partition per pass. */
export const MAX_EVICTIONS_PER_PASS = 16;

/**
 * Chooses the segments to evict: a prefix of the local chain (oldest first) of sealed, copied
 * segments ending at or below `floor`, while local retention is exceeded; at most 16.
 */
export function chooseEvictions(
  local: EvictionCandidate[],
  floor: bigint,
  retention: LocalRetention,
  nowMs: number,
): EvictionCandidate[] {
  if (!Number.isFinite(retention.ageMs) && !Number.isFinite(retention.sizeBytes)) return [];
  let localBytes = local.reduce((n, s) => n + s.size, 0);
  const out: EvictionCandidate[] = [];
  for (const seg of local) {
    if (out.length >= MAX_EVICTIONS_PER_PASS) break;
    if (!seg.sealed || !seg.copied || seg.endOffset > floor) break; // prefix only
    const ageMs = nowMs - Number(seg.maxTimestamp / 1000n);
    const tooOld = ageMs >= retention.ageMs;
    const tooBig = localBytes > retention.sizeBytes;
    if (!tooOld && !tooBig) break;
    out.push(seg);
    localBytes -= seg.size;
  }
  return out;
}

/** A remote copy as total retention sees it. */
export interface RetentionCandidate {
  start: bigint;
  endOffset: bigint;
  size: number;
  maxTimestamp: bigint;
  /** Local files are gone: deleting the copy frees the partition's last copy of the data. */
  evicted: boolean;
}

/** Total retention of a topic (applied to remote copies). */
export interface TotalRetention {
  /** ms; `message_expiry`. */
  expiryMs: number;
  /** bytes per partition (the topic's `max_topic_size` divided among its partitions). */
  maxBytes: number;
}

/**
 * Chooses remote copies to delete, oldest first: expired ones, then oldest evicted ones while
 * the partition holds more than its share. Stops at the first segment the barrier protects
 * (`deletable` false) and after `limit` segments.
 */
export function chooseRetentionDeletes(
  remote: RetentionCandidate[],
  totalBytes: number,
  retention: TotalRetention,
  nowMs: number,
  deletable: (endOffset: bigint) => boolean,
  limit: number,
): RetentionCandidate[] {
  if (!Number.isFinite(retention.expiryMs) && !Number.isFinite(retention.maxBytes)) return [];
  const out: RetentionCandidate[] = [];
  let bytes = totalBytes;
  for (const seg of remote) {
    if (out.length >= limit || !deletable(seg.endOffset)) break;
    const expired = nowMs - Number(seg.maxTimestamp / 1000n) >= retention.expiryMs;
    const oversize = seg.evicted && bytes > retention.maxBytes;
    if (!expired && !oversize) break; // oldest first: keep the chain a suffix
    out.push(seg);
    if (seg.evicted) bytes -= seg.size;
  }
  return out;
}

// tiered_up_to_offset: the end offset of the longest contiguous prefix of a partition's
// segments that are safely in the store (or recorded as lost before upload).

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
 * Where the floor of state rebuilt from the bucket starts: right before the bucket's first copy
 * (offsets below it left the bucket by total retention, or were never tiered, and a rebuilt
 * journal cannot say which), or `current` when that is higher or there is no copy. From there
 * `computeFloor` can advance over the copies, and nothing below is reported lost.
 */
export function floorBeforeFirstCopy(starts: readonly bigint[], current: bigint): bigint {
  if (starts.length === 0) return current;
  const first = starts.reduce((m, s) => (s < m ? s : m));
  return current >= first - 1n ? current : first - 1n;
}

/**
 * Computes the floor from segment records sorted or not: the end of the longest run of copied
 * or lost segments that starts right after `current` (offset 0 for a floor of -1). Returns
 * `current` when that run does not reach past it: the floor never moves backwards within a
 * generation, and never over offsets no record covers — a hole before the first record is
 * one too (a loss the bucket could not be asked about yet), which only `lost_before_upload`
 * may cross.
 */
export function computeFloor(segments: FloorSegment[], current: bigint): bigint {
  const sorted = [...segments].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  let floor = current;
  let expected = current + 1n;
  for (const s of sorted) {
    // Already under the floor, or inside a range already covered (a cleaned-up dangling copy
    // within a recorded loss): the covering record supersedes it.
    if (s.start < expected) continue;
    if (!(s.copied || s.lost) || s.endOffset === undefined) break;
    if (s.start !== expected) break; // a hole nobody recorded
    if (s.endOffset > floor) floor = s.endOffset;
    expected = s.endOffset + 1n;
  }
  return floor;
}
