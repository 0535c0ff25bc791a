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
}

/**
 * True when `read` continues `prev`: same object, and it starts where the last read ended, or
 * moves forward from within the last read's final chunk up to the chunk after it. (A reader
 * that asks for whole records re-reads the tail of its previous range: still sequential.)
 */
export function isSequential(prev: ReaderState | undefined, read: ReadStep): boolean {
  if (!prev || prev.key !== read.key) return false;
  if (read.start === prev.end) return true;
  return read.end > prev.end && read.firstChunk >= prev.lastChunk &&
    read.firstChunk <= prev.lastChunk + 1;
}

/**
 * The next readahead state and the chunks to prefetch after `read`: a sequential read opens the
 * window at one chunk or doubles it (capped at `max`); any other read closes it. The chunks to
 * prefetch are the `window` chunks after the read's last chunk that exist.
 *
 * @param prev the reader's state before this read
 * @param read this read
 * @param max `readahead_max` (0 turns readahead off)
 * @returns the new state and `[from, to)` chunk indices to prefetch (empty when from >= to)
 */
export function readaheadStep(
  prev: ReaderState | undefined,
  read: ReadStep,
  max: number,
): { state: ReaderState; from: number; to: number } {
  const window = max > 0 && isSequential(prev, read)
    ? Math.min(max, Math.max(1, (prev?.window ?? 0) * 2))
    : 0;
  const from = read.lastChunk + 1;
  const to = Math.min(read.chunks, from + window);
  return {
    state: { key: read.key, end: read.end, lastChunk: read.lastChunk, window },
    from,
    to: Math.max(from, to),
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
   * @returns `[from, to)` chunk indices of the read's object
   */
  step(readerId: string, read: ReadStep): { from: number; to: number } {
    const { state, from, to } = readaheadStep(this.#readers.get(readerId), read, this.#max);
    this.#readers.set(readerId, state);
    return { from, to };
  }
}
