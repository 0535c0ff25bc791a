// The cache's eviction policy and budget accounting: which chunks are resident, in what order
// they go, and how many bytes and files are promised to fetches in flight. Pure bookkeeping,
// synchronous, no I/O: the cache deletes the victims it is handed.
//
// Three recency lists (each an lru-cache used as an ordered map, least recent first out):
//   prefetched — admitted by readahead and not read since: evicted first;
//   cold       — read only by cold readers (a backfill far behind the head): the cold end of the
//                LRU, so a scan recycles its own chunks instead of the working set;
//   main       — read by a reader near the head: the working set.
// A hot read promotes a chunk into main; a cold read never refreshes a chunk in main.
import { type Clock, systemClock } from "../base/clock.ts";
import { LRUCache } from "lru-cache";

/** Which recency list a resident chunk is on. */
export type Tier = "prefetched" | "cold" | "main";

/** Why a chunk left the cache (the `reason` label of `tierd_cache_evictions_total`). */
export type EvictionReason = "budget" | "prefetch_unread" | "corrupt" | "cold";

/**
 * Who asks for room, which decides what it may evict:
 * - `read`: a read's miss — unread prefetches, then cold chunks, then the main LRU;
 * - `prefetch`: readahead of a reader near the head — cold chunks, then the main LRU (never
 *   another unread prefetch, so readahead cannot evict the readahead a reader is about to use);
 * - `prefetch_cold`: readahead of a cold reader — cold chunks only.
 */
export type AdmissionKind = "read" | "prefetch" | "prefetch_cold";

/** Whether a read came from a reader near the head (`hot`) or far behind it (`cold`). */
export type ReaderHeat = "hot" | "cold";

/** A resident chunk as the policy sees it. */
export interface PolicyEntry {
  readonly name: string;
  /** Bytes of the chunk's file. */
  readonly bytes: number;
  tier: Tier;
}

/** A chunk the policy evicted; the caller deletes its file. */
export interface Victim {
  name: string;
  bytes: number;
  reason: EvictionReason;
}

/** Room promised to one fetch: committed as a resident chunk or released. */
export interface Reservation {
  readonly bytes: number;
  /** False once committed or released. */
  live: boolean;
}

/** The limits the policy keeps to. */
export interface Budget {
  /** Bytes of chunk files (headers included), resident and reserved. */
  bytes: number;
  /** Chunk files, resident and reserved. */
  objects: number;
  /** A bulk trim goes down to this percent of both limits. */
  lowWatermarkPercent: number;
  /** Milliseconds between bulk trims, at least. */
  trimMinInterval: number;
}

/** Bytes and files, resident and reserved, after a change. */
export interface Usage {
  bytes: number;
  objects: number;
  reservedBytes: number;
  reservedObjects: number;
}

const ORDERS: Record<AdmissionKind | "trim", readonly Tier[]> = {
  read: ["prefetched", "cold", "main"],
  prefetch: ["cold", "main"],
  prefetch_cold: ["cold"],
  trim: ["prefetched", "cold", "main"],
};

const REASONS: Record<Tier, EvictionReason> = {
  prefetched: "prefetch_unread",
  cold: "cold",
  main: "budget",
};

function list(): LRUCache<string, PolicyEntry> {
  // The budget is enforced here, not by lru-cache: an effectively unlimited size keeps it from
  // evicting on its own (and from preallocating `max_objects` slots).
  return new LRUCache<string, PolicyEntry>({
    maxSize: Number.MAX_SAFE_INTEGER,
    sizeCalculation: () => 1,
  });
}

/**
 * Budget accounting and eviction order of the chunk cache. Every method is synchronous, so a
 * reservation is decided before any await: concurrent misses can never overshoot the budget.
 */
