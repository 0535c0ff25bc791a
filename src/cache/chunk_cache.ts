// The chunk cache (docs/architecture.md, "The chunk cache"): the `RangeReader` the read path uses
// for remote bytes. It serves reads from content-addressed chunk files, fetches misses with one
// ranged GET per chunk (single flight), answers cold reads from an exact-range first fetch while
// the chunk hydrates, reads ahead for sequential readers, and keeps to its budget. Roles live in
// their own files: geometry (chunks.ts), storage (chunk_store.ts), eviction order and accounting
// (policy.ts), cold readers (heads.ts), readahead (readahead.ts), stats (stats.ts), fetch slots
// and bandwidth (fetch_gate.ts, token_bucket.ts).
import { LandedChunks } from "./landed.ts";
import { mkdir, readFile, rm, statfs } from "node:fs/promises";
import { join } from "node:path";
import { LRUCache } from "lru-cache";
import { concatBytes } from "../base/bytes.ts";
import { type Clock, systemClock, untilAborted, yieldToEventLoop } from "../base/clock.ts";
import { Deadline, withRetry } from "../../providers/retry.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import type { TieredStorageConfig } from "../config/schema.ts";
import { initHashes } from "../hash.ts";
import { outcomeOf } from "../metrics/instrument_store.ts";
import { writeFileDurable } from "../base/durable.ts";
import { decodeAccessTable, encodeAccessTable, type TableEntry } from "./access_table.ts";
import {
  CHUNK_BLOCK_SIZE,
  ChunkCorruptError,
  chunkFileLength,
  chunkFileSize,
} from "./chunk_format.ts";
import { chunkName, ChunkStore } from "./chunk_store.ts";
import {
  chunkBounds,
  chunksCovering,
  FIRST_FETCH_LIMITS,
  type FirstFetchLimits,
  firstFetchRange,
} from "./chunks.ts";
import { FetchGate, type GateTicket } from "./fetch_gate.ts";
import { HeadTracker } from "./heads.ts";
import {
  type AdmissionKind,
  EvictionPolicy,
  type ReaderHeat,
  type Reservation,
  type Tier,
  type Victim,
} from "./policy.ts";
import { ReaderTable } from "./readahead.ts";
import {
  type CacheStats,
  type CacheStatsSnapshot,
  type FetchKind,
  type FetchOutcome,
  StatsRecorder,
} from "./stats.ts";
import { TokenBucket } from "./token_bucket.ts";
import {
  CacheFullError,
  CacheTimeoutError,
  type ChunkSource,
  type RangeReader,
  type RangeReadOptions,
} from "./types.ts";

const MiB = 1024 * 1024;
const TABLE_FILE = "access.table";

/** Options of {@linkcode ChunkCache.open}; the config keys they come from in brackets. */
export interface ChunkCacheOptions {
  /** The cache directory, used only by the cache (`cache.path`). */
  path: string;
  /** Bytes; `Infinity` leaves only `sizePercent` (`cache.size`). @default Infinity */
  size?: number;
  /** Percent of the cache disk's total size (`cache.size_percent`). @default 20 */
  sizePercent?: number;
  /** Chunk files at most (`cache.max_objects`). @default 100000 */
  maxObjects?: number;
  /**
   * Nominal chunk size in bytes (`cache.chunk_size`). Any positive size is accepted here, so
   * tests can use tiny chunks; the config keeps it within 1–64 MiB. @default 8 MiB
   */
  chunkSize?: number;
  /** Readahead cap in chunks; 0 turns readahead off (`cache.readahead_max`). @default 4 */
  readaheadMax?: number;
  /** A bulk trim goes down to this percent (`cache.low_watermark_percent`). @default 80 */
  lowWatermarkPercent?: number;
  /** Milliseconds between bulk trims (`cache.trim_min_interval`). @default 5000 */
  trimMinInterval?: number;
  /** Download bytes per second, shared by all fetches; `Infinity` = no limit
   * (`tiered_storage.fetch_bandwidth`). @default Infinity */
  fetchBandwidth?: number;
  /** Store fetches in flight at most (`tiered_storage.fetch_concurrency`). @default 4 */
  fetchConcurrency?: number;
  /**
   * Milliseconds a read waits for the store before it fails with `CacheTimeoutError`; the
   * fetch goes on (`tiered_storage.fetch_timeout`). @default Infinity
   */
  fetchTimeout?: number;
  /** Milliseconds one chunk fetch may take, retries included. @default 60000 */
  chunkFetchDeadline?: number;
  /** Attempts per chunk fetch, the first included (transient store errors are retried). @default 3 */
  chunkFetchAttempts?: number;
  /** Limits of a cold read's exact-range first fetch; `false` turns it off. @default 64 KiB–1 MiB */
  firstFetch?: FirstFetchLimits | false;
  /** Milliseconds between saves of the access table. @default 60000 */
  persistInterval?: number;
  /** Total bytes of the cache disk; by default from `statfs` of `path`. */
  diskTotalBytes?: number;
  /** Bytes per checksummed block of a chunk file. @default 64 KiB */
  blockSize?: number;
  /**
   * Write chunk files around the page cache where the runtime and file system allow it
   * (`cache.direct_io`): the reads right after a chunk lands are answered from memory (see
   * `landedBytes`), so the page cache's copy would only cost memory and CPU. @default true
   */
  directIo?: boolean;
  /**
   * Bytes of the chunks that landed last kept in memory for the reads that follow (a
   * sequential reader's next MiBs, readahead's chunks): those reads skip reading the file back.
   * 0 turns it off. @default 64 MiB
   */
  landedBytes?: number;
  /** Time for trims, timeouts, the bandwidth limit and the persist timer. @default systemClock */
  clock?: Clock;
  /** Observer of hits, misses, evictions, fetches and usage (for metrics). */
  stats?: CacheStats;
}

