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

/** Why local retention wants a segment gone, as {@linkcode explainEvictions} found it. */
export interface EvictionReason {
  /** Age of the segment's newest message at the decision, ms. */
  ageMs: number;
  /** The partition's local bytes before this segment goes. */
  localBytes: number;
  /** `local_retention_age` is exceeded. */
  byAge: boolean;
  /** `local_retention_size` is exceeded. */
  bySize: boolean;
}

/** A segment eviction chose, and why. */
export interface EvictionChoice<T extends EvictionCandidate = EvictionCandidate> {
  segment: T;
  reason: EvictionReason;
}

/**
 * Chooses the segments to evict: a prefix of the local chain (oldest first) of sealed, copied
 * segments ending at or below `floor`, while local retention is exceeded; at most 16.
 */
export function chooseEvictions<T extends EvictionCandidate>(
  local: T[],
  floor: bigint,
  retention: LocalRetention,
  nowMs: number,
): T[] {
  return explainEvictions(local, floor, retention, nowMs).map((c) => c.segment);
}

/**
 * {@linkcode chooseEvictions} with the reason of each choice: the decision itself (the agent's
 * eviction and `tierd plan` both run it).
 */
export function explainEvictions<T extends EvictionCandidate>(
  local: T[],
  floor: bigint,
  retention: LocalRetention,
  nowMs: number,
): EvictionChoice<T>[] {
  if (!Number.isFinite(retention.ageMs) && !Number.isFinite(retention.sizeBytes)) return [];
  let localBytes = local.reduce((n, s) => n + s.size, 0);
  const out: EvictionChoice<T>[] = [];
  for (const seg of local) {
    if (out.length >= MAX_EVICTIONS_PER_PASS) break;
    if (!seg.sealed || !seg.copied || seg.endOffset > floor) break; // prefix only
    const ageMs = nowMs - Number(seg.maxTimestamp / 1000n);
    const tooOld = ageMs >= retention.ageMs;
    const tooBig = localBytes > retention.sizeBytes;
    if (!tooOld && !tooBig) break;
    out.push({ segment: seg, reason: { ageMs, localBytes, byAge: tooOld, bySize: tooBig } });
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

/** Why total retention deletes a copy, as {@linkcode explainRetentionDeletes} found it. */
export interface RetentionReason {
  /** Age of the copy's newest message at the decision, ms. */
  ageMs: number;
  /** The partition's bytes (evicted copies and local segments) before this copy goes. */
  partitionBytes: number;
  /** `message_expiry` is exceeded. */
  expired: boolean;
  /** An evicted copy while the partition holds more than its share of `max_topic_size`. */
  oversize: boolean;
}

/** A copy total retention chose, and why. */
export interface RetentionChoice<T extends RetentionCandidate = RetentionCandidate> {
  segment: T;
  reason: RetentionReason;
}

/**
 * Chooses remote copies to delete, oldest first: expired ones, then oldest evicted ones while
 * the partition holds more than its share. Stops at the first segment the barrier protects
 * (`deletable` false) and after `limit` segments.
 */
export function chooseRetentionDeletes<T extends RetentionCandidate>(
  remote: T[],
  totalBytes: number,
  retention: TotalRetention,
  nowMs: number,
  deletable: (endOffset: bigint) => boolean,
  limit: number,
): T[] {
  return explainRetentionDeletes(remote, totalBytes, retention, nowMs, deletable, limit)
    .map((c) => c.segment);
}

/**
 * {@linkcode chooseRetentionDeletes} with the reason of each choice: the decision itself (the
 * agent's retention and `tierd plan` both run it).
 */
export function explainRetentionDeletes<T extends RetentionCandidate>(
  remote: T[],
  totalBytes: number,
  retention: TotalRetention,
  nowMs: number,
  deletable: (endOffset: bigint) => boolean,
  limit: number,
): RetentionChoice<T>[] {
  if (!Number.isFinite(retention.expiryMs) && !Number.isFinite(retention.maxBytes)) return [];
  const out: RetentionChoice<T>[] = [];
  let bytes = totalBytes;
  for (const seg of remote) {
    if (out.length >= limit || !deletable(seg.endOffset)) break;
    const ageMs = nowMs - Number(seg.maxTimestamp / 1000n);
    const expired = ageMs >= retention.expiryMs;
    const oversize = seg.evicted && bytes > retention.maxBytes;
    if (!expired && !oversize) break; // oldest first: keep the chain a suffix
    out.push({ segment: seg, reason: { ageMs, partitionBytes: bytes, expired, oversize } });
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
