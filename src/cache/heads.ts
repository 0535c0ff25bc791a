// Cold-reader detection (docs/architecture.md, "The chunk cache"): each partition has a head — the
// newest byte any reader has read in it — and a read that starts further behind the head than
// the cache can hold comes from a cold reader (a backfill), whose chunks must not push out the
// working set near the head.
import { LRUCache } from "lru-cache";
import type { ChunkSource, PositionedChunkSource } from "./types.ts";

/**
 * The head scope is the partition. A {@linkcode PositionedChunkSource} names its partition and
 * byte base exactly. Any other source is placed by its key: the partition is the key's directory
 * (`…/{partition}/{incarnation}-{generation}/`) and objects are ordered by the start offset in
 * their file name (`{start:020}.log`); the distance between two objects then counts the sizes of
 * the objects of that directory the cache has seen. Objects it has never seen count as empty, so
 * without positions a backfill can be judged nearer the head than it is — never further.
 */
export class HeadTracker {
  readonly #scopes: LRUCache<string, Scope>;

  /** @param maxScopes partitions remembered (least recently read forgotten first) */
  constructor(maxScopes = 4096) {
    this.#scopes = new LRUCache<string, Scope>({ max: maxScopes });
  }

  /**
   * Records a read of `[start, end)` of `src` and says how far behind the head it started.
   *
   * @returns bytes between the read's start and the head before this read (0 at or past it)
   */
  observe(src: ChunkSource, start: number, end: number): number {
    const position = (src as Partial<PositionedChunkSource>).position;
    if (position && typeof position.partition === "string" && Number.isFinite(position.base)) {
      const key = "p\0" + position.partition;
      let scope = this.#scopes.get(key);
      if (!scope) this.#scopes.set(key, scope = new Scope());
      const distance = Math.max(0, scope.head - (position.base + start));
      scope.head = Math.max(scope.head, position.base + end);
      return distance;
    }
    const { dir, order } = placeByKey(src.key);
    const key = "k\0" + dir;
    let scope = this.#scopes.get(key);
    if (!scope) this.#scopes.set(key, scope = new Scope());
    return scope.observeOrdered(order, src.size, start, end);
  }
}

class Scope {
  /** Positioned sources: the head's absolute byte position. */
  head = 0;
  /** Key-placed sources: known objects by order, their sizes and prefix sums. */
  #orders: number[] = [];
  #sizes: number[] = [];
  #prefix: number[] = [0];
  #headOrder = -Infinity;
  #headPos = 0;

  observeOrdered(order: number, size: number, start: number, end: number): number {
    let i = lowerBound(this.#orders, order);
    if (this.#orders[i] !== order) {
      this.#orders.splice(i, 0, order);
      this.#sizes.splice(i, 0, size);
      this.#prefix = [0];
      for (const s of this.#sizes) this.#prefix.push(this.#prefix[this.#prefix.length - 1] + s);
    } else if (this.#sizes[i] !== size) {
      this.#sizes[i] = size;
      this.#prefix = [0];
      for (const s of this.#sizes) this.#prefix.push(this.#prefix[this.#prefix.length - 1] + s);
    }
    i = lowerBound(this.#orders, order);
    let distance = 0;
    if (order === this.#headOrder) {
      distance = Math.max(0, this.#headPos - start);
    } else if (order < this.#headOrder) {
      const h = lowerBound(this.#orders, this.#headOrder);
      // the rest of this object, the known objects strictly between, the head's position
      distance = (size - start) + (this.#prefix[h] - this.#prefix[i + 1]) + this.#headPos;
    }
    if (order > this.#headOrder || (order === this.#headOrder && end > this.#headPos)) {
      this.#headOrder = order;
      this.#headPos = end;
    }
    return distance;
  }
}

/** The directory of a key and the numeric start offset of its file name (0 if none). */
function placeByKey(key: string): { dir: string; order: number } {
  const slash = key.lastIndexOf("/");
  const m = /^(\d+)\.[A-Za-z0-9]+$/.exec(key.slice(slash + 1));
  if (!m) return { dir: key, order: 0 };
  return { dir: key.slice(0, slash + 1), order: Number(m[1]) };
}

function lowerBound(xs: number[], x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