/**
 * The cache options a loaded config gives.
 *
 * @param ts the `[tiered_storage]` section (its `cache.path` must already be absolute)
 * @returns options for {@linkcode ChunkCache.open}
 */
export function chunkCacheOptions(ts: TieredStorageConfig): ChunkCacheOptions {
  const c = ts.cache;
  return {
    path: c.path,
    size: c.size,
    sizePercent: c.size_percent,
    maxObjects: c.max_objects,
    chunkSize: c.chunk_size,
    readaheadMax: c.readahead_max,
    lowWatermarkPercent: c.low_watermark_percent,
    trimMinInterval: c.trim_min_interval,
    directIo: c.direct_io,
    fetchBandwidth: ts.fetch_bandwidth,
    fetchConcurrency: ts.fetch_concurrency,
    fetchTimeout: ts.fetch_timeout,
  };
}

/** How long a landed chunk nobody read keeps its place in memory against a newer one. */
const LANDED_MAX_AGE_MS = 30_000;

/** A chunk of one object: its index, range and content address. */
interface ChunkRef {
  src: ChunkSource;
  start: number;
  end: number;
  name: string;
}

/** One fetch of a chunk in progress, shared by every reader of that chunk (single flight). */
interface Flight {
  chunk: ChunkRef;
  /** A read waits for it (else it is readahead). */
  read: boolean;
  /** Where the chunk enters when it lands. */
  tier: Tier;
  heat: ReaderHeat;
  ticket?: GateTicket;
  /** The cold read's exact-range first fetch; resolves undefined if it failed. */
  preview?: { start: number; end: number; bytes: Promise<Uint8Array | undefined> };
  /** The chunk's bytes, as soon as they are fetched (before they are written). */
  bytes: Promise<Uint8Array>;
  /** Its bytes are in (the file may still be being written). */
  fetched?: boolean;
  /** Its bytes failed a record checksum (`invalidate`) after they came: never cached. */
  spoiled?: boolean;
  /**
   * The furthest data byte (within the object) a read of this flight asked for: a chunk its
   * readers took to its end is not kept in memory when it lands (they are done with it).
   */
  readTo?: number;
  /** The whole fetch: settles once the chunk is written (or the disk failed). */
  done: Promise<unknown>;
}

/** A readahead fetch that found no room without evicting chunks a reader needs. */
class PrefetchSkipped extends Error {
  override readonly name = "PrefetchSkipped";
}

/**
 * The local chunk cache for remote reads.
 *
 * Cold reads: a miss on a chunk with no fetch in flight fetches exactly the wanted bytes (widened
 * to 64 KiB, when the read wants at most 1 MiB and that is less than half the chunk) to answer
 * fast, and hydrates the whole chunk with one ranged GET in the background. Concurrent readers of
 * that chunk issue no GET: they are answered from the first fetch when it covers them, else wait
 * for the chunk. So a cold chunk costs one chunk GET, plus at most one first fetch.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mkdtemp, rm } from "node:fs/promises";
 * import { tmpdir } from "node:os";
 * import { join } from "node:path";
 * import { SimStore } from "../../providers/sim/store.ts";
 * import { initHashes, xxh3_128 } from "../hash.ts";
 *
 * await initHashes();
 * const store = new SimStore();
 * const object = new TextEncoder().encode("records of a remote segment");
 * await store.put("iggy/a.log", object);
 * const src = {
 *   key: "iggy/a.log",
 *   checksum: xxh3_128(object).toString(16).padStart(32, "0"),
 *   size: object.length,
 *   recordStarts: () => Promise.resolve([0]),
 * };
 * const path = await mkdtemp(join(tmpdir(), "tierd-cache-"));
 * const cache = await ChunkCache.open(store, { path, size: 64 << 20 }); // chunkCacheOptions(config.tiered_storage)
 * const bytes = await cache.read(src, 0, 7, { readerId: "consumer-7" });
 * assert.equal(new TextDecoder().decode(bytes), "records");
 * await cache.close();
 * await rm(path, { recursive: true });
 * ```
 */
