// Shared set-up of the read benchmarks: one partition of Iggy 0.9 segments (or, for the
// concurrent scan, 16 partitions: SCAN16_LAYOUT), copied to the bench store and partly evicted
// by the real agent (`tierd run`, the compiled binary, over a hard-linked copy of the generated
// data directory), then served by fresh `tierd run` processes — each with its own empty chunk
// cache — that the benchmarks read through the HTTP API exactly as a consumer would.
import { join } from "node:path";
import { concatBytes } from "../src/base/bytes.ts";
import { freePort } from "../test/fixtures/_server.ts";
import { codecFor } from "../src/format/codecs.ts";
import type { IndexEntry } from "../src/format/types.ts";
import { partitionRoot } from "../src/layout/object_keys.ts";
import { startTierdRun } from "./_proc.ts";
import { ensureSegments, type SegmentSet, type SegmentSetSpec, WORK_DIR } from "./_segments.ts";
import { benchSegmentSize, median, MiB, progress, round } from "./_stats.ts";
import { type BenchStore, emptyPrefix, listPrefix, openBenchStore } from "./_store.ts";

/** Segment size of the read partition: 64 MiB (TIERD_BENCH_SEGMENT_MIB in a smoke run). */
const READ_SEGMENT = benchSegmentSize(64 * MiB);
/** The partition the read benchmarks use: 24 sealed segments of 64 MiB, 4 KiB payloads. */
export const READ_LAYOUT: SegmentSetSpec = {
  name: `read-1p-24x${READ_SEGMENT / MiB}MiB`,
  partitions: 1,
  sealedPerPartition: 24,
  segmentSize: READ_SEGMENT,
  payloadSize: 4096,
};
/** `local_retention_size` of the topic (300 MiB): the newest ~4 sealed segments stay local. */
export const LOCAL_RETENTION = `${round(READ_SEGMENT / MiB * 300 / 64, 3)} MiB`;
/** Segment size of the 16-partition layout: 32 MiB (TIERD_BENCH_SEGMENT_MIB in a smoke run). */
const SCAN16_SEGMENT = benchSegmentSize(32 * MiB);
/**
 * The concurrent scan's partitions: 16 partitions of 3 sealed segments of 32 MiB each, 4 KiB
 * payloads (1.5 GiB sealed in all).
 */
export const SCAN16_LAYOUT: SegmentSetSpec = {
  name: `read-16p-3x${SCAN16_SEGMENT / MiB}MiB`,
  partitions: 16,
  sealedPerPartition: 3,
  segmentSize: SCAN16_SEGMENT,
  payloadSize: 4096,
};
/**
 * `local_retention_size` of the 16-partition topic: 1.5 segments (48 MiB), so in every partition
 * the newest sealed segment (and the active one) stays local and the 2 oldest are evicted: 32
 * segments, 1 GiB in all.
 */
export const SCAN16_LOCAL_RETENTION = `${round(SCAN16_SEGMENT / MiB * 1.5, 3)} MiB`;
/** Segments the agent evicts per partition of {@link SCAN16_LAYOUT}. */
export const SCAN16_EVICTED_PER_PARTITION = 2;
const FORMAT = "iggy-0.9" as const;
/** The agent's `cluster_id` (it names the objects' keys). */
const CLUSTER_ID = "bench";

/** Which data {@link prepareReadData} sets up (default: {@link READ_LAYOUT}). */
export interface ReadDataOptions {
  /** The segments: one or more partitions of one topic. @default READ_LAYOUT */
  layout?: SegmentSetSpec;
  /** The topic's `local_retention_size`. @default LOCAL_RETENTION */
  localRetention?: string;
  /**
   * Segments the agent must have evicted in every partition before the set-up counts as
   * settled; without it, any eviction with every sealed segment copied (stable for 1.5 s).
   */
  evictedPerPartition?: number;
}

