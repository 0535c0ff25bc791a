// A segment's `.index`, validated once and searched many times: where a read starts in the
// `.log` for an offset or a timestamp. 0.8 indexes are dense (every message),
// 0.9 indexes sparse (some batches); both are hints the walker confirms from record headers.
import type { ParseIndexOptions, SegmentCodec } from "../format/codec.ts";
import { INDEX_ENTRY_SIZE_08, scanIndex08 } from "../format/iggy08.ts";
import {
  INDEX_ENTRY_SIZE_09,
  indexEntry09,
  indexPosition09,
  scanIndex09,
} from "../format/iggy09.ts";
import type { IndexEntry } from "../format/types.ts";
import { closeSync, openSync, readSync } from "node:fs";
import { open } from "node:fs/promises";
import { readInto } from "../base/bytes.ts";

/**
 * The largest index file read on the event loop. A 64 MiB segment's 0.9 index is a few tens of
 * KiB; reading one from the page cache takes microseconds.
 */
export const INDEX_READ_NOW_MAX = 1024 * 1024;

/**
 * The first `size` bytes of the index file at `path` (a local `.index`, or the copy eviction
 * kept), or undefined when it is missing, unreadable or shorter. No more than `size` bytes are
 * read, however long the file has grown. Up to `readNowMax` bytes are read on the event loop, as
 * the read path's stats are (`statNowOrUndefined`): a read would otherwise wait its turn in the
 * runtime's file thread pool, behind the chunk writes of other reads' fetches (3 ms for each
 * segment's first read in a cold scan on the 2-core bench machine, where the read itself is a
 * page-cache copy).
 */
export async function readIndexFile(
  path: string,
  size: number,
  readNowMax = INDEX_READ_NOW_MAX,
): Promise<Uint8Array | undefined> {
  const bytes = new Uint8Array(size);
  let got: number;
  try {
    if (size <= readNowMax) {
      const fd = openSync(path, "r");
      try {
        got = 0;
        while (got < size) {
          const n = readSync(fd, bytes, got, size - got, got);
          if (n === 0) break;
          got += n;
        }
      } finally {
        closeSync(fd);
      }
    } else {
      const fh = await open(path, "r");
      try {
        got = await readInto(fh, bytes, 0);
      } finally {
        await fh.close();
      }
    }
  } catch {
    return undefined; // missing or unreadable
  }
  return got === size ? bytes : undefined;
}

/** Where to start walking record headers. */
export interface SeekHint {
  /** A record boundary in the `.log`. */
  position: number;
  /** The first offset of the record at `position`. */
  offset: bigint;
}

/** A parsed, validated segment index. */
export interface SegmentIndex {
  /** Number of entries. */
  readonly count: number;
  /** Approximate memory held, for the cache budget. */
  readonly bytes: number;
  /** Entry `i` (0 ≤ i < count), with the record's START position. */
  entry(i: number): IndexEntry;
  /** Index of the last entry whose offset is at or below `offset`; -1 if none. */
  floorOffset(offset: bigint): number;
  /** Record start positions, ascending, starting with 0 (computed once). */
  recordStarts(): readonly number[];
}

/** A 0.8 dense index kept as its raw bytes: entry `i` is offset `start + i`. */
class DenseIndex implements SegmentIndex {
  readonly count: number;
  readonly #view: DataView;
  readonly #start: bigint;
  #starts?: number[];

  constructor(raw: Uint8Array, startOffset: bigint) {
    this.count = Math.floor(raw.length / INDEX_ENTRY_SIZE_08);
    this.#view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    this.#start = startOffset;
  }

  get bytes(): number {
    return this.#view.byteLength + (this.#starts ? this.#starts.length * 8 : 0);
  }

  entry(i: number): IndexEntry {
    const at = i * INDEX_ENTRY_SIZE_08;
    return {
      offset: this.#start + BigInt(i),
      // Entries store END positions: a message starts where the previous one ended.
      position: i === 0 ? 0 : this.#view.getUint32(at - INDEX_ENTRY_SIZE_08 + 4, true),
      timestamp: this.#view.getBigUint64(at + 8, true),
    };
  }

