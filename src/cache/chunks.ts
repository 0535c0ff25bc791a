// Chunk geometry of the cache: where each chunk of a remote object starts and ends,
// which chunks cover a byte range, and the exact-range first fetch of a cold read. Pure functions,
// hammered by property tests (test/cache/chunks_test.ts).

/**
 * The chunk boundaries of an object: `bounds[k]` is where chunk `k` starts and `bounds[k + 1]`
 * where it ends, so chunks are `[bounds[k], bounds[k + 1])`, tiling `[0, size)` with no overlap.
 *
 * Chunk `k` starts at the record start nearest `k × chunkSize` (ties go to the lower one), so a
 * record never costs two GETs. The search looks at most half a chunk either way: where no record
 * starts that close — a record larger than a chunk, or a sparse index with wide gaps — the
 * boundary falls at `k × chunkSize` itself, inside that record. This bounds every chunk to at
 * most `2 × chunkSize` bytes (the config rule "cache size ≥ 2 × chunk_size × fetch_concurrency"
 * then guarantees that the in-flight fetches always fit the budget), while a record no larger
 * than a chunk still never spans two chunks.
 *
 * @param recordStarts record start positions (any order, duplicates and out-of-range values are
 *   ignored; 0 is implied)
 * @param size the object's size in bytes
 * @param chunkSize the nominal chunk size in bytes (> 0)
 * @returns strictly increasing boundaries from 0 to `size` (just `[0]` for an empty object)
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * // Records start at 0, 300, 880 and 1050 of a 1500-byte object; chunks of about 1000 bytes.
 * assert.deepEqual(chunkBounds([0, 300, 880, 1050], 1500, 1000), [0, 1050, 1500]);
 * ```
 */
export function chunkBounds(
  recordStarts: readonly number[],
  size: number,
  chunkSize: number,
): number[] {
  if (!(chunkSize > 0)) throw new RangeError(`chunk size must be positive, got ${chunkSize}`);
  if (!(size > 0)) return [0];
  // Candidates: every record start inside the object, and the object's end.
  const starts = candidates(recordStarts, size);
  const half = chunkSize / 2;
  const bounds = [0];
  let i = 0; // first candidate not below the previous target's window
  for (let target = chunkSize; target < size; target += chunkSize) {
    while (i < starts.length && starts[i] < target - half) i++;
    // starts[i] is the first candidate >= target - half; the nearest to target is it or one of
    // the next few (candidates are sorted, so scan while they get closer).
    let best = -1;
    for (let j = i; j < starts.length && starts[j] <= target + half; j++) {
      if (best < 0 || Math.abs(starts[j] - target) < Math.abs(best - target)) best = starts[j];
      else break;
    }
    const boundary = best < 0 ? target : best;
    if (boundary > bounds[bounds.length - 1] && boundary < size) bounds.push(boundary);
  }
  bounds.push(size);
  return bounds;
}

/**
 * The distinct integer starts strictly inside `(0, size)`, ascending, then `size`. An index's
 * starts already rise, so they are taken as they are: no set, no sort.
 */
function candidates(recordStarts: readonly number[], size: number): number[] {
  let rising = true;
  for (let i = 0; i < recordStarts.length && rising; i++) {
    rising = Number.isInteger(recordStarts[i]) &&
      (i === 0 || recordStarts[i] > recordStarts[i - 1]);
  }
  const starts = rising ? recordStarts.filter((s) => s > 0 && s < size) : [...new Set(recordStarts)]
    .filter((s) => Number.isInteger(s) && s > 0 && s < size)
    .sort((a, b) => a - b);
  starts.push(size);
  return starts;
}

/** A half-open run of chunk indices `[first, end)`. */
export interface ChunkSpan {
  first: number;
  end: number;
}

/**
 * The chunks that bytes `[start, start + length)` touch, clamped to the object: the first holds
 * `start`, the last holds the range's last byte. Empty (`first === end`) for an empty range.
 *
 * @param bounds boundaries from {@linkcode chunkBounds}
 * @param start first byte wanted
 * @param length bytes wanted
 * @returns the minimal run of chunks covering the range
 */
export function chunksCovering(
  bounds: readonly number[],
  start: number,
  length: number,
): ChunkSpan {
  const size = bounds[bounds.length - 1];
  const from = Math.max(0, start);
  const to = Math.min(size, start + length);
  const chunks = bounds.length - 1;
  if (!(to > from)) {
    const at = Math.min(chunkIndexOf(bounds, Math.min(from, size)), chunks);
    return { first: at, end: at };
  }
  return { first: chunkIndexOf(bounds, from), end: chunkIndexOf(bounds, to - 1) + 1 };
}

/**
 * The index of the chunk holding byte `pos` (the number of chunks when `pos >= size`).
 *
 * @param bounds boundaries from {@linkcode chunkBounds}
 * @param pos a byte position
 * @returns the largest `k` with `bounds[k] <= pos`, capped at the chunk count
 */
export function chunkIndexOf(bounds: readonly number[], pos: number): number {
  const chunks = bounds.length - 1;
  if (pos >= bounds[chunks]) return chunks;
  let lo = 0;
  let hi = chunks - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (bounds[mid] <= pos) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Limits of the exact-range first fetch of a cold read. */
export interface FirstFetchLimits {
  /** The range is widened to at least this many bytes (within the chunk). @default 64 KiB */
  min: number;
  /** A read wanting more than this from the chunk waits for the chunk instead. @default 2 MiB */
  max: number;
}

/** The default first-fetch limits: widen to 64 KiB, none for reads over 2 MiB. */
export const FIRST_FETCH_LIMITS: Readonly<FirstFetchLimits> = {
  min: 64 * 1024,
  // A read of the API's default max_bytes (1 MiB) wants a little more: the header after it.
  max: 2 * 1024 * 1024,
};

/**
 * The range a cold read fetches first, to answer fast while its chunk hydrates in the background:
 * the wanted bytes, widened to `limits.min` inside the chunk (forward first, so a
 * sequential reader's next read may fall inside it). No first fetch when the read wants more
 * than `limits.max` from the chunk, or when the widened range would be at least half the chunk —
 * then fetching the chunk itself costs about the same and saves a GET.
 *
 * @param part the bytes wanted from this chunk, `[start, end)`, inside `chunk`
 * @param chunk the chunk, `[start, end)`
 * @param limits the first-fetch limits
 * @returns the range to fetch first, or undefined for none
 */
export function firstFetchRange(
  part: { start: number; end: number },
  chunk: { start: number; end: number },
  limits: FirstFetchLimits = FIRST_FETCH_LIMITS,
): { start: number; end: number } | undefined {
  const wanted = part.end - part.start;
  if (wanted <= 0 || wanted > limits.max) return undefined;
  const end = Math.min(chunk.end, Math.max(part.end, part.start + limits.min));
  const start = Math.max(chunk.start, Math.min(part.start, end - limits.min));
  if (2 * (end - start) >= chunk.end - chunk.start) return undefined;
  return { start, end };
}
