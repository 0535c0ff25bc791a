// A small in-memory LRU of parsed segment indexes, so consecutive reads of a remote segment do
// not GET its `.index` again. Loads are single-flight: concurrent readers share one load, and a
// load a reader stopped waiting for (fetch_timeout) still lands in the cache for the retry.
import { LRUCache } from "lru-cache";
import type { SegmentIndex } from "./segment_index.ts";

/** Options of {@link IndexCache}. */
export interface IndexCacheOptions {
  /** Memory budget for parsed indexes, in bytes. @default 64 MiB */
  maxBytes?: number;
}

/** Parsed indexes by key (an object key plus checksum, or a local path plus size). */
export class IndexCache {
  readonly #lru: LRUCache<string, SegmentIndex>;
  readonly #loading = new Map<string, Promise<SegmentIndex>>();

  constructor(options: IndexCacheOptions = {}) {
    this.#lru = new LRUCache<string, SegmentIndex>({
      maxSize: options.maxBytes ?? 64 * 1024 * 1024,
      sizeCalculation: (index) => Math.max(1, index.bytes),
    });
  }

  /**
   * The index cached under `key`, or the result of `load()` (then cached). A failed load is not
   * cached. Concurrent calls for one key share a single `load()`.
   */
  get(key: string, load: () => Promise<SegmentIndex>): Promise<SegmentIndex> {
    const hit = this.#lru.get(key);
    if (hit) return Promise.resolve(hit);
    let pending = this.#loading.get(key);
    if (!pending) {
      pending = load().then((index) => {
        this.#lru.set(key, index);
        return index;
      }).finally(() => this.#loading.delete(key));
      this.#loading.set(key, pending);
    }
    return pending;
  }

  /** Number of cached indexes. */
  get size(): number {
    return this.#lru.size;
  }
}