/** One sealed segment of the read partition. */
export interface ReadSegment {
  start: bigint;
  /** The generated `.log` (the original, not the run's hard link, so it survives eviction). */
  logPath: string;
  size: number;
  /** Every index entry (the generator indexes every batch): offset → byte position. */
  entries: IndexEntry[];
  /** Evicted by the agent: only in the store. */
  evicted: boolean;
  /** Object key of the `.log` copy. */
  key: string;
}

/** One partition after the set-up. */
export interface ReadPartition {
  partition: number;
  /** Its sealed segments in offset order. */
  segments: ReadSegment[];
  /** First offset of its first local segment: the evicted range is [0, this). */
  firstLocalOffset: bigint;
}

/** The partition after the set-up: tiered and partly evicted. */
export interface ReadData {
  bench: string;
  store: BenchStore;
  set: SegmentSet;
  runDir: string;
  /** The run's broker directory (hard links; evicted segments are unlinked here). */
  dataDir: string;
  stateDir: string;
  prefix: string;
  /** The topic's `local_retention_size`. */
  localRetention: string;
  /** The first partition's segments (the only partition of {@link READ_LAYOUT}). */
  segments: ReadSegment[];
  /** The first partition's first local offset: the evicted range is [0, this). */
  firstLocalOffset: bigint;
  stream: number;
  topic: number;
  /** The first partition's id (0). */
  partition: number;
  /** Every partition of the layout, in id order (`partitions[0]` is the one above). */
  partitions: ReadPartition[];
  /** Seconds the agent took to copy and evict (first start to settled). */
  tieringSeconds: number;
  /** Deletes the run directory and the objects, stops MinIO. */
  close(): Promise<void>;
}

/** Per-server settings. */
export interface ServerOptions {
  /** Names the config and cache directory. */
  name: string;
  /** `cache.readahead_max`; tierd's default when undefined. */
  readaheadMax?: number;
  /** `cache.chunk_size`, e.g. `"8 MiB"`; tierd's default when undefined. */
  chunkSize?: string;
  /** The S3 endpoint (a delay proxy); the bench store's when undefined. */
  endpoint?: string;
  /** Keep the cache directory of an earlier server of this name (default: a fresh one). */
  keepCache?: boolean;
}

/** A running `tierd run`. */
export interface TierdServer {
  url: string;
  pid: number;
  cacheDir: string;
  /** The last lines tierd logged. */
  logTail(): string;
  /** SIGTERM and wait. */
  stop(): Promise<void>;
}

