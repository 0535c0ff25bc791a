// `cache_hit_ratio_mixed`: the chunk-cache hit ratio of a mixed workload — tail readers
// re-reading the newest remote data plus one backfill scanner streaming through far more data
// than the cache holds — for tierd's ChunkCache (cold-reader isolation) and for a
// plain LRU chunk cache without it (written here, over the same chunk geometry, budget and
// store), driven in-process with the same seeded sequence of reads. Also
// `cache_hit_ratio_mixed_vs_lru`, tierd's hit ratio ÷ the plain LRU's.
import { join } from "node:path";
import { SimStore } from "../providers/sim/store.ts";
import type { ObjectStore } from "../providers/types.ts";
import { ChunkCache } from "../src/cache/mod.ts";
import { chunkFileSize } from "../src/cache/chunk_format.ts";
import { chunkBounds, chunksCovering } from "../src/cache/chunks.ts";
import type {
  ChunkSource,
  PositionedChunkSource,
  RangeReader,
  RangeReadOptions,
} from "../src/cache/types.ts";
import { recordResult } from "./_results.ts";
import { WORK_DIR } from "./_segments.ts";
import { MiB, progress, round } from "./_stats.ts";
import { seededRandom } from "../src/base/rng.ts";

const CHUNK = 1 * MiB;
const SEGMENT_SIZE = 4 * MiB;
const SEGMENTS = 96;
/** Record starts every this many bytes (chunk boundaries snap to them). */
const RECORD = 16 * 1024;
/** The cache holds this many chunks. */
const BUDGET_CHUNKS = 32;
/** Tail readers read at random inside the newest this-many chunks. */
const HOT_CHUNKS = 24;
const TAIL_READERS = 4;
const TAIL_READ = 64 * 1024;
/** The scanner reads this many 1-chunk requests per step (a backfill outruns the tail). */
const SCAN_READS_PER_STEP = 4;
const SCAN_READ = CHUNK;
/** Steps of tail reads alone before counting (fills the working set). */
const WARMUP_STEPS = 32;
const SEED = 7;

interface Counter {
  hits: number;
  misses: number;
}

/** A cache whose hits and misses can be read after each call. */
interface Measured extends RangeReader {
  counts(): Counter;
  idle(): Promise<void>;
  close(): Promise<void>;
}

/** A plain LRU chunk cache: same geometry, one GET per missing chunk, no reader classes. */
class PlainLruCache implements Measured {
  readonly #store: ObjectStore;
  readonly #capacity: number;
  readonly #chunks = new Map<string, Uint8Array>();
  readonly #bounds = new Map<string, number[]>();
  #bytes = 0;
  hits = 0;
  misses = 0;

  constructor(store: ObjectStore, capacityBytes: number) {
    this.#store = store;
    this.#capacity = capacityBytes;
  }