export class ChunkCache implements RangeReader {
  readonly #store: ObjectStore;
  readonly #chunks: ChunkStore;
  readonly #policy: EvictionPolicy;
  readonly #stats: StatsRecorder;
  readonly #heads = new HeadTracker();
  readonly #readers: ReaderTable;
  readonly #gate: FetchGate;
  readonly #bucket: TokenBucket;
  readonly #clock: Clock;
  readonly #chunkSize: number;
  readonly #blockSize: number;
  readonly #firstFetch: FirstFetchLimits | false;
  readonly #fetchTimeout: number;
  readonly #chunkDeadline: number;
  readonly #chunkAttempts: number;
  readonly #persistInterval: number;
  readonly #tablePath: string;
  readonly #geometry = new LRUCache<string, Promise<number[]>>({ max: 4096 });
  readonly #flights = new Map<string, Flight>();
  /**
   * Work `idle()` waits for besides flights and file deletions: first fetches, and readahead
   * across a boundary waiting for the next object's chunk bounds (an index read). Each promise
   * settles without rejecting.
   */
  readonly #sideWork = new Set<Promise<unknown>>();
  readonly #unlinks = new Map<string, Promise<void>>();
  readonly #landed: LandedChunks;
  readonly #closing = new AbortController();
  #persisting: Promise<void> = Promise.resolve();
  #cancelPersistTimer?: () => void;
  #dirty = false;
  #closed = false;

