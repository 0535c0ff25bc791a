// Adaptive readahead: per reader, a sequential read widens the window — one chunk,
// then doubling up to `readahead_max` — and any other read closes it. Pure steps plus a bounded
// table of readers.
import { LRUCache } from "lru-cache";

/** What the cache remembers of one reader between its reads. */
export interface ReaderState {
  /** The object it read last. */
  key: string;
  /** Where its last read ended. */
  end: number;
  /** The chunk holding its last read's last byte. */
  lastChunk: number;
  /** Chunks prefetched ahead after its last read (0: no readahead). */
  window: number;
  /** The object that follows, when its last read reached the end of its object. */
  next?: string;
}

/** One read, as readahead sees it. */
export interface ReadStep {
  key: string;
  start: number;
  end: number;
  /** Chunk holding `start`. */
  firstChunk: number;
  /** Chunk holding `end - 1`. */
  lastChunk: number;
  /** Chunks in the object. */
  chunks: number;
  /** The read reaches the object's last byte. */
  atEnd?: boolean;
  /** The object a sequential reader goes on to after this one. */
  nextKey?: string;
}

/**
 * True when `read` continues `prev`: same object, and it starts where the last read ended, or
 * moves forward from within the last read's final chunk up to the chunk after it (a reader
 * that asks for whole records re-reads the tail of its previous range: still sequential); or
 * the last read reached the end of its object and this one starts the object that follows.
 */
export function isSequential(prev: ReaderState | undefined, read: ReadStep): boolean {
  if (!prev) return false;
  if (prev.next !== undefined && prev.next === read.key && read.firstChunk === 0) return true;
  if (prev.key !== read.key) return false;
  if (read.start === prev.end) return true;
  return read.end > prev.end && read.firstChunk >= prev.lastChunk &&
    read.firstChunk <= prev.lastChunk + 1;
}

/**
 * The next readahead state and the chunks to prefetch after `read`: a sequential read opens the
 * window at one chunk or doubles it (capped at `max`); any other read closes it. The chunks to
 * prefetch are the `window` chunks after the read's last chunk that exist; what the window
 * holds beyond the object's end is `spill`, the first chunks of the object that follows (when
 * the read names one).
 *
 * @param prev the reader's state before this read
 * @param read this read
 * @param max `readahead_max` (0 turns readahead off)
 * @returns the new state, `[from, to)` chunk indices to prefetch (empty when from >= to), and
 *   how many chunks of the next object to prefetch
 */
export function readaheadStep(
  prev: ReaderState | undefined,
  read: ReadStep,
  max: number,
): { state: ReaderState; from: number; to: number; spill: number } {
  const window = max > 0 && isSequential(prev, read)
    ? Math.min(max, Math.max(1, (prev?.window ?? 0) * 2))
    : 0;
  const from = read.lastChunk + 1;
  const to = Math.max(from, Math.min(read.chunks, from + window));
  const spill = read.nextKey === undefined ? 0 : window - (to - from);
  return {
    state: {
      key: read.key,
      end: read.end,
      lastChunk: read.lastChunk,
      window,
      ...(read.atEnd && read.nextKey !== undefined && { next: read.nextKey }),
    },
    from,
    to,
    spill,
  };
}

/** The readahead state of recent readers, by `readerId`. */
export class ReaderTable {
  readonly #readers: LRUCache<string, ReaderState>;
  readonly #max: number;

  /**
   * @param max `readahead_max`, in chunks
   * @param maxReaders readers remembered (least recent forgotten first)
   */
  constructor(max: number, maxReaders = 10_000) {
    this.#max = max;
    this.#readers = new LRUCache<string, ReaderState>({ max: maxReaders });
  }

  /**
   * Records a read of `readerId` and returns the chunks to prefetch after it.
   *
   * @returns `[from, to)` chunk indices of the read's object, and how many chunks of the
   *   object after it to prefetch
   */
  step(readerId: string, read: ReadStep): { from: number; to: number; spill: number } {
    const { state, from, to, spill } = readaheadStep(
      this.#readers.get(readerId),
      read,
      this.#max,
    );
    this.#readers.set(readerId, state);
    return { from, to, spill };
  }
}