  async read(src: ChunkSource, start: number, length: number, _o?: RangeReadOptions) {
    let bounds = this.#bounds.get(src.key);
    if (!bounds) {
      bounds = chunkBounds(await src.recordStarts(), src.size, CHUNK);
      this.#bounds.set(src.key, bounds);
    }
    const to = Math.min(src.size, start + length);
    const span = chunksCovering(bounds, start, to - start);
    const out = new Uint8Array(to - start);
    for (let k = span.first; k < span.end; k++) {
      const name = `${src.key}#${k}`;
      let bytes = this.#chunks.get(name);
      if (bytes) {
        this.hits++;
        this.#chunks.delete(name); // most recent at the end
        this.#chunks.set(name, bytes);
      } else {
        this.misses++;
        const got = await this.#store.get(src.key, {
          range: { start: bounds[k], length: bounds[k + 1] - bounds[k] },
        });
        bytes = got.bytes;
        this.#chunks.set(name, bytes);
        this.#bytes += bytes.length;
        while (this.#bytes > this.#capacity) {
          const [oldest, b] = this.#chunks.entries().next().value!;
          this.#chunks.delete(oldest);
          this.#bytes -= b.length;
        }
      }
      const from = Math.max(start, bounds[k]);
      const end = Math.min(to, bounds[k + 1]);
      out.set(bytes.subarray(from - bounds[k], end - bounds[k]), from - start);
    }
    return out;
  }

  counts(): Counter {
    return { hits: this.hits, misses: this.misses };
  }

  idle(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

function tierdMeasured(cache: ChunkCache): Measured {
  return {
    read: (src, start, length, o) => cache.read(src, start, length, o),
    counts: () => {
      const s = cache.stats();
      return { hits: s.hits, misses: s.misses };
    },
    idle: () => cache.idle(),
    close: () => cache.close(),
  };
}

interface Outcome {
  overall: number;
  tail: number;
  scanner: number;
  tail_reads: number;
  scanner_reads: number;
  hits: number;
  misses: number;
  seconds: number;
}

/**
 * The workload: warm-up steps of tail reads, then steps of (scanner reads, one read per tail
 * reader) until the scanner has read every segment. Sequential (each read awaited, and the
 * cache's background work awaited too), so every hit or miss belongs to one read.
 */
async function drive(
  cache: Measured,
  sources: PositionedChunkSource[],
  scannerReaderId: string | undefined,
): Promise<Outcome> {
  const rand = seededRandom(SEED);
  const total = SEGMENTS * SEGMENT_SIZE;
  const hotStart = total - HOT_CHUNKS * CHUNK;
  const at = (pos: number) => {
    const seg = Math.floor(pos / SEGMENT_SIZE);
    return { src: sources[seg], start: pos - seg * SEGMENT_SIZE };
  };
  const tally = { tail: { hits: 0, misses: 0 }, scanner: { hits: 0, misses: 0 } };
  const read = async (
    who: "tail" | "scanner" | "warmup",
    pos: number,
    len: number,
    id?: string,
  ) => {
    const before = cache.counts();
    const { src, start } = at(pos);
    await cache.read(src, start, Math.min(len, src.size - start), id ? { readerId: id } : {});
    await cache.idle();
    const after = cache.counts();
    if (who === "warmup") return;
    tally[who].hits += after.hits - before.hits;
    tally[who].misses += after.misses - before.misses;
  };
  const tailPos = () =>
    hotStart + Math.floor(rand() * ((total - hotStart - TAIL_READ) / RECORD)) * RECORD;
  for (let s = 0; s < WARMUP_STEPS; s++) {
    for (let t = 0; t < TAIL_READERS; t++) await read("warmup", tailPos(), TAIL_READ);
  }
  const t0 = performance.now();
  let scan = 0;
  while (scan < total) {
    for (let i = 0; i < SCAN_READS_PER_STEP && scan < total; i++) {
      await read("scanner", scan, SCAN_READ, scannerReaderId);
      scan += SCAN_READ;
    }
    for (let t = 0; t < TAIL_READERS; t++) await read("tail", tailPos(), TAIL_READ);
  }
  const seconds = (performance.now() - t0) / 1000;
  const ratio = (c: Counter) => c.hits / Math.max(1, c.hits + c.misses);
  const all = {
    hits: tally.tail.hits + tally.scanner.hits,
    misses: tally.tail.misses + tally.scanner.misses,
  };
  return {
    overall: round(ratio(all), 4),
    tail: round(ratio(tally.tail), 4),
    scanner: round(ratio(tally.scanner), 4),
    tail_reads: tally.tail.hits + tally.tail.misses,
    scanner_reads: tally.scanner.hits + tally.scanner.misses,
    hits: all.hits,
    misses: all.misses,
    seconds: round(seconds, 2),
  };
}

/** Runs the benchmark and records its figures. @returns tierd's hit ratio */
export async function runReadCacheBench(): Promise<number> {
  const store = new SimStore({ seed: SEED });
  const sources: PositionedChunkSource[] = [];
  const starts = Array.from({ length: SEGMENT_SIZE / RECORD }, (_, i) => i * RECORD);
  for (let i = 0; i < SEGMENTS; i++) {
    const key = `bench/cache/${String(i * 1000).padStart(20, "0")}.log`;
    const bytes = new Uint8Array(SEGMENT_SIZE).fill(i & 0xff);
    await store.put(key, bytes);
    sources.push({
      key,
      checksum: (i + 1).toString(16).padStart(32, "0"),
      size: SEGMENT_SIZE,
      recordStarts: () => Promise.resolve(starts),
      position: { partition: "bench/1/1/0", base: i * SEGMENT_SIZE },
    });
  }
  const budgetBytes = BUDGET_CHUNKS * chunkFileSize(CHUNK);
  const root = join(WORK_DIR, "runs", `read_cache-${Date.now().toString(36)}`);
  const open = (name: string) =>
    ChunkCache.open(store, {
      path: join(root, name),
      size: budgetBytes,
      chunkSize: CHUNK,
      persistInterval: Infinity,
    });
  const results: Record<string, Outcome> = {};
  try {
    const runs: [string, () => Promise<Measured>, string | undefined][] = [
      ["tierd", async () => tierdMeasured(await open("tierd")), undefined],
      [
        "tierd, scanner with x-tierd-reader (readahead)",
        async () => tierdMeasured(await open("tierd-ra")),
        "backfill",
      ],
      [
        "plain LRU",
        () => Promise.resolve(new PlainLruCache(store, BUDGET_CHUNKS * CHUNK)),
        undefined,
      ],
    ];
    for (const [name, make, id] of runs) {
      const cache = await make();
      try {
        results[name] = await drive(cache, sources, id);
      } finally {
        await cache.close();
      }
      progress("read_cache", `${name}: ${JSON.stringify(results[name])}`);
    }
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
  const tierd = results["tierd"];
  const lru = results["plain LRU"];
  const method = `In-process: ${SEGMENTS} remote .log objects of ${SEGMENT_SIZE / MiB} MiB ` +
    `(one partition, positioned sources as the read path passes them) in the SimStore ` +
    `(in memory, no faults), records every ${RECORD / 1024} KiB, chunk_size ` +
    `${CHUNK / MiB} MiB, a budget of ${BUDGET_CHUNKS} chunks (${BUDGET_CHUNKS} × the chunk ` +
    `file size for ChunkCache; ${BUDGET_CHUNKS} MiB of chunk bytes for the plain LRU; ` +
    `ChunkCache keeps its default low watermark 80% and trim interval). Workload, seeded: ` +
    `${WARMUP_STEPS} warm-up steps of tail reads (not counted), then steps of ` +
    `${SCAN_READS_PER_STEP} sequential ${SCAN_READ / MiB} MiB reads of one backfill scanner ` +
    `(from byte 0 through all ${SEGMENTS * SEGMENT_SIZE / MiB} MiB) and one ${TAIL_READ / 1024} ` +
    `KiB read by each of ${TAIL_READERS} tail readers at a random record in the newest ` +
    `${HOT_CHUNKS} chunks, until the scan ends. Every read (and the cache's background work) ` +
    `is awaited before the next, so each hit or miss (one per chunk a read touches, counted ` +
    `the same way for both) belongs to one read. Value: hits ÷ (hits + misses) over all ` +
    `counted reads. The plain LRU (bench/read_cache.ts) has the same chunk geometry ` +
    `(chunkBounds), one ranged GET per missing chunk and a single recency list; the ChunkCache ` +
    `run gives no reader ids (no readahead), so only the eviction policy differs; a run with ` +
    `readahead for the scanner is in the details.`;
  const details = {
    method,
    settings: {
      chunk_size: `${CHUNK / MiB} MiB`,
      budget_chunks: BUDGET_CHUNKS,
      hot_chunks: HOT_CHUNKS,
      tail_readers: TAIL_READERS,
      scanner_reads_per_step: SCAN_READS_PER_STEP,
    },
    peers: { plain_lru: "single-list LRU chunk cache over the same store and geometry" },
    results,
  };
  recordResult(
    "cache_hit_ratio_mixed",
    tierd.overall,
    `≥ ${lru.overall} (plain LRU, same run)`,
    {
      ...details,
      notes: `tierd ${tierd.overall} (tail readers ${tierd.tail}) vs plain LRU ${lru.overall} ` +
        `(tail readers ${lru.tail})`,
    },
  );
  const ratio = tierd.overall / Math.max(1e-9, lru.overall);
  recordResult("cache_hit_ratio_mixed_vs_lru", round(ratio, 3), "≥ 1.0", {
    ...details,
    notes: `hit ratio tierd ${tierd.overall} ÷ plain LRU ${lru.overall}; tail readers alone ` +
      `${tierd.tail} vs ${lru.tail}`,
  });
  return tierd.overall;
}