  private constructor(
    store: ObjectStore,
    options: ChunkCacheOptions,
    budget: { bytes: number; objects: number },
  ) {
    this.#store = store;
    this.#clock = options.clock ?? systemClock;
    this.#chunkSize = options.chunkSize ?? 8 * MiB;
    this.#blockSize = options.blockSize ?? CHUNK_BLOCK_SIZE;
    this.#stats = new StatsRecorder(options.stats);
    this.#chunks = new ChunkStore(options.path, {
      blockSize: this.#blockSize,
      directIo: options.directIo ?? true,
      onWrite: (io, bytes) => this.#stats.chunkWrite(io, bytes),
    });
    this.#policy = new EvictionPolicy({
      ...budget,
      lowWatermarkPercent: options.lowWatermarkPercent ?? 80,
      trimMinInterval: options.trimMinInterval ?? 5000,
    }, { clock: this.#clock, onChange: (usage) => this.#stats.usage(usage) });
    this.#readers = new ReaderTable(options.readaheadMax ?? 4);
    this.#gate = new FetchGate(options.fetchConcurrency ?? 4);
    this.#bucket = new TokenBucket(options.fetchBandwidth ?? Infinity, { clock: this.#clock });
    this.#firstFetch = options.firstFetch ?? FIRST_FETCH_LIMITS;
    this.#fetchTimeout = options.fetchTimeout ?? Infinity;
    this.#chunkDeadline = options.chunkFetchDeadline ?? 60_000;
    this.#chunkAttempts = options.chunkFetchAttempts ?? 3;
    this.#persistInterval = options.persistInterval ?? 60_000;
    this.#tablePath = join(options.path, TABLE_FILE);
    this.#landed = new LandedChunks(
      options.landedBytes ?? 64 * MiB,
      LANDED_MAX_AGE_MS,
      () => this.#clock.monotonic(),
    );
  }

  /**
   * Opens the cache in `options.path`: sizes the budget, deletes leftover `.part` files,
   * reconciles the chunk files with the persisted access table, trims if over budget and starts
   * the persist timer.
   *
   * Reconciliation: table entries whose file is gone are dropped; files not in the table (written
   * after the last save) are adopted onto the cold list when their header checks out, deleted
   * otherwise. Their bytes are verified on every read anyway.
   *
   * @param store where misses are fetched from
   * @param options the cache's settings
   * @returns the open cache
   * @throws when the directory cannot be created or the budget cannot be sized
   */
  static async open(store: ObjectStore, options: ChunkCacheOptions): Promise<ChunkCache> {
    await initHashes();
    await mkdir(options.path, { recursive: true });
    const size = options.size ?? Infinity;
    const percent = options.sizePercent ?? 20;
    let disk = options.diskTotalBytes;
    if (disk === undefined) {
      const fs = await statfs(options.path);
      disk = Number(fs.bsize) * Number(fs.blocks);
    }
    const bytes = Math.min(size, Math.floor(disk * percent / 100));
    if (!Number.isFinite(bytes) || bytes <= 0) {
      throw new RangeError(`cache budget of ${options.path} is not a positive size: ${bytes}`);
    }
    const cache = new ChunkCache(store, options, {
      bytes,
      objects: options.maxObjects ?? 100_000,
    });
    await cache.#boot();
    return cache;
  }

  /** The budget in bytes (headers included) and files. */
  get budget(): { bytes: number; objects: number } {
    const { bytes, objects } = this.#policy.budget;
    return { bytes, objects };
  }

  /**
   * Bytes `[start, start + length)` of `src`, clamped to its size.
   *
   * @param src the remote object
   * @param start first byte wanted
   * @param length bytes wanted
   * @param options `signal` gives up the wait (shared fetches go on); `readerId` names a
   *   sequential reader for readahead
   * @returns exactly the object's bytes in the range
   * @throws {CacheFullError} when no room can be made for a chunk the read needs
   * @throws {CacheTimeoutError} after `fetchTimeout` ms of waiting for the store
   * @throws {StoreError} when the store fails (`NotFound` for a missing object)
   */
  async read(
    src: ChunkSource,
    start: number,
    length: number,
    options: RangeReadOptions = {},
  ): Promise<Uint8Array> {
    if (this.#closed) throw new Error("chunk cache is closed");
    const from = Math.max(0, Math.floor(start));
    const to = Math.min(src.size, from + Math.max(0, Math.floor(length)));
    if (!(to > from)) return new Uint8Array(0);
    const timeout = new AbortController();
    const cancelTimer = Number.isFinite(this.#fetchTimeout)
      ? this.#clock.setTimer(
        this.#fetchTimeout,
        () => timeout.abort(new CacheTimeoutError(src.key, this.#fetchTimeout)),
        { unref: true },
      )
      : undefined;
    const signal = options.signal
      ? AbortSignal.any([options.signal, timeout.signal])
      : timeout.signal;
    try {
      const bounds = await untilAborted(this.#boundsOf(src), signal);
      const span = chunksCovering(bounds, from, to - from);
      const behind = this.#heads.observe(src, from, to);
      const heat: ReaderHeat = behind > this.#dataBudget() ? "cold" : "hot";
      const parts: Promise<Uint8Array>[] = [];
      for (let k = span.first; k < span.end; k++) {
        const chunk = this.#chunkRef(src, bounds, k);
        parts.push(
          this.#readPart(chunk, Math.max(from, chunk.start), Math.min(to, chunk.end), heat, signal),
        );
      }
      if (options.readerId !== undefined) {
        const ahead = this.#readers.step(options.readerId, {
          key: src.key,
          start: from,
          end: to,
          firstChunk: span.first,
          lastChunk: span.end - 1,
          chunks: bounds.length - 1,
          atEnd: to === src.size,
          nextKey: options.next?.key,
        });
        for (let k = ahead.from; k < ahead.to; k++) {
          this.#prefetch(this.#chunkRef(src, bounds, k), heat);
        }
        if (ahead.spill > 0 && options.next) this.#prefetchStart(options.next, ahead.spill, heat);
      }
      const got = await Promise.all(parts);
      return got.length === 1 ? got[0] : concatBytes(got);
    } finally {
      cancelTimer?.();
    }
  }

  /**
   * Forgets bytes `[start, start + length)` of `src` that failed a record checksum in the read
   * path: the chunk files covering them are evicted (reason `corrupt`), and a cold read's
   * first-fetch bytes for them are no longer handed out, so the next read is answered by
   * another GET. A chunk fetch already in flight is another GET, and stays.
   *
   * Block checksums only prove a chunk file is what was written; a transfer corrupted before
   * it was written passes them, on every read and after a restart, until this drops it.
   *
   * @param src the remote object
   * @param start first byte of the bad range
   * @param length bytes in the bad range
   */
  async invalidate(src: ChunkSource, start: number, length: number): Promise<void> {
    let bounds: number[];
    try {
      bounds = await this.#boundsOf(src);
    } catch {
      return; // no geometry, so nothing of this object can be cached
    }
    const span = chunksCovering(bounds, start, Math.max(1, length));
    const gone: string[] = [];
    const spoiled: Promise<unknown>[] = [];
    for (let k = span.first; k < span.end; k++) {
      const chunk = this.#chunkRef(src, bounds, k);
      this.#landed.drop(chunk.name);
      const flight = this.#flights.get(chunk.name);
      if (flight) flight.preview = undefined;
      if (flight?.fetched) {
        // Its bytes may be the bad ones, still being written: they are not cached, and the
        // next read starts a fresh GET instead of joining this fetch.
        flight.spoiled = true;
        this.#flights.delete(chunk.name);
        spoiled.push(flight.done);
      }
      const entry = this.#policy.remove(chunk.name);
      if (!entry) continue;
      this.#evict([{ name: chunk.name, bytes: entry.bytes, reason: "corrupt" }]);
      gone.push(chunk.name);
    }
    // The files are gone before the read asks again, so no restart can bring them back.
    await Promise.all(spoiled);
    await Promise.all(gone.map((name) => this.#unlinks.get(name)));
  }

  /** Counters and gauges now. */
  stats(): CacheStatsSnapshot {
    const usage = this.#policy.usage();
    const c = this.#stats.counts;
    return {
      ...usage,
      budgetBytes: this.#policy.budget.bytes,
      maxObjects: this.#policy.budget.objects,
      hits: c.hits,
      misses: c.misses,
      evictions: { ...c.evictions },
      fetches: { ...c.fetches },
      fetchedBytes: c.fetchedBytes,
      prefetches: c.prefetches,
      prefetchesSkipped: c.prefetchesSkipped,
      firstFetchAnswers: c.firstFetchAnswers,
      full: c.full,
      corrupt: c.corrupt,
      chunkWrites: { ...c.chunkWrites },
    };
  }

  /** Resolves once no fetch or file deletion is in flight (background work included). */
  async idle(): Promise<void> {
    for (;;) {
      const pending: Promise<unknown>[] = [
        ...[...this.#flights.values()].map((f) => f.done),
        ...this.#sideWork,
        ...this.#unlinks.values(),
      ];
      if (pending.length === 0) return;
      await Promise.allSettled(pending);
    }
  }

  /** Saves the access table now (it is also saved every `persistInterval` and at close). */
  persist(): Promise<void> {
    const run = this.#persisting.then(async () => {
      this.#dirty = false;
      const entries: TableEntry[] = [...this.#policy.entries()].map((e) => ({
        name: e.name,
        bytes: e.bytes,
        tier: e.tier,
      }));
      try {
        await writeFileDurable(this.#tablePath, encodeAccessTable(entries));
      } catch (err) {
        this.#dirty = true;
        throw err;
      }
    });
    this.#persisting = run.catch(() => {});
    return run;
  }

  /**
   * Stops the cache: cancels fetches in flight, waits for them and for file deletions to
   * settle, and saves the access table. Reads after this throw.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#cancelPersistTimer?.();
    this.#closing.abort(new DOMException("chunk cache closed", "AbortError"));
    await this.idle();
    this.#landed.clear();
    await this.#chunks.closeFiles();
    await this.persist();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---- boot and persistence ----

  async #boot(): Promise<void> {
    const { chunks } = await this.#chunks.scan();
    await rm(this.#tablePath + ".tmp", { force: true });
    const onDisk = new Map(chunks.map((c) => [c.name, c]));
    let table: TableEntry[] = [];
    try {
      table = decodeAccessTable(await readFile(this.#tablePath));
    } catch {
      // Missing or damaged: every file on disk is adopted below on its own header.
    }
    const known = new Set<string>();
    for (const entry of table) {
      const file = onDisk.get(entry.name);
      if (!file || known.has(entry.name)) continue;
      known.add(entry.name);
      this.#policy.adopt(entry.name, file.size, entry.tier);
    }
    const strays = chunks.filter((c) => !known.has(c.name)).sort((a, b) => a.mtimeMs - b.mtimeMs);
    for (const stray of strays) {
      const header = await this.#chunks.check(stray.name);
      if (header && chunkFileLength(header) === stray.size) {
        this.#policy.adopt(stray.name, stray.size, "cold");
      } else {
        await this.#chunks.remove(stray.name);
      }
    }
    const usage = this.#policy.usage();
    const budget = this.#policy.budget;
    if (usage.bytes > budget.bytes || usage.objects > budget.objects) {
      this.#evict(this.#policy.trim());
    }
    this.#dirty = strays.length > 0 || known.size !== table.length;
    this.#armPersistTimer();
  }

  /**
   * The object bytes the budget holds in full-size chunks: a reader further behind the head than
   * this is cold. (The budget counts files, and each file's header takes a page.)
   */
  #dataBudget(): number {
    const perFile = this.#chunkSize / chunkFileSize(this.#chunkSize, this.#blockSize);
    return this.#policy.budget.bytes * perFile;
  }

  #armPersistTimer(): void {
    if (this.#closed || !Number.isFinite(this.#persistInterval)) return;
    this.#cancelPersistTimer = this.#clock.setTimer(this.#persistInterval, () => {
      const save = this.#dirty ? this.persist() : Promise.resolve();
      save.catch(() => {}).finally(() => this.#armPersistTimer());
    }, { unref: true });
  }

  // ---- the read path of one chunk ----

  #boundsOf(src: ChunkSource): Promise<number[]> {
    const key = `${src.checksum}:${src.size}`;
    let bounds = this.#geometry.get(key);
    if (!bounds) {
      bounds = src.recordStarts().then((starts) => chunkBounds(starts, src.size, this.#chunkSize));
      bounds.catch(() => this.#geometry.delete(key));
      this.#geometry.set(key, bounds);
    }
    return bounds;
  }

  #chunkRef(src: ChunkSource, bounds: readonly number[], k: number): ChunkRef {
    const start = bounds[k];
    const end = bounds[k + 1];
    return { src, start, end, name: chunkName(src.checksum, start, end) };
  }

  /** Bytes `[from, to)` of one chunk: from its file, a fetch in flight, or a new fetch. */
  async #readPart(
    chunk: ChunkRef,
    from: number,
    to: number,
    heat: ReaderHeat,
    signal: AbortSignal,
  ): Promise<Uint8Array> {
    const { name } = chunk;
    if (this.#policy.peek(name)) {
      const held = this.#landed.take(name, from - chunk.start, to - chunk.start);
      if (held) {
        if (this.#policy.touch(name, heat)) this.#dirty = true;
        this.#stats.hit(held.length);
        return held;
      }
      try {
        const bytes = await this.#chunks.read(name, chunk, from - chunk.start, to - chunk.start);
        if (bytes) {
          if (this.#policy.touch(name, heat)) this.#dirty = true;
          this.#stats.hit(bytes.length);
          return bytes;
        }
        // The file vanished under the table (evicted meanwhile, or deleted by hand): a miss.
        if (this.#policy.remove(name)) this.#dirty = true;
      } catch (err) {
        // A damaged file goes; any other disk error (EMFILE, EIO) only makes this read a miss:
        // the store can still answer, and the fetch rewrites the file.
        if (err instanceof ChunkCorruptError) {
          const entry = this.#policy.remove(name);
          if (entry) this.#evict([{ name, bytes: entry.bytes, reason: "corrupt" }]);
        }
      }
    }
    this.#stats.miss(to - from);
    signal.throwIfAborted();
    const inFlight = this.#flights.get(name);
    if (inFlight) {
      inFlight.readTo = Math.max(inFlight.readTo ?? 0, to);
      this.#join(inFlight, heat);
      return await this.#awaitFlight(inFlight, from, to, signal);
    }
    const flight = this.#newFlight(chunk, heat, true);
    flight.readTo = to;
    const first = this.#firstFetch
      ? firstFetchRange({ start: from, end: to }, chunk, this.#firstFetch)
      : undefined;
    let own: Promise<Uint8Array> | undefined;
    if (first) {
      // Started before the chunk fetch, so it takes the first free slot and the first tokens.
      own = this.#fetchFirst(chunk.src, first, signal);
      const bytes = own.then((b) => b, () => undefined);
      flight.preview = { ...first, bytes };
      this.#trackSideWork(bytes);
    }
    // First byte first: the chunk's fetch waits for the exact-range one to land, so the read's
    // answer does not share the store, the link and the CPU with the chunk behind it (beside it,
    // a 64 KiB first fetch from loopback MinIO took 12–16 ms instead of 2–3). Reads that come
    // meanwhile join the flight (the preview answers those it covers).
    this.#startFlight(flight, own);
    if (own && first) {
      try {
        const bytes = await own;
        this.#stats.counts.firstFetchAnswers++;
        return bytes.slice(from - first.start, to - first.start);
      } catch {
        if (signal.aborted) throw signal.reason;
        // The first fetch failed on its own: the chunk fetch may still answer.
      }
    }
    return await this.#awaitFlight(flight, from, to, signal);
  }

  async #awaitFlight(
    flight: Flight,
    from: number,
    to: number,
    signal: AbortSignal,
  ): Promise<Uint8Array> {
    const preview = flight.preview;
    if (preview && preview.start <= from && to <= preview.end) {
      const bytes = await untilAborted(preview.bytes, signal);
      if (bytes) {
        this.#stats.counts.firstFetchAnswers++;
        return bytes.slice(from - preview.start, to - preview.start);
      }
    }
    const bytes = await untilAborted(flight.bytes, signal);
    return bytes.slice(from - flight.chunk.start, to - flight.chunk.start);
  }

  #join(flight: Flight, heat: ReaderHeat): void {
    if (!flight.read) {
      flight.read = true;
      flight.ticket?.promote();
    }
    if (heat === "hot") flight.tier = "main";
    else if (flight.tier === "prefetched") flight.tier = "cold";
  }

  /**
   * Readahead across an object boundary: the first `count` chunks of `src`, once its chunk
   * bounds are known (they may need its index). A failure only means no readahead.
   */
  #prefetchStart(src: ChunkSource, count: number, heat: ReaderHeat): void {
    const started = this.#boundsOf(src).then((bounds) => {
      if (this.#closed) return;
      for (let k = 0; k < Math.min(count, bounds.length - 1); k++) {
        this.#prefetch(this.#chunkRef(src, bounds, k), heat);
      }
    }).catch(() => {});
    this.#trackSideWork(started);
  }

  /** Has `idle()` wait for `work` (a promise that never rejects) until it settles. */
  #trackSideWork(work: Promise<unknown>): void {
    this.#sideWork.add(work);
    work.finally(() => this.#sideWork.delete(work));
  }

  #prefetch(chunk: ChunkRef, heat: ReaderHeat): void {
    if (this.#closed || this.#policy.peek(chunk.name) || this.#flights.has(chunk.name)) return;
    this.#stats.counts.prefetches++;
    this.#startFlight(this.#newFlight(chunk, heat, false));
  }

  #newFlight(chunk: ChunkRef, heat: ReaderHeat, read: boolean): Flight {
    const tier: Tier = !read ? "prefetched" : heat === "hot" ? "main" : "cold";
    const settled = Promise.resolve(new Uint8Array(0));
    return { chunk, read, tier, heat, bytes: settled, done: settled };
  }

  /**
   * Registers `flight` and runs its fetch — if `after` (a first fetch) is given, once it settled
   * and the event loop took a turn: the reader it answers then plans, validates and sends its
   * first bytes before the chunk's GET is signed and sent (run straight from `after`, that GET
   * went first and put about 0.3 ms before a cold read's first byte).
   */
  #startFlight(flight: Flight, after?: Promise<unknown>): void {
    this.#flights.set(flight.chunk.name, flight);
    const fetched = Promise.withResolvers<Uint8Array>();
    flight.bytes = fetched.promise;
    flight.bytes.catch(() => {});
    const run = () => this.#runFlight(flight, fetched.resolve);
    const started = after ? after.then(yieldToEventLoop, yieldToEventLoop).then(run) : run();
    flight.done = started.then(fetched.resolve, fetched.reject);
  }

  /**
   * Fetches one chunk: a fetch slot, then room in the budget (decided synchronously, so
   * concurrent misses never overshoot), then the bandwidth, one ranged GET (retried on transient
   * errors), `.part` + rename (no fsync: see chunk_store.ts), and the chunk joins its recency
   * list. The reads waiting for it are answered by `fetched` as soon as the bytes are in, not
   * after the write (but for a backfill's, see below); a read that comes meanwhile joins the
   * flight and takes them from memory.
   * The fetch belongs to no reader: only `close()` cancels it.
   */
  async #runFlight(
    flight: Flight,
    fetched: (bytes: Uint8Array) => void,
  ): Promise<Uint8Array> {
    const { chunk } = flight;
    const signal = this.#closing.signal;
    const began = this.#clock.now();
    const length = chunk.end - chunk.start;
    let kind: FetchKind = flight.read ? "chunk" : "prefetch";
    let release: (() => void) | undefined;
    let reservation: Reservation | undefined;
    try {
      flight.ticket = this.#gate.acquire(flight.read ? "read" : "readahead", signal);
      release = await flight.ticket.ready;
      // A read may have joined a readahead fetch while it waited for its slot.
      kind = flight.read ? "chunk" : "prefetch";
      const admission: AdmissionKind = flight.read
        ? "read"
        : flight.heat === "cold"
        ? "prefetch_cold"
        : "prefetch";
      const bytesNeeded = chunkFileSize(length, this.#blockSize);
      const reserved = this.#policy.reserve(bytesNeeded, admission);
      if (!reserved) {
        if (admission !== "read") throw new PrefetchSkipped();
        this.#evict(this.#policy.trim());
        this.#stats.full();
        throw new CacheFullError(chunk.src.key, bytesNeeded, this.#policy.budget.bytes);
      }
      reservation = reserved.reservation;
      this.#evict(reserved.victims);
      await Promise.all(reserved.victims.map((v) => this.#unlinks.get(v.name)));
      const bytes = await this.#fetchChunk(chunk, signal);
      flight.fetched = true;
      // A backfill's reads wait for the write: the chunks it recycles are its own, and one not
      // yet in the cache cannot be recycled, so its next read would take a working-set chunk.
      if (flight.tier !== "cold") fetched(bytes);
      this.#reportFetch(kind, chunk.src.key, "ok", length, began);
      // The slot is held until the chunk is written, so reservations never outnumber the
      // slots: a budget of fetch_concurrency maximal chunks always has room for a read.
      await this.#unlinks.get(chunk.name);
      try {
        const spoiled = () => flight.spoiled === true;
        const written = spoiled() ? 0 : await this.#chunks.write(chunk.name, chunk, bytes, spoiled);
        if (spoiled()) {
          this.#policy.release(reservation);
          if (written > 0) this.#evict([{ name: chunk.name, bytes: written, reason: "corrupt" }]);
          else this.#stats.eviction("corrupt", bytesNeeded);
        } else {
          this.#policy.commit(reservation, chunk.name, flight.tier);
          this.#dirty = true;
          // Kept for the reads still to come: readahead's, or a reader part-way through it.
          if ((flight.readTo ?? 0) < chunk.end) this.#landed.put(chunk.name, bytes);
        }
      } catch (err) {
        // The bytes are good even if the disk is not: answer the waiting reads, cache nothing.
        this.#policy.release(reservation);
        if ((err as { code?: string }).code === "ENOSPC") {
          this.#stats.full();
          this.#evict(this.#policy.trim());
        }
      }
      return bytes;
    } catch (err) {
      if (reservation) this.#policy.release(reservation);
      if (err instanceof PrefetchSkipped) {
        this.#stats.counts.prefetchesSkipped++;
      } else {
        this.#reportFetch(kind, chunk.src.key, fetchOutcomeOf(err), 0, began);
      }
      throw err;
    } finally {
      release?.();
      if (this.#flights.get(chunk.name) === flight) this.#flights.delete(chunk.name);
    }
  }

  /**
   * One ranged GET of a whole chunk, paid for in bandwidth first, retried on transient errors
   * only within `fetchTimeout` of its start: past that no read waits for it any more, so a store
   * that stopped answering frees the flight (and its slot) when its first attempt fails — the
   * transport bounds that by `fetch_timeout` for the first byte and for each stall of the body
   * (`providers/deadline_fetch.ts`) — and the next read starts a fresh fetch.
   */
  async #fetchChunk(chunk: ChunkRef, signal: AbortSignal): Promise<Uint8Array> {
    const length = chunk.end - chunk.start;
    await this.#bucket.take(length, signal);
    const clock = this.#clock;
    const deadline = Deadline.after(this.#chunkDeadline, undefined, { clock });
    const retryBefore = Deadline.after(this.#fetchTimeout, undefined, { clock });
    try {
      return await withRetry(
        (attempt) => this.#get(chunk.src, chunk.start, length, AbortSignal.any([attempt, signal])),
        { deadline, retryBefore, maxAttempts: this.#chunkAttempts },
      );
    } finally {
      deadline.dispose();
    }
  }

  /** A cold read's exact-range fetch: one attempt, cancelled by the reader's own signal. */
  async #fetchFirst(
    src: ChunkSource,
    range: { start: number; end: number },
    readSignal: AbortSignal,
  ): Promise<Uint8Array> {
    const signal = AbortSignal.any([readSignal, this.#closing.signal]);
    const began = this.#clock.now();
    const length = range.end - range.start;
    let release: (() => void) | undefined;
    try {
      release = await this.#gate.acquire("read", signal).ready;
      await this.#bucket.take(length, signal);
      const bytes = await this.#get(src, range.start, length, signal);
      this.#reportFetch("first", src.key, "ok", length, began);
      return bytes;
    } catch (err) {
      this.#reportFetch("first", src.key, fetchOutcomeOf(err), 0, began);
      throw err;
    } finally {
      release?.();
    }
  }

  async #get(
    src: ChunkSource,
    start: number,
    length: number,
    signal: AbortSignal,
  ): Promise<Uint8Array> {
    const result = await this.#store.get(src.key, { range: { start, length }, signal });
    if (result.size !== src.size || result.bytes.length !== length) {
      throw new StoreError(
        "Malformed",
        `object ${src.key} answered ${result.bytes.length} bytes of ${result.size} for ` +
          `[${start}, ${start + length}) of an object of ${src.size} bytes`,
        { op: "get", key: src.key },
      );
    }
    return result.bytes;
  }

  #reportFetch(
    kind: FetchKind,
    key: string,
    outcome: FetchOutcome,
    bytes: number,
    began: number,
  ): void {
    this.#stats.fetch({ kind, key, outcome, bytes, seconds: (this.#clock.now() - began) / 1000 });
  }

  /** Counts evicted chunks and deletes their files (one deletion per name at a time). */
  #evict(victims: readonly Victim[]): void {
    for (const victim of victims) {
      this.#landed.drop(victim.name);
      this.#stats.eviction(victim.reason, victim.bytes);
      this.#dirty = true;
      const before = this.#unlinks.get(victim.name) ?? Promise.resolve();
      const unlink: Promise<void> = before
        .then(() => this.#chunks.remove(victim.name))
        .catch(() => {})
        .then(() => {
          if (this.#unlinks.get(victim.name) === unlink) this.#unlinks.delete(victim.name);
        });
      this.#unlinks.set(victim.name, unlink);
    }
  }
}

/**
 * The `outcome` of a failed fetch: the cache's own errors, else the store request's outcome
 * ({@link outcomeOf}) narrowed to `not_found`, `aborted` or `error`.
 */
export function fetchOutcomeOf(err: unknown): FetchOutcome {
  if (err instanceof CacheFullError) return "cache_full";
  if (err instanceof CacheTimeoutError) return "aborted";
  const outcome = outcomeOf(err);
  return outcome === "not_found" || outcome === "aborted" ? outcome : "error";
}
