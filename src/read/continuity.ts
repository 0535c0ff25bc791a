// Readahead for every client, with no special header: a read that starts exactly where an
// earlier read of the same partition ended (its `x-tierd-next-offset`) is the same sequential
// reader, so the chunk cache widens its readahead window for it. The `x-tierd-reader` header
// stays an optional hint for clients that interleave several scans.
import { LRUCache } from "lru-cache";

/** Reads remembered at once (across all partitions). */
const REMEMBERED = 4096;

/** Names readers by the continuity of their reads. */
export class ContinuityReaders {
  readonly #byNext = new LRUCache<string, string>({ max: REMEMBERED });
  #seq = 0;

  /** The reader of a read of `partition` starting at `start`: a continued one, or a new one. */
  readerFor(partition: string, start: bigint): string {
    const key = `${partition}@${start}`;
    const id = this.#byNext.get(key);
    if (id === undefined) return `seq-${++this.#seq}`;
    this.#byNext.delete(key);
    return id;
  }

  /** Records that reader `id`'s read of `partition` ended before `next`. */
  ended(partition: string, id: string, next: bigint): void {
    this.#byNext.set(`${partition}@${next}`, id);
  }
}