async function linkTree(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const e of Deno.readDir(from)) {
    const a = join(from, e.name);
    const b = join(to, e.name);
    if (e.isDirectory) await linkTree(a, b);
    else if (e.isFile) await Deno.link(a, b);
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/** A free TCP port on 127.0.0.1 (bound and released; a race is possible but unlikely). */
function configText(data: ReadData, port: number, cacheDir: string, o: ServerOptions): string {
  const lines = [
    "[agent]",
    `data_dir = ${JSON.stringify(data.dataDir)}`,
    `state_dir = ${JSON.stringify(data.stateDir)}`,
    `listen = "127.0.0.1:${port}"`,
    `cluster_id = ${JSON.stringify(CLUSTER_ID)}`,
    'seal_quiescence = "0 s"',
    `format = "${FORMAT}"`,
    'log_level = "warn"',
    "",
    "[tiered_storage]",
    "enabled = true",
    'backend = "s3"',
    "",
    "[tiered_storage.s3]",
    `bucket = ${JSON.stringify(data.store.bucket)}`,
    `region = ${JSON.stringify(data.store.region)}`,
    `endpoint = ${JSON.stringify(o.endpoint ?? data.store.endpoint)}`,
    'url_style = "path"',
    `prefix = ${JSON.stringify(data.prefix)}`,
    "",
    "[tiered_storage.cache]",
    `path = ${JSON.stringify(cacheDir)}`,
  ];
  if (o.readaheadMax !== undefined) lines.push(`readahead_max = ${o.readaheadMax}`);
  if (o.chunkSize !== undefined) lines.push(`chunk_size = ${JSON.stringify(o.chunkSize)}`);
  lines.push(
    "",
    "[[topic]]",
    `stream = ${data.stream}`,
    `topic = ${data.topic}`,
    `local_retention_size = ${JSON.stringify(data.localRetention)}`,
    "",
  );
  return lines.join("\n");
}

/**
 * Starts `tierd run` (the compiled binary) over the read partition and waits for `/readyz`.
 * @throws {Error} when it exits or is not ready within two minutes
 */
export async function startServer(data: ReadData, o: ServerOptions): Promise<TierdServer> {
  const port = freePort();
  const cacheDir = join(data.runDir, `cache-${o.name}`);
  if (!o.keepCache) await Deno.remove(cacheDir, { recursive: true }).catch(() => {});
  const config = join(data.runDir, `tierd-${o.name}.toml`);
  await Deno.writeTextFile(config, configText(data, port, cacheDir, o));
  const url = `http://127.0.0.1:${port}`;
  const run = await startTierdRun({
    config,
    name: o.name,
    env: {
      TIERD_S3_ACCESS_KEY: data.store.accessKey,
      TIERD_S3_SECRET_KEY: data.store.secretKey,
    },
    ready: async () => {
      try {
        const res = await fetch(`${url}/readyz`);
        await res.body?.cancel();
        return res.ok;
      } catch {
        return false; // not listening yet
      }
    },
    timeoutMs: 120_000,
  });
  return { url, cacheDir, ...run };
}

/** One partition of `GET /v1/partitions` (the fields the benchmarks read). */
export interface PartitionInfo {
  partition: number;
  segments: { local: number; uploaded: number; remote: number; dangling: number };
  incarnation: string | null;
  remote_bytes: string;
}

/**
 * `GET /v1/partitions`: every partition, `count` of them.
 * @throws {Error} when the answer is not a list of `count`
 */
export async function partitionInfos(server: TierdServer, count: number): Promise<PartitionInfo[]> {
  const res = await fetch(`${server.url}/v1/partitions`);
  const list = await res.json();
  if (!Array.isArray(list) || list.length !== count) {
    throw new Error(`/v1/partitions answered ${JSON.stringify(list).slice(0, 500)}`);
  }
  return list;
}

/** `GET /v1/partitions` of the read partition. */
export async function partitionInfo(server: TierdServer): Promise<PartitionInfo> {
  return (await partitionInfos(server, 1))[0];
}

/** Parses Prometheus text into `name{labels}` → value (sums of matching series by prefix). */
export async function metrics(server: TierdServer): Promise<Map<string, number>> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** The sum of every series whose name (before `{`) is `name`. */
export function metricSum(m: Map<string, number>, name: string, labelFilter = ""): number {
  let sum = 0;
  for (const [k, v] of m) {
    const base = k.includes("{") ? k.slice(0, k.indexOf("{")) : k;
    if (base === name && k.includes(labelFilter)) sum += v;
  }
  return sum;
}

/**
 * Waits until tierd's background work (chunk hydration, readahead) has settled: the store
 * request count and the cache's bytes unchanged over `quietMs`.
 */
export async function waitSettled(server: TierdServer, quietMs = 60, maxMs = 30_000) {
  const deadline = Date.now() + maxMs;
  let last = "";
  for (;;) {
    const m = await metrics(server);
    const now = `${metricSum(m, "tierd_store_requests_total")}/${
      metricSum(m, "tierd_cache_bytes")
    }`;
    if (now === last || Date.now() > deadline) return;
    last = now;
    await new Promise((resolve) => setTimeout(resolve, quietMs));
  }
}

/**
 * Generates (or reuses) the segments, links them into a fresh broker directory, runs the agent
 * until every sealed segment of every partition is copied and the oldest are evicted, then stops
 * it. By default the single read partition ({@link READ_LAYOUT}, {@link LOCAL_RETENTION}).
 * @throws {Error} when the agent does not settle within ten minutes
 */
export async function prepareReadData(
  bench: string,
  options: ReadDataOptions = {},
): Promise<ReadData> {
  const layout = options.layout ?? READ_LAYOUT;
  const localRetention = options.localRetention ?? LOCAL_RETENTION;
  const store = await openBenchStore();
  try {
    progress(bench, `store: ${store.describe}`);
    const set = await ensureSegments(layout);
    const id = `${bench}-${Date.now().toString(36)}`;
    const runDir = join(WORK_DIR, "runs", id);
    await Deno.remove(runDir, { recursive: true }).catch(() => {});
    const dataDir = join(runDir, "broker");
    await linkTree(set.dataDir, dataDir);
    const prefix = `bench-read/${id}`;
    const data: ReadData = {
      bench,
      store,
      set,
      runDir,
      dataDir,
      stateDir: join(runDir, "state"),
      prefix,
      localRetention,
      segments: [],
      firstLocalOffset: 0n,
      stream: set.stream,
      topic: set.topic,
      partition: 0,
      partitions: [],
      tieringSeconds: 0,
      close: async () => {
        await emptyPrefix(store.client, prefix + "/").catch(() => {});
        await Deno.remove(runDir, { recursive: true }).catch(() => {});
        await store.stop();
      },
    };
    const sealed = layout.sealedPerPartition;
    const count = layout.partitions;
    progress(
      bench,
      `tiering ${set.sealed.length} segments${count > 1 ? ` in ${count} partitions` : ""} ` +
        `(local_retention_size ${localRetention})…`,
    );
    const began = performance.now();
    const server = await startServer(data, { name: "setup" });
    try {
      let infos = await partitionInfos(server, count);
      const deadline = Date.now() + 600_000;
      let stableSince = 0;
      let last = "";
      for (;;) {
        infos = await partitionInfos(server, count);
        const now = JSON.stringify(infos.map((i) => i.segments));
        const done = infos.every(({ segments: s }) =>
          s.remote > 0 && s.uploaded + s.remote === sealed && s.dangling === 0 &&
          (options.evictedPerPartition === undefined || s.remote === options.evictedPerPartition)
        );
        if (done && now === last) {
          if (Date.now() - stableSince > 1500) break;
        } else {
          stableSince = Date.now();
        }
        last = now;
        if (Date.now() > deadline) {
          throw new Error(`tiering did not settle: ${now}; log: ${server.logTail()}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      data.tieringSeconds = (performance.now() - began) / 1000;
      const shown = count === 1 ? JSON.stringify(infos[0].segments) : `${count} partitions, ` +
        JSON.stringify(infos.reduce(
          (t, { segments: s }) => ({
            local: t.local + s.local,
            uploaded: t.uploaded + s.uploaded,
            remote: t.remote + s.remote,
            dangling: t.dangling + s.dangling,
          }),
          { local: 0, uploaded: 0, remote: 0, dangling: 0 },
        ));
      progress(bench, `tiered in ${data.tieringSeconds.toFixed(1)} s: ${shown}`);
    } finally {
      await server.stop();
    }
    // Segment facts, from the generated files and the store's listing.
    const { keys } = await listPrefix(store.client, prefix + "/");
    const codec = codecFor(FORMAT);
    for (let p = 0; p < count; p++) {
      const root = partitionRoot({
        prefix,
        clusterId: CLUSTER_ID,
        stream: set.stream,
        topic: set.topic,
        partition: p,
      });
      const segments: ReadSegment[] = [];
      for (const s of set.sealed.filter((x) => x.partition === p)) {
        const name = s.logPath.slice(s.logPath.lastIndexOf("/") + 1);
        const start = BigInt(name.replace(/\.log$/, ""));
        const key = keys.find((k) => k.startsWith(root) && k.endsWith("/" + name));
        if (!key) throw new Error(`no object for ${name} under ${root}`);
        const entries = codec.parseIndex(await Deno.readFile(s.indexPath), {
          file: s.indexPath,
          startOffset: start,
          logSize: s.size,
        });
        const rel = s.logPath.slice(set.dataDir.length);
        segments.push({
          start,
          logPath: s.logPath,
          size: s.size,
          entries,
          evicted: !(await exists(join(dataDir, rel))),
          key,
        });
      }
      segments.sort((a, b) => (a.start < b.start ? -1 : 1));
      const firstLocal = segments.find((s) => !s.evicted);
      if (!firstLocal || !segments[0].evicted) {
        throw new Error(
          `expected the oldest segments of partition ${p} evicted and the newest local`,
        );
      }
      data.partitions.push({ partition: p, segments, firstLocalOffset: firstLocal.start });
    }
    data.segments = data.partitions[0].segments;
    data.firstLocalOffset = data.partitions[0].firstLocalOffset;
    data.partition = data.partitions[0].partition;
    return data;
  } catch (err) {
    await store.stop().catch(() => {});
    throw err;
  }
}

/** The records endpoint of the read partition (or of partition `partition`). */
export function recordsUrl(
  data: ReadData,
  server: TierdServer,
  offset: bigint,
  maxBytes: number,
  partition = data.partition,
) {
  return `${server.url}/v1/streams/${data.stream}/topics/${data.topic}/partitions/` +
    `${partition}/records?offset=${offset}&max_bytes=${maxBytes}`;
}

/** A fetch timed to its first body byte and to its last. */
export interface TimedFetch {
  /** ms from the call to the first body byte. */
  ttfbMs: number;
  /** ms from the call to the end of the body. */
  totalMs: number;
  status: number;
  headers: Headers;
  body: Uint8Array;
}

/** Fetches `url`, timing the first body byte and the whole body. */
export async function timedFetch(url: string, init?: RequestInit): Promise<TimedFetch> {
  const t0 = performance.now();
  const res = await fetch(url, init);
  const reader = res.body!.getReader();
  const parts: Uint8Array[] = [];
  let first = await reader.read();
  const ttfb = performance.now();
  while (!first.done) {
    parts.push(first.value);
    first = await reader.read();
  }
  const total = performance.now();
  const body = concatBytes(parts);
  return { ttfbMs: ttfb - t0, totalMs: total - t0, status: res.status, headers: res.headers, body };
}

/** Reads `length` bytes at `position` of a file. */
export async function readRange(path: string, position: number, length: number) {
  const file = await Deno.open(path);
  try {
    await file.seek(position, Deno.SeekMode.Start);
    const buf = new Uint8Array(length);
    let at = 0;
    while (at < length) {
      const n = await file.read(buf.subarray(at));
      if (n === null) break;
      at += n;
    }
    return buf.subarray(0, at);
  } finally {
    file.close();
  }
}

/**
 * The bytes tierd answers for a read at the record starting at `position` with `maxBytes`
 * (whole records while they fit, at least one), from the generated file.
 */
export async function expectedAnswer(
  seg: ReadSegment,
  position: number,
  maxBytes: number,
): Promise<Uint8Array> {
  const codec = codecFor(FORMAT);
  const buf = await readRange(seg.logPath, position, maxBytes + 4 * MiB);
  let taken = 0;
  while (taken + codec.headerSize <= buf.length) {
    const info = codec.recordHeader(buf.subarray(taken, taken + codec.headerSize), {
      file: seg.logPath,
      position: position + taken,
    });
    if (taken > 0 && taken + info.size > maxBytes) break;
    taken += info.size;
    if (taken >= maxBytes) break;
  }
  return buf.subarray(0, taken);
}

/** True when both arrays hold the same bytes. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The index entry nearest after byte `position` of a segment. */
export function entryAt(seg: ReadSegment, position: number): IndexEntry {
  const e = seg.entries.find((x) => x.position >= position);
  if (!e) throw new Error(`no record at or after ${position} in segment ${seg.start}`);
  return e;
}

/** Quantiles for the details. */
export function summary(values: number[], digits = 2) {
  const s = [...values].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  const r = (v: number) => Math.round(v * 10 ** digits) / 10 ** digits;
  return {
    n: s.length,
    min: r(s[0]),
    p25: r(q(0.25)),
    median: r(median(s)),
    p75: r(q(0.75)),
    max: r(s[s.length - 1]),
  };
}