  floorOffset(offset: bigint): number {
    // Dense: the entry of an offset is found by arithmetic, no search.
    if (offset < this.#start) return -1;
    const rel = offset - this.#start;
    return rel >= BigInt(this.count) ? this.count - 1 : Number(rel);
  }

  recordStarts(): readonly number[] {
    return this.#starts ??= Array.from({ length: this.count }, (_, i) => this.entry(i).position);
  }
}

/**
 * A 0.9 sparse index kept as its raw bytes, validated once: a seek reads the dozen entries its
 * search visits, and the record starts are read straight from the bytes, so a cold read of a
 * segment does not first turn every entry into an object.
 */
class SparseIndex implements SegmentIndex {
  readonly count: number;
  readonly #view: DataView;
  #starts?: number[];

  constructor(raw: Uint8Array) {
    this.count = Math.floor(raw.length / INDEX_ENTRY_SIZE_09);
    this.#view = new DataView(raw.buffer, raw.byteOffset, this.count * INDEX_ENTRY_SIZE_09);
  }

  get bytes(): number {
    return 64 + this.#view.byteLength + (this.#starts ? this.#starts.length * 8 : 0);
  }

  entry(i: number): IndexEntry {
    return indexEntry09(this.#view, i);
  }

  floorOffset(offset: bigint): number {
    return lastWhere(this, (e) => e.offset <= offset);
  }

  recordStarts(): readonly number[] {
    if (this.#starts) return this.#starts;
    const starts = [0];
    for (let i = 0; i < this.count; i++) {
      const position = indexPosition09(this.#view, i);
      if (position > 0) starts.push(position);
    }
    return this.#starts = starts;
  }
}

/**
 * Validates an index for `codec` and reads it in place: the index keeps a view of `raw`, which
 * the caller must not change or reuse afterwards.
 *
 * @throws {FormatError} as `codec.parseIndex` does
 */
export function parseSegmentIndex(
  codec: SegmentCodec,
  raw: Uint8Array,
  ctx: ParseIndexOptions,
): SegmentIndex {
  if (codec.name === "iggy-0.8") {
    scanIndex08(raw, ctx); // validates without allocating per entry
    return new DenseIndex(raw, ctx.startOffset);
  }
  scanIndex09(raw, ctx); // validates without allocating per entry
  return new SparseIndex(raw);
}

/** An index with no entries: walks start at the beginning of the `.log`. */
export const EMPTY_INDEX: SegmentIndex = new SparseIndex(new Uint8Array(0));

/** Largest `i` in [0, count) with `pred(entry(i))` true, for a predicate true on a prefix; -1 if none. */
function lastWhere(index: SegmentIndex, pred: (e: IndexEntry) => boolean): number {
  let lo = 0;
  let hi = index.count; // invariant: pred holds below lo, fails at and above hi
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (pred(index.entry(mid))) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/**
 * Where to start walking to find `offset`: the indexed record with the greatest offset at or
 * below it (a dense index names the record itself), or the segment start.
 */
export function seekOffset(index: SegmentIndex, startOffset: bigint, offset: bigint): SeekHint {
  const i = index.floorOffset(offset);
  if (i < 0) return { position: 0, offset: startOffset };
  const e = index.entry(i);
  return { position: e.position, offset: e.offset };
}

/**
 * Where to start walking to find the first record with a timestamp at or after `timestamp`:
 * the last indexed record before it (timestamps are non-decreasing), or the segment start.
 */
export function seekTimestamp(
  index: SegmentIndex,
  startOffset: bigint,
  timestamp: bigint,
): SeekHint {
  const i = lastWhere(index, (e) => e.timestamp < timestamp);
  if (i < 0) return { position: 0, offset: startOffset };
  const e = index.entry(i);
  return { position: e.position, offset: e.offset };
}