export class EvictionPolicy {
  readonly #tiers: Record<Tier, LRUCache<string, PolicyEntry>> = {
    prefetched: list(),
    cold: list(),
    main: list(),
  };
  readonly #tierBytes: Record<Tier, number> = { prefetched: 0, cold: 0, main: 0 };
  readonly #index = new Map<string, PolicyEntry>();
  readonly #budget: Budget;
  readonly #clock: Clock;
  readonly #onChange?: (usage: Usage) => void;
  #bytes = 0;
  #reservedBytes = 0;
  #reservedObjects = 0;
  #lastTrim = -Infinity;

  /**
   * @param budget the limits
   * @param options.clock the clock for `trimMinInterval` @default systemClock
   * @param options.onChange called after every change of usage (for gauges and invariant checks)
   */
  constructor(
    budget: Budget,
    options: { clock?: Clock; onChange?: (usage: Usage) => void } = {},
  ) {
    this.#budget = { ...budget };
    this.#clock = options.clock ?? systemClock;
    this.#onChange = options.onChange;
  }

  /** The limits in force. */
  get budget(): Readonly<Budget> {
    return this.#budget;
  }

  /** Resident and reserved bytes and files now. */
  usage(): Usage {
    return {
      bytes: this.#bytes,
      objects: this.#index.size,
      reservedBytes: this.#reservedBytes,
      reservedObjects: this.#reservedObjects,
    };
  }

  /** The resident chunk `name`, without touching its recency. */
  peek(name: string): PolicyEntry | undefined {
    return this.#index.get(name);
  }

  /**
   * Reserves room for a chunk file of `bytes`, evicting what `kind` may evict when the budget
   * is full. The high mark is the budget itself (it is never crossed, reservations included):
   * when a reservation would cross it and the last bulk trim is `trimMinInterval` old, it trims
   * down to the low watermark; otherwise it evicts just enough for this reservation.
   *
   * @param bytes the file's size
   * @param kind who asks (decides the victims it may take)
   * @returns the reservation and the chunks evicted for it, or undefined when it cannot fit
   *   (nothing is evicted then)
   */
  reserve(
    bytes: number,
    kind: AdmissionKind,
  ): { reservation: Reservation; victims: Victim[] } | undefined {
    const order = ORDERS[kind];
    const over = this.#over(bytes, 1);
    let victims: Victim[] = [];
    if (over.bytes > 0 || over.objects > 0) {
      let freeBytes = 0;
      let freeObjects = 0;
      for (const tier of order) {
        freeBytes += this.#tierBytes[tier];
        freeObjects += this.#tiers[tier].size;
      }
      if (freeBytes < over.bytes || freeObjects < over.objects) return undefined;
      const now = this.#clock.now();
      if (now - this.#lastTrim >= this.#budget.trimMinInterval) {
        this.#lastTrim = now;
        victims = this.#evict(order, () => this.#overLow(bytes, 1));
      }
      victims.push(...this.#evict(order, () => this.#over(bytes, 1)));
    }
    const reservation: Reservation = { bytes, live: true };
    this.#reservedBytes += bytes;
    this.#reservedObjects++;
    this.#changed();
    return { reservation, victims };
  }

  /**
   * Turns a reservation into a resident chunk on `tier` (most recent end).
   *
   * @param reservation a live reservation
   * @param name the chunk's content address
   * @param tier where the chunk enters
   */
  commit(reservation: Reservation, name: string, tier: Tier): void {
    if (!reservation.live) throw new Error("reservation already settled");
    reservation.live = false;
    this.#reservedBytes -= reservation.bytes;
    this.#reservedObjects--;
    this.#drop(name);
    this.#add({ name, bytes: reservation.bytes, tier });
    this.#changed();
  }

  /** Gives back a reservation that was not used (the fetch failed). Idempotent. */
  release(reservation: Reservation): void {
    if (!reservation.live) return;
    reservation.live = false;
    this.#reservedBytes -= reservation.bytes;
    this.#reservedObjects--;
    this.#changed();
  }

  /**
   * Adds a chunk found on disk at boot, outside the budget checks (call `trim` afterwards).
   * Entries added to one tier in order end up oldest first.
   */
  adopt(name: string, bytes: number, tier: Tier): void {
    this.#drop(name);
    this.#add({ name, bytes, tier });
    this.#changed();
  }

  /**
   * Records a read of a resident chunk: a hot read moves it to the recent end of main; a cold
   * read moves an unread prefetch or a cold chunk to the recent end of the cold list and leaves
   * a chunk in main where it is.
   *
   * @returns false when the chunk is not resident
   */
  touch(name: string, heat: ReaderHeat): boolean {
    const entry = this.#index.get(name);
    if (!entry) return false;
    const target: Tier = heat === "hot" ? "main" : entry.tier === "main" ? "main" : "cold";
    if (target === entry.tier) {
      if (heat === "hot" || entry.tier === "cold") this.#tiers[entry.tier].get(name);
      return true;
    }
    this.#tiers[entry.tier].delete(name);
    this.#tierBytes[entry.tier] -= entry.bytes;
    entry.tier = target;
    this.#tiers[target].set(name, entry);
    this.#tierBytes[target] += entry.bytes;
    return true;
  }

  /**
   * Removes a resident chunk (its file is corrupt or gone).
   *
   * @returns the entry removed, or undefined when it was not resident
   */
  remove(name: string): PolicyEntry | undefined {
    const entry = this.#drop(name);
    if (entry) this.#changed();
    return entry;
  }

  /**
   * Trims down to the low watermark now, whatever the interval (boot over budget, disk full).
   *
   * @returns the chunks evicted
   */
  trim(): Victim[] {
    this.#lastTrim = this.#clock.now();
    return this.#evict(ORDERS.trim, () => this.#overLow(0, 0));
  }

  /** Resident chunks, per tier from the first to be evicted to the last (for persistence). */
  *entries(): Generator<PolicyEntry> {
    for (const tier of ORDERS.trim) {
      for (const entry of this.#tiers[tier].rvalues()) if (entry) yield entry;
    }
  }

  /** How far `extra` bytes and files would go over the budget (≤ 0: they fit). */
  #over(bytes: number, objects: number): { bytes: number; objects: number } {
    return {
      bytes: this.#bytes + this.#reservedBytes + bytes - this.#budget.bytes,
      objects: this.#index.size + this.#reservedObjects + objects - this.#budget.objects,
    };
  }

  /** How far `extra` would go over the low watermark. */
  #overLow(bytes: number, objects: number): { bytes: number; objects: number } {
    const low = this.#budget.lowWatermarkPercent / 100;
    return {
      bytes: this.#bytes + this.#reservedBytes + bytes - Math.floor(this.#budget.bytes * low),
      objects: this.#index.size + this.#reservedObjects + objects -
        Math.floor(this.#budget.objects * low),
    };
  }

  #evict(
    order: readonly Tier[],
    over: () => { bytes: number; objects: number },
  ): Victim[] {
    const victims: Victim[] = [];
    for (const tier of order) {
      for (;;) {
        const o = over();
        if (o.bytes <= 0 && o.objects <= 0) break;
        const entry = this.#tiers[tier].pop();
        if (!entry) break;
        this.#index.delete(entry.name);
        this.#bytes -= entry.bytes;
        this.#tierBytes[tier] -= entry.bytes;
        victims.push({ name: entry.name, bytes: entry.bytes, reason: REASONS[tier] });
      }
    }
    if (victims.length > 0) this.#changed();
    return victims;
  }

  #add(entry: PolicyEntry): void {
    this.#index.set(entry.name, entry);
    this.#tiers[entry.tier].set(entry.name, entry);
    this.#tierBytes[entry.tier] += entry.bytes;
    this.#bytes += entry.bytes;
  }

  #drop(name: string): PolicyEntry | undefined {
    const entry = this.#index.get(name);
    if (!entry) return undefined;
    this.#index.delete(name);
    this.#tiers[entry.tier].delete(name);
    this.#tierBytes[entry.tier] -= entry.bytes;
    this.#bytes -= entry.bytes;
    return entry;
  }

  #changed(): void {
    this.#onChange?.(this.usage());
  }
}
