// `readahead_scan_ratio` and `cold_scan_ratio_vs_direct_get`: MB/s of a sequential cold scan of
// the whole evicted range through tierd's HTTP API by a plain client — no `x-tierd-reader`
// header, each read starting at the previous answer's `x-tierd-next-offset`, so tierd's adaptive
// readahead (`cache.readahead_max` default) follows it by continuity —
//   ÷ the same scan with readahead defeated (each request names a new `x-tierd-reader`, so no
//     read continues an earlier one): `readahead_scan_ratio`;
//   ÷ a direct streamed GET of the same `.log` objects, one after another (presigned, the body
//     consumed as a stream): the machine's own limit, `cold_scan_ratio_vs_direct_get`.
// Each tierd scan runs on a fresh `tierd run` (the compiled binary) with an empty cache
// directory, over the same objects. Loopback MinIO answers in well under a millisecond, which
// hides what readahead is for, so the headlines put a delay proxy (bench/read_proxy.ts, a
// separate process) in front of MinIO that holds every request for a fixed time, emulating a
// real store's first-byte latency; the scans straight against MinIO are recorded too
// (`readahead_scan_ratio_no_added_latency`, `cold_scan_ratio_vs_direct_get_no_added_latency`).
// `cold_scan_ratio_vs_direct_get_16x` is the same comparison under concurrency, on a topic of 16
// partitions (SCAN16_LAYOUT): 16 plain clients scanning the 16 partitions at once through one
// fresh tierd ÷ 16 parallel direct GET streams of the same objects, aggregate MB/s, both behind
// the delay proxy. `cold_scan_cpu_seconds_per_gib` is tierd's CPU per GiB over the single-client
// scans, and `cold_scan_cpu_ratio_vs_caching_relay` sets it against the least an agent that keeps
// what it fetches costs on this machine (bench/caching_relay.ts under Bun, scanned the same way).
import { join } from "node:path";
import process from "node:process";
import { S3Store } from "../providers/s3/store.ts";
import { ChunkCache, chunkCacheOptions } from "../src/cache/mod.ts";
import { isSequential, type ReaderState } from "../src/cache/readahead.ts";
import type { ChunkSource, RangeReader, RangeReadOptions } from "../src/cache/types.ts";
import { loadConfig } from "../src/config/load.ts";
import { createReadContext } from "../src/read/context.ts";
import { readRecords } from "../src/read/read_records.ts";
import { NO_GOAL, recordResult } from "./_results.ts";
import { median, MiB, progress, round } from "./_stats.ts";
import { bunExecutable, readCpu, readStatus, waitForQuiet } from "./_proc.ts";
import {
  LOCAL_RETENTION,
  metrics,
  metricSum,
  prepareReadData,
  READ_LAYOUT,
  type ReadData,
  type ReadPartition,
  type ReadSegment,
  recordsUrl,
  SCAN16_EVICTED_PER_PARTITION,
  SCAN16_LAYOUT,
  SCAN16_LOCAL_RETENTION,
  startServer,
  summary,
  type TierdServer,
  waitSettled,
} from "./read_common.ts";
import { type DelayProxy, startDelayProxy } from "./read_proxy.ts";

/** The consumer's request size (the API's default max_bytes). */
const MAX_BYTES = 1 * MiB;
/** Added store latency of the headline, per request (one way, before the store sees it). */
const DELAY_MS = 10;

/** Options of {@link runReadScanBench}. */
export interface ReadScanBenchOptions {
  /** Scans of each kind per added latency; the median counts. @default 2 */
  rounds?: number;
}

/**
 * The kinds of scan: through tierd with readahead, through tierd without, the store itself, and
 * the least a caching agent does (bench/caching_relay.ts).
 */
type ScanKind = "plain" | "off" | "direct" | "relay";

const KIND_LABEL: Record<ScanKind, string> = {
  plain: "tierd, plain client (no reader header: readahead by continuity, readahead_max 4)",
  off: "tierd, readahead defeated (a new x-tierd-reader on every request)",
  direct: "direct streamed GET of each .log, one after another",
  relay: "a caching relay (Bun): each .log streamed through, kept as 8 MiB files (direct I/O)",
};

/** What the agent did over a tierd scan: its CPU, and from its metrics. */
interface AgentWork {
  /** The agent's CPU seconds (user + system) over the scan. */
  cpuSeconds?: number;
  /** Of those, the kernel's (system time). */
  systemSeconds?: number;
  /** Minor page faults over the scan: mostly first touches of memory new to the process. */
  minorFaults?: number;
  /** The agent's resident high-water mark at the scan's end, MiB (each scan has a fresh agent). */
  peakRssMiB?: number;
  storeGets: number;
  /** Full collections the agent's memory guard asked for during the scan. */
  collections: number;
  cacheHits: number;
  cacheMisses: number;
  fetches: Record<string, number>;
}

type CpuSample = Awaited<ReturnType<typeof readCpu>>;

/** A process's CPU seconds (user + system) between two samples, and the kernel's part of them. */
function cpuBetween(
  cpu0: CpuSample,
  cpu1: CpuSample,
): Pick<AgentWork, "cpuSeconds" | "systemSeconds" | "minorFaults"> {
  if (!cpu0 || !cpu1) return {};
  return {
    cpuSeconds: round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 2),
    systemSeconds: round(cpu1.system - cpu0.system, 2),
    minorFaults: cpu1.minorFaults - cpu0.minorFaults,
  };
}

/**
 * Runs `scan` against `server` (settled before and after) and measures it: its wall time (from
 * the start of `scan` to its end) and what the agent did meanwhile.
 */
async function measured<T>(
  server: TierdServer,
  scan: () => Promise<T>,
): Promise<{ result: T; seconds: number; agent: AgentWork }> {
  await waitSettled(server);
  const before = await metrics(server);
  const cpu0 = await readCpu(server.pid);
  const t0 = performance.now();
  const result = await scan();
  const seconds = (performance.now() - t0) / 1000;
  const cpu1 = await readCpu(server.pid);
  const hwm = (await readStatus(server.pid))?.hwm;
  await waitSettled(server);
  const after = await metrics(server);
  const d = (name: string, filter = "") =>
    metricSum(after, name, filter) - metricSum(before, name, filter);
  return {
    result,
    seconds,
    agent: {
      ...cpuBetween(cpu0, cpu1),
      peakRssMiB: hwm === undefined ? undefined : round(hwm / 1024, 1),
      storeGets: d("tierd_store_requests_total", 'op="get"'),
      collections: d("tierd_memory_collections_total"),
      cacheHits: d("tierd_cache_hits_total"),
      cacheMisses: d("tierd_cache_misses_total"),
      fetches: {
        ok: d("tierd_fetches_total", 'outcome="ok"'),
        aborted: d("tierd_fetches_total", 'outcome="aborted"'),
        error: d("tierd_fetches_total", 'outcome="error"'),
        cache_full: d("tierd_fetches_total", 'outcome="cache_full"'),
      },
    },
  };
}

interface Scan extends Partial<AgentWork> {
  kind: ScanKind;
  readahead: string;
  delayMs: number;
  bytes: number;
  requests: number;
  seconds: number;
  mbps: number;
}

/**
 * One scan through tierd, on a fresh server. Readahead is per reader: with `kind` "plain" the
 * reads carry no header, and each starts at the previous answer's next offset, which tierd takes
 * as the same reader going on (adaptive readahead, tierd's default readahead_max); with "off"
 * every read names a reader of its own, so none continues another and readahead never opens
 * (the config refuses readahead_max = 0).
 */
async function scanOnce(
  data: ReadData,
  kind: "plain" | "off",
  proxy: DelayProxy | undefined,
  name: string,
): Promise<Scan> {
  const server = await startServer(data, { name, endpoint: proxy?.endpoint });
  try {
    const { result: [bytes, requests], seconds, agent } = await measured(server, async () => {
      let offset = 0n;
      let bytes = 0;
      let requests = 0;
      while (offset < data.firstLocalOffset) {
        const headers: Record<string, string> = kind === "off"
          ? { "x-tierd-reader": `scan-off-${requests}` }
          : {};
        const res = await fetch(recordsUrl(data, server, offset, MAX_BYTES), { headers });
        const body = await res.arrayBuffer();
        if (res.status !== 200) {
          throw new Error(
            `scan at ${offset} answered ${res.status}: ${
              new TextDecoder().decode(body).slice(0, 300)
            }`,
          );
        }
        bytes += body.byteLength;
        requests++;
        offset = BigInt(res.headers.get("x-tierd-next-offset")!);
      }
      return [bytes, requests] as const;
    });
    return {
      kind,
      readahead: kind === "plain"
        ? "on: no header, continuity (readahead_max 4, default)"
        : "off: a new x-tierd-reader per request",
      delayMs: proxy?.delayMs ?? 0,
      bytes,
      requests,
      seconds: round(seconds, 3),
      mbps: round(bytes / 1e6 / seconds, 1),
      ...agent,
    };
  } finally {
    await stopAndDropCache(server);
  }
}

/**
 * Stops a scan's server and deletes its chunk cache. A host that runs for long recycles its page
 * cache; left in place, each scan's cache would keep its pages and the next scan's writes would
 * take memory the machine never touched before, which a VM charges for many times over (the
 * machine's own first and repeated file writes are in the details).
 */
async function stopAndDropCache(server: TierdServer): Promise<void> {
  await server.stop();
  await Deno.remove(server.cacheDir, { recursive: true }).catch(() => {});
}

/**
 * The peer: every evicted `.log` object fetched whole, in offset order, one at a time, through
 * the same endpoint tierd reads from (the delay proxy, or MinIO itself), each by a presigned URL
 * with Deno's fetch, its body consumed as a stream and counted (checked against the size);
 * timed from the first request to the last body byte.
 */
async function directScan(data: ReadData, proxy: DelayProxy | undefined): Promise<Scan> {
  const store = directStore(data, proxy);
  const evicted = data.segments.filter((s) => s.evicted);
  const scan = await timedWholeScan(
    evicted,
    presignedUrl(store),
    "direct GET",
  );
  return {
    kind: "direct",
    readahead: "n/a: the store itself",
    delayMs: proxy?.delayMs ?? 0,
    ...scan,
  };
}

/** {@link getWholeInOrder}, timed from the first request to the last body byte. */
async function timedWholeScan(
  segments: ReadSegment[],
  urlOf: (seg: ReadSegment, i: number) => Promise<string> | string,
  what: string,
): Promise<Pick<Scan, "bytes" | "requests" | "seconds" | "mbps">> {
  const t0 = performance.now();
  const bytes = await getWholeInOrder(segments, urlOf, what);
  const seconds = (performance.now() - t0) / 1000;
  return {
    bytes,
    requests: segments.length,
    seconds: round(seconds, 3),
    mbps: round(bytes / 1e6 / seconds, 1),
  };
}

/**
 * The machine's own limit for a caching agent: bench/caching_relay.ts under Bun (the runtime of
 * the shipped binary) streams every evicted `.log` object (presigned, through the same endpoint
 * tierd reads from) to a client, one after another, keeping each 8 MiB of it as a new file in
 * a fresh directory (deleted after, as a tierd scan's cache is); its CPU is read as the agent's.
 */
async function relayScan(data: ReadData, proxy: DelayProxy | undefined): Promise<Scan> {
  const store = directStore(data, proxy);
  const evicted = data.segments.filter((s) => s.evicted);
  const urls = join(data.runDir, "relay-urls.txt");
  await Deno.writeTextFile(
    urls,
    (await Promise.all(evicted.map(presignedUrl(store)))).join("\n"),
  );
  const cacheDir = join(data.runDir, "relay-cache");
  const relay = new Deno.Command(await bunExecutable(), {
    args: [join(import.meta.dirname!, "caching_relay.ts"), urls, cacheDir],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const output = relay.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    const first = (await output.read()).value ?? "";
    const port = /listening (\d+)/.exec(first)?.[1];
    if (!port) throw new Error(`caching_relay.ts did not start: ${first}`);
    const cpu0 = await readCpu(relay.pid);
    const scan = await timedWholeScan(
      evicted,
      (_, i) => `http://127.0.0.1:${port}/${i}`,
      "relay GET",
    );
    const cpu1 = await readCpu(relay.pid);
    return {
      kind: "relay",
      readahead: "n/a: one streamed GET per object",
      delayMs: proxy?.delayMs ?? 0,
      ...scan,
      ...cpuBetween(cpu0, cpu1),
    };
  } finally {
    relay.kill("SIGKILL");
    await relay.status;
    await output.cancel().catch(() => {});
    await Deno.remove(cacheDir, { recursive: true }).catch(() => {});
  }
}

/** A segment's `.log` by a presigned GET (an hour's expiry) of `store`. */
function presignedUrl(store: S3Store): (seg: ReadSegment) => Promise<string> {
  return (seg) => store.presignGet(seg.key, 3600);
}

/** The S3 client the direct GETs use: through the delay proxy, or MinIO itself. */
function directStore(data: ReadData, proxy: DelayProxy | undefined): S3Store {
  return proxy
    ? new S3Store({
      endpoint: proxy.endpoint,
      region: data.store.region,
      bucket: data.store.bucket,
      credentials: { accessKeyId: data.store.accessKey, secretAccessKey: data.store.secretKey },
      urlStyle: "path",
    })
    : data.store.client;
}

/**
 * Fetches each segment's `.log` object whole, one after another, from `urlOf` (a presigned URL,
 * or the relay's): Deno fetch, the body consumed as a stream and counted, its length checked.
 * @param what names the GET in errors
 * @returns the bytes read
 * @throws {Error} on an answer other than 200 or a body of the wrong length
 */
async function getWholeInOrder(
  segments: ReadSegment[],
  urlOf: (seg: ReadSegment, i: number) => Promise<string> | string,
  what: string,
): Promise<number> {
  let bytes = 0;
  for (const [i, seg] of segments.entries()) {
    const res = await fetch(await urlOf(seg, i));
    if (res.status !== 200 || !res.body) {
      throw new Error(`${what} of ${seg.key} answered ${res.status}: ${await res.text()}`);
    }
    const reader = res.body.getReader();
    let n = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      n += value.byteLength;
    }
    if (n !== seg.size) throw new Error(`${what} of ${seg.key}: ${n} bytes, not ${seg.size}`);
    bytes += n;
  }
  return bytes;
}

/**
 * Why readahead does (not) help, in-process (Deno, same read path and ChunkCache):
 * 1. a scan of two evicted segments through `readRecords` with a reader id, logging the ranges
 *    the read path asks the cache for, and how many of them readahead counts as sequential;
 * 2. the cache alone, read sequentially (consecutive, non-overlapping 1 MiB ranges) with and
 *    without a reader id, through the delay proxy: what readahead gives when it engages.
 */
async function diagnose(data: ReadData, config: string) {
  const env = {
    ...Deno.env.toObject(),
    TIERD_S3_ACCESS_KEY: data.store.accessKey,
    TIERD_S3_SECRET_KEY: data.store.secretKey,
  };
  const cfg = await loadConfig(config, env);
  const evicted = data.segments.filter((s) => s.evicted);
  const partition = { stream: data.stream, topic: data.topic, partition: data.partition };
  const dir = (name: string) => join(data.runDir, `cache-diag-${name}`);
  // 1. What the read path asks of the cache.
  const calls: { key: string; start: number; end: number }[] = [];
  const cache1 = await ChunkCache.open(data.store.client, {
    ...chunkCacheOptions(cfg.tiered_storage),
    path: dir("walk"),
  });
  let readPath: {
    requests: number;
    cache_reads: number;
    cache_reads_sequential_by_isSequential: number;
    first_cache_reads: string[];
    prefetches_started: number;
    first_fetch_answers: number;
    store_fetches_ok: number;
  };
  try {
    const logging: RangeReader = {
      read(src: ChunkSource, start: number, length: number, o?: RangeReadOptions) {
        calls.push({ key: src.key, start, end: Math.min(src.size, start + length) });
        return cache1.read(src, start, length, o);
      },
    };
    const ctx = createReadContext({
      config: cfg,
      store: data.store.client,
      prefix: data.prefix,
      reader: logging,
    });
    let offset = evicted[0].start;
    let requests = 0;
    while (offset < evicted[2].start) {
      const r = await readRecords(ctx, {
        partition,
        offset,
        maxBytes: MAX_BYTES,
        readerId: "diag",
      });
      offset = r.nextOffset;
      requests++;
    }
    await cache1.idle();
    let prev: ReaderState | undefined;
    let sequential = 0;
    for (const c of calls) {
      const step = {
        key: c.key,
        start: c.start,
        end: c.end,
        firstChunk: 0,
        lastChunk: 0,
        chunks: 1,
      };
      if (isSequential(prev, step)) sequential++;
      prev = { key: c.key, end: c.end, lastChunk: 0, window: 0 };
    }
    const st = cache1.stats();
    readPath = {
      requests,
      cache_reads: calls.length,
      cache_reads_sequential_by_isSequential: sequential,
      first_cache_reads: calls.slice(0, 6).map((c) => `[${c.start}, ${c.end})`),
      prefetches_started: st.prefetches,
      first_fetch_answers: st.firstFetchAnswers,
      store_fetches_ok: st.fetches.ok,
    };
  } finally {
    await cache1.close();
    await Deno.remove(dir("walk"), { recursive: true }).catch(() => {});
  }
  // 2. The cache alone, sequential reads, through the delay proxy.
  const proxy = await startDelayProxy(data.store.endpoint, DELAY_MS);
  const direct: Record<string, unknown> & { ratio?: number } = {};
  try {
    const store = new S3Store({
      endpoint: proxy.endpoint,
      region: data.store.region,
      bucket: data.store.bucket,
      credentials: { accessKeyId: data.store.accessKey, secretAccessKey: data.store.secretKey },
      urlStyle: "path",
    });
    const segs = evicted.slice(4, 8);
    const sources: ChunkSource[] = [];
    for (const seg of segs) {
      const head = await data.store.client.head(seg.key);
      const starts = [0, ...seg.entries.map((e) => e.position).filter((p) => p > 0)];
      sources.push({
        key: seg.key,
        checksum: head.metadata["xxh3-128"],
        size: seg.size,
        recordStarts: () => Promise.resolve(starts),
      });
    }
    for (const readerId of ["diag-seq", undefined, "diag-seq-2", undefined]) {
      const name = readerId ? "on" : "off";
      const cache = await ChunkCache.open(store, {
        ...chunkCacheOptions(cfg.tiered_storage),
        path: dir(name),
      });
      try {
        let bytes = 0;
        const t0 = performance.now();
        for (const src of sources) {
          for (let at = 0; at < src.size; at += MAX_BYTES) {
            bytes += (await cache.read(src, at, MAX_BYTES, readerId ? { readerId } : {})).length;
          }
        }
        const mbps = bytes / 1e6 / ((performance.now() - t0) / 1000);
        const st = cache.stats();
        const list = (direct[name] ??= []) as unknown[];
        list.push({ mbps: round(mbps, 1), prefetches: st.prefetches, fetches_ok: st.fetches.ok });
        await cache.idle();
      } finally {
        await cache.close();
        await Deno.remove(dir(name), { recursive: true }).catch(() => {});
      }
    }
    const med = (k: string) => median((direct[k] as { mbps: number }[]).map((x) => x.mbps));
    direct.ratio = round(med("on") / med("off"), 3);
    direct.bytes = segs.reduce((n, x) => n + x.size, 0);
    direct.added_latency_ms = DELAY_MS;
  } finally {
    await proxy.stop();
  }
  return { read_path: readPath, cache_alone_sequential: direct };
}

/** One run of the concurrent scan: 16 clients (or 16 GET streams), one per partition, at once. */
interface ConcurrentScan extends Partial<AgentWork> {
  kind: "plain" | "direct";
  delayMs: number;
  clients: number;
  bytes: number;
  requests: number;
  /** From the first request to the last body byte of the last client. */
  seconds: number;
  /** Aggregate: all the clients' bytes ÷ `seconds`. */
  mbps: number;
  /** Each client's own MB/s (its bytes ÷ its own time). */
  clientMbps: ReturnType<typeof summary>;
  /** Each client's seconds, first request to its last body byte. */
  clientSeconds: ReturnType<typeof summary>;
  /** tierd runs only: 503 answers (each retried after its Retry-After). */
  answers503?: number;
}

/** What one client of a concurrent run did. */
interface ClientRun {
  bytes: number;
  requests: number;
  answers503: number;
  seconds: number;
}

/** Retries of 503 answers one plain client of the concurrent scan accepts before failing. */
const MAX_503_PER_CLIENT = 600;

/**
 * One plain client of the concurrent scan: scanOnce's "plain" kind on one partition (no
 * `x-tierd-reader` header, `max_bytes` 1 MiB, each read at the previous answer's
 * `x-tierd-next-offset`, from offset 0 up to the partition's first local offset); a 503 is
 * retried after its Retry-After and counted.
 * @throws {Error} on any other answer than 200 or 503
 */
async function plainClient(
  data: ReadData,
  server: TierdServer,
  part: ReadPartition,
): Promise<ClientRun> {
  const run: ClientRun = { bytes: 0, requests: 0, answers503: 0, seconds: 0 };
  let offset = 0n;
  const t0 = performance.now();
  while (offset < part.firstLocalOffset) {
    const res = await fetch(recordsUrl(data, server, offset, MAX_BYTES, part.partition));
    const body = await res.arrayBuffer();
    if (res.status === 503) {
      if (++run.answers503 > MAX_503_PER_CLIENT) {
        throw new Error(`partition ${part.partition}: more than ${MAX_503_PER_CLIENT} 503s`);
      }
      const after = Number(res.headers.get("retry-after"));
      await new Promise((resolve) => setTimeout(resolve, (after > 0 ? after : 1) * 1000));
      continue;
    }
    if (res.status !== 200) {
      throw new Error(
        `partition ${part.partition}: scan at ${offset} answered ${res.status}: ${
          new TextDecoder().decode(body).slice(0, 300)
        }`,
      );
    }
    const next = res.headers.get("x-tierd-next-offset");
    if (next === null) throw new Error(`partition ${part.partition}: no x-tierd-next-offset`);
    run.bytes += body.byteLength;
    run.requests++;
    offset = BigInt(next);
  }
  run.seconds = (performance.now() - t0) / 1000;
  return run;
}

/** The aggregate of a concurrent run's clients. */
function concurrentFigures(clients: ClientRun[], seconds: number) {
  const bytes = clients.reduce((n, c) => n + c.bytes, 0);
  return {
    clients: clients.length,
    bytes,
    requests: clients.reduce((n, c) => n + c.requests, 0),
    seconds: round(seconds, 3),
    mbps: round(bytes / 1e6 / seconds, 1),
    clientMbps: summary(clients.map((c) => c.bytes / 1e6 / c.seconds), 1),
    clientSeconds: summary(clients.map((c) => c.seconds), 3),
  };
}

/**
 * 16 plain clients, one per partition, started together on one fresh server (empty cache);
 * timed from the first request to the last body byte of the last client.
 */
async function concurrentTierdScan(
  data: ReadData,
  proxy: DelayProxy,
  name: string,
): Promise<ConcurrentScan> {
  const server = await startServer(data, { name, endpoint: proxy.endpoint });
  try {
    const { result: clients, seconds, agent } = await measured(
      server,
      () => Promise.all(data.partitions.map((p) => plainClient(data, server, p))),
    );
    return {
      kind: "plain",
      delayMs: proxy.delayMs,
      ...concurrentFigures(clients, seconds),
      answers503: clients.reduce((n, c) => n + c.answers503, 0),
      ...agent,
    };
  } finally {
    await stopAndDropCache(server);
  }
}

/**
 * The peer of the concurrent scan: 16 parallel streams, one per partition, each fetching its
 * partition's evicted `.log` objects whole, in offset order, one at a time (as directScan does),
 * through the delay proxy; timed from the first request to the last body byte of the last.
 */
async function concurrentDirectScan(data: ReadData, proxy: DelayProxy): Promise<ConcurrentScan> {
  const store = directStore(data, proxy);
  const t0 = performance.now();
  const clients = await Promise.all(data.partitions.map(async (p): Promise<ClientRun> => {
    const evicted = p.segments.filter((s) => s.evicted);
    const started = performance.now();
    const bytes = await getWholeInOrder(
      evicted,
      presignedUrl(store),
      "direct GET",
    );
    const seconds = (performance.now() - started) / 1000;
    return { bytes, requests: evicted.length, answers503: 0, seconds };
  }));
  const seconds = (performance.now() - t0) / 1000;
  return { kind: "direct", delayMs: proxy.delayMs, ...concurrentFigures(clients, seconds) };
}

/**
 * `cold_scan_ratio_vs_direct_get_16x`: 16 plain clients scanning 16 partitions at once through
 * tierd ÷ 16 parallel direct GET streams of the same objects, at +DELAY_MS per store request.
 */
async function runConcurrentScans(rounds: number): Promise<void> {
  const data = await prepareReadData("read_scan", {
    layout: SCAN16_LAYOUT,
    localRetention: SCAN16_LOCAL_RETENTION,
    evictedPerPartition: SCAN16_EVICTED_PER_PARTITION,
  });
  try {
    const n = data.partitions.length;
    const evicted = data.partitions.flatMap((p) => p.segments.filter((s) => s.evicted));
    const evictedBytes = evicted.reduce((t, s) => t + s.size, 0);
    progress(
      "read_scan",
      `concurrent: ${n} partitions, ${evicted.length} evicted segments ` +
        `(${(evictedBytes / MiB).toFixed(0)} MiB), ${n} clients at once, +${DELAY_MS} ms`,
    );
    const runs: Record<"plain" | "direct", ConcurrentScan[]> = { plain: [], direct: [] };
    const proxy = await startDelayProxy(data.store.endpoint, DELAY_MS);
    try {
      for (let r = 0; r < rounds; r++) {
        // Alternate the order, so neither always goes first.
        const order: ("plain" | "direct")[] = r % 2 === 0
          ? ["plain", "direct"]
          : ["direct", "plain"];
        for (const kind of order) {
          await waitForQuiet(20_000);
          const run = kind === "plain"
            ? await concurrentTierdScan(data, proxy, `scan16-${r}`)
            : await concurrentDirectScan(data, proxy);
          runs[kind].push(run);
          progress(
            "read_scan",
            `+${DELAY_MS} ms, ${n} at once, ${
              kind === "plain" ? `${n} plain clients through tierd` : `${n} direct GET streams`
            }: ${run.mbps} MB/s aggregate (${run.requests} requests, ${run.seconds} s; per ` +
              `client ${run.clientMbps.min}–${run.clientMbps.max} MB/s${
                kind === "plain"
                  ? `; ${run.storeGets} store GETs, ${run.answers503} 503s, ${run.cpuSeconds} ` +
                    `CPU s, ${run.collections} collections, peak RSS ${run.peakRssMiB} MiB`
                  : ""
              })`,
          );
        }
      }
    } finally {
      await proxy.stop();
    }
    const rawMedian = (kind: "plain" | "direct") => median(runs[kind].map((s) => s.mbps));
    const med = (kind: "plain" | "direct") => round(rawMedian(kind), 1);
    const ratio = rawMedian("plain") / rawMedian("direct");
    const list = (kind: "plain" | "direct", f: (s: ConcurrentScan) => unknown) =>
      runs[kind].map(f).join(", ");
    recordResult("cold_scan_ratio_vs_direct_get_16x", round(ratio, 3), "≥ 0.5", {
      method: `tierd: the compiled binary (\`tierd run\`), one fresh server and empty cache ` +
        `directory per run, over one Iggy 0.9 topic of ${n} partitions, each of ` +
        `${SCAN16_LAYOUT.sealedPerPartition} sealed ${SCAN16_LAYOUT.segmentSize / MiB} MiB ` +
        `segments whose ${SCAN16_EVICTED_PER_PARTITION} oldest were copied to ` +
        `${data.store.describe} and evicted by the agent (local_retention_size ` +
        `${SCAN16_LOCAL_RETENTION}; ${evicted.length} segments, ` +
        `${(evictedBytes / MiB).toFixed(0)} MiB evicted in all). ${n} plain clients, one per ` +
        `partition, all started together: each reads its partition from offset 0 to its first ` +
        `local offset with consecutive \`max_bytes=${MAX_BYTES}\` requests, each at the ` +
        `previous answer's x-tierd-next-offset, no \`x-tierd-reader\` header (tierd's adaptive ` +
        `readahead by continuity, as in cold_scan_ratio_vs_direct_get); a 503 is retried after ` +
        `its Retry-After and counted, any other answer but 200 fails the run. The peer is the ` +
        `store itself: ${n} parallel streams, each fetching its partition's evicted .log ` +
        `objects whole, in offset order, one at a time, through the same endpoint tierd reads ` +
        `from (a presigned URL, Deno fetch, the body consumed as a stream and its length ` +
        `checked). Both are timed from the first request to the last body byte of the last ` +
        `client; aggregate MB/s = all bytes ÷ those seconds. ${rounds} ` +
        `run${rounds === 1 ? "" : "s"} of each, order ` +
        `alternated each round; value = median aggregate MB/s through tierd ÷ median aggregate ` +
        `MB/s of the direct GETs. The store is MinIO behind the delay proxy ` +
        `(bench/read_proxy.ts, its own process) that holds each request ${DELAY_MS} ms before ` +
        `forwarding it, as for cold_scan_ratio_vs_direct_get. The clients, the proxy, MinIO ` +
        `and tierd share the machine's ${navigator.hardwareConcurrency} cores.`,
      settings: {
        chunk_size: "8 MiB (default)",
        readahead_max: "4 (default)",
        max_bytes: MAX_BYTES,
        clients: n,
        partitions: n,
        rounds,
        added_latency_ms: DELAY_MS,
      },
      peers: {
        direct_get: `${n} parallel streams, each a presigned GET of each whole evicted .log ` +
          "of its partition in turn (X-Amz-Expires 3600), Deno fetch, body streamed and " +
          "counted, same process and connection pool as the API clients",
        store: data.store.describe,
      },
      notes: `+${DELAY_MS} ms per store request, ${n} at once: ${n} plain clients through ` +
        `tierd ${med("plain")} MB/s aggregate vs ${n} parallel direct streamed GETs of the ` +
        `same objects ${med("direct")} MB/s (medians). Per run: tierd ` +
        `${list("plain", (s) => s.mbps)} MB/s (${list("plain", (s) => s.seconds)} s; agent ` +
        `CPU ${list("plain", (s) => s.cpuSeconds)} s; store GETs ` +
        `${list("plain", (s) => s.storeGets)}; 503s ${list("plain", (s) => s.answers503)}), ` +
        `direct ${list("direct", (s) => s.mbps)} MB/s (${list("direct", (s) => s.seconds)} s).`,
      tierd_aggregate_mbps: summary(runs.plain.map((s) => s.mbps), 1),
      direct_aggregate_mbps: summary(runs.direct.map((s) => s.mbps), 1),
      evicted_bytes: evictedBytes,
      tiering_seconds: round(data.tieringSeconds, 1),
      runs: [...runs.plain, ...runs.direct],
    });
    progress(
      "read_scan",
      `${n} at once: tierd ${med("plain")} MB/s ÷ direct ${med("direct")} MB/s = ` +
        `${ratio.toFixed(2)} (+${DELAY_MS} ms)`,
    );
  } finally {
    await data.close();
  }
}

/**
 * Runs the benchmark and records its figures: the single-client scans of one partition, then
 * the 16 concurrent clients on 16 partitions. @returns the headline readahead ratio
 */
export async function runReadScanBench(options: ReadScanBenchOptions = {}): Promise<number> {
  const rounds = options.rounds ?? 2;
  const headline = await runSingleScans(rounds);
  await runConcurrentScans(rounds);
  return headline;
}

/**
 * The CPU seconds per GiB (2^30 bytes) answered of each scan, their median (2 decimals), the
 * median share of the kernel (system time) in them, and the median minor page faults per GiB.
 */
function cpuPerGiBOf(
  scans: Scan[],
): { perGiB: number[]; cpuPerGiB: number; systemShare: number; faultsPerGiB: number } {
  const gib = (s: Scan) => s.bytes / (1024 * MiB);
  const perGiB = scans.map((s) => (s.cpuSeconds ?? NaN) / gib(s));
  return {
    perGiB,
    cpuPerGiB: round(median(perGiB), 2),
    systemShare: median(scans.map((s) => (s.systemSeconds ?? NaN) / (s.cpuSeconds ?? NaN))),
    faultsPerGiB: Math.round(median(scans.map((s) => (s.minorFaults ?? NaN) / gib(s)))),
  };
}

/** Bytes written to measure the machine's cost of writing new files. */
const MACHINE_WRITE_BYTES = 512 * MiB;

/**
 * What writing new files costs this machine, in this process's CPU seconds per GiB: 8 MiB
 * files (a chunk each) written to a new directory beside the agents' caches, then written over
 * (their pages are in the page cache by then). The agent writes every chunk it fetches, so a
 * machine whose first write of a page is dear (a VM that gives the host back the memory the guest
 * frees, and faults it in again on first touch) charges the cold scan for it.
 */
async function machineFileWriteCost(runDir: string) {
  const dir = join(runDir, "machine-write");
  await Deno.mkdir(dir, { recursive: true });
  const chunk = new Uint8Array(8 * MiB).map((_, i) => i & 255);
  const files = MACHINE_WRITE_BYTES / chunk.length;
  const pass = async () => {
    const c0 = process.cpuUsage();
    for (let i = 0; i < files; i++) await Deno.writeFile(join(dir, `c${i}`), chunk);
    const c = process.cpuUsage(c0);
    return round((c.user + c.system) / 1e6 / (MACHINE_WRITE_BYTES / (1024 * MiB)), 2);
  };
  try {
    const cpuSecondsPerGiB = await pass();
    const againCpuSecondsPerGiB = await pass();
    return { bytes: MACHINE_WRITE_BYTES, cpuSecondsPerGiB, againCpuSecondsPerGiB };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** The single-client scans of one partition. @returns the headline readahead ratio */
async function runSingleScans(rounds: number): Promise<number> {
  const data = await prepareReadData("read_scan");
  try {
    const evicted = data.segments.filter((s) => s.evicted);
    const evictedBytes = evicted.reduce((n, s) => n + s.size, 0);
    progress(
      "read_scan",
      `scanning ${evicted.length} evicted segments (${(evictedBytes / MiB).toFixed(0)} MiB), ` +
        `max_bytes ${MAX_BYTES / MiB} MiB per request`,
    );
    const machineWrite = await machineFileWriteCost(data.runDir);
    progress("read_scan", `this machine writing new files: ${JSON.stringify(machineWrite)}`);
    const kinds: ScanKind[] = ["plain", "off", "direct", "relay"];
    const byDelay: Record<number, Record<ScanKind, Scan[]>> = {};
    for (const delayMs of [DELAY_MS, 0]) {
      const proxy = delayMs > 0 ? await startDelayProxy(data.store.endpoint, delayMs) : undefined;
      const scans: Record<ScanKind, Scan[]> = { plain: [], off: [], direct: [], relay: [] };
      try {
        for (let r = 0; r < rounds; r++) {
          // Rotate the order, so no kind always goes first.
          for (let j = 0; j < kinds.length; j++) {
            const kind = kinds[(r + j) % kinds.length];
            await waitForQuiet(20_000);
            // "on" in the server's name: diagnose() reads that config back.
            const scan = kind === "direct"
              ? await directScan(data, proxy)
              : kind === "relay"
              ? await relayScan(data, proxy)
              : await scanOnce(
                data,
                kind,
                proxy,
                `scan-${delayMs}-${kind === "plain" ? "on" : "off"}-${r}`,
              );
            scans[kind].push(scan);
            progress(
              "read_scan",
              `+${delayMs} ms, ${KIND_LABEL[kind]}: ${scan.mbps} MB/s (${scan.requests} ` +
                `requests${
                  scan.storeGets === undefined ? "" : `, ${scan.storeGets} store GETs`
                }, ${scan.seconds} s${
                  scan.collections === undefined ? "" : `, ${scan.collections} collections`
                }${scan.cpuSeconds === undefined ? "" : `, ${scan.cpuSeconds} CPU s`}${
                  scan.peakRssMiB === undefined ? "" : `, peak RSS ${scan.peakRssMiB} MiB`
                })`,
            );
          }
        }
      } finally {
        await proxy?.stop();
      }
      byDelay[delayMs] = scans;
    }
    progress("read_scan", "diagnosing readahead in-process…");
    const diagnosis = await diagnose(data, join(data.runDir, "tierd-scan-0-on-0.toml"));
    progress("read_scan", JSON.stringify(diagnosis));
    const mbps = (delayMs: number, kind: ScanKind) =>
      round(median(byDelay[delayMs][kind].map((s) => s.mbps)), 2);
    const readahead = (delayMs: number) => mbps(delayMs, "plain") / mbps(delayMs, "off");
    const vsDirect = (delayMs: number) => mbps(delayMs, "plain") / mbps(delayMs, "direct");
    const describe = (delayMs: number) => ({
      plain_client_mbps: summary(byDelay[delayMs].plain.map((s) => s.mbps), 1),
      readahead_off_mbps: summary(byDelay[delayMs].off.map((s) => s.mbps), 1),
      direct_get_mbps: summary(byDelay[delayMs].direct.map((s) => s.mbps), 1),
      caching_relay_mbps: summary(byDelay[delayMs].relay.map((s) => s.mbps), 1),
      scans: kinds.flatMap((k) => byDelay[delayMs][k]),
    });
    const scanMethod = `tierd: the compiled binary (\`tierd run\`), one fresh server and empty ` +
      `cache directory per scan (deleted when its server stops, so the next scan's chunk files ` +
      `take page-cache memory the machine has used before, as on a host that runs for long), ` +
      `over one Iggy 0.9 partition whose ${evicted.length} oldest ` +
      `${READ_LAYOUT.segmentSize / MiB} MiB segments (${(evictedBytes / MiB).toFixed(0)} MiB) ` +
      `were copied to ${data.store.describe} and evicted by the agent (local_retention_size ` +
      `${LOCAL_RETENTION}). A scan reads from offset 0 to the first local offset with ` +
      `consecutive \`max_bytes=${MAX_BYTES}\` requests, each at the previous answer's ` +
      `x-tierd-next-offset, one client, one request at a time, timed from the first request ` +
      `to the last body byte. The plain client sends no \`x-tierd-reader\` header: tierd takes ` +
      `a read that starts where an earlier one ended as the same reader going on, and opens ` +
      `adaptive readahead for it (up to tierd's default readahead_max, 4 chunks of 8 MiB). `;
    const offMethod = `Readahead off = the same server and config, every request naming an ` +
      `\`x-tierd-reader\` of its own, so no read continues another (the config refuses ` +
      `readahead_max = 0, which ChunkCache itself accepts as "off"). `;
    const directMethod = `The peer is the store itself: each evicted .log object fetched whole ` +
      `in offset order, one at a time, through the same endpoint tierd reads from (a presigned ` +
      `URL, Deno fetch, the body consumed as a stream and its length checked), timed from the ` +
      `first request to the last body byte. `;
    const order = `${rounds} scans of each kind (tierd with readahead, tierd without, direct) ` +
      `per added latency, order rotated each round; `;
    const proxyNote = ` The store is MinIO behind a delay proxy (bench/read_proxy.ts, its ` +
      `own process) that holds each request ${DELAY_MS} ms before forwarding it and streams ` +
      `answers back undelayed: it emulates a real store's per-request first-byte latency ` +
      `(S3 is typically 10–30 ms), which loopback MinIO lacks.`;
    const settings = { chunk_size: "8 MiB (default)", max_bytes: MAX_BYTES, rounds };
    const store = data.store.describe;
    const diag = `In-process (the same read path and ChunkCache, reader id "diag"): ` +
      `${diagnosis.read_path.prefetches_started} prefetches started in ` +
      `${diagnosis.read_path.cache_reads} cache reads ` +
      `(${diagnosis.read_path.cache_reads_sequential_by_isSequential} sequential by ` +
      `isSequential); the cache alone, read sequentially with a reader id, gains ` +
      `${diagnosis.cache_alone_sequential.ratio}× at +${DELAY_MS} ms.`;
    const gets = (delayMs: number, kind: ScanKind) =>
      median(byDelay[delayMs][kind].map((s) => s.storeGets ?? NaN));
    const readaheadNote = (delayMs: number) =>
      `${delayMs > 0 ? `+${delayMs} ms per store request` : "loopback MinIO"}: plain client ` +
      `${mbps(delayMs, "plain")} MB/s with readahead (median ${gets(delayMs, "plain")} store ` +
      `GETs) vs ${mbps(delayMs, "off")} MB/s without (${gets(delayMs, "off")} GETs)`;
    const directNote = (delayMs: number) =>
      `${delayMs > 0 ? `+${delayMs} ms per store request` : "loopback MinIO"}: plain client ` +
      `through tierd ${mbps(delayMs, "plain")} MB/s vs a direct streamed GET of the same ` +
      `objects ${mbps(delayMs, "direct")} MB/s (a caching relay, the least an agent that keeps ` +
      `what it fetches does: ${mbps(delayMs, "relay")} MB/s, ` +
      `${(mbps(delayMs, "relay") / mbps(delayMs, "direct")).toFixed(2)} of the direct GET)`;
    const readaheadPeers = {
      readahead_off: "the same tierd, every request with an x-tierd-reader of its own",
      store,
    };
    const directPeers = {
      direct_get: "presigned GET of each whole .log (X-Amz-Expires 3600), Deno fetch, body " +
        "streamed and counted, same process and connection pool as the API client",
      store,
    };
    const value = (delayMs: number) =>
      `Value = median MB/s of the plain client ÷ median MB/s ${
        delayMs > 0 ? `(at +${delayMs} ms)` : "(no added latency)"
      } of `;
    recordResult("readahead_scan_ratio", round(readahead(DELAY_MS), 3), "≥ 2.0", {
      method: scanMethod + offMethod + order + value(DELAY_MS) + "the scan without readahead." +
        proxyNote + " Without the proxy: readahead_scan_ratio_no_added_latency.",
      settings: { ...settings, added_latency_ms: DELAY_MS },
      peers: readaheadPeers,
      notes: `${readaheadNote(DELAY_MS)}; no added latency: ratio ${
        readahead(0).toFixed(2)
      }. ${diag}`,
      ...describe(DELAY_MS),
      diagnosis,
    });
    recordResult("readahead_scan_ratio_no_added_latency", round(readahead(0), 3), "≥ 2.0", {
      method: scanMethod + offMethod + order + value(0) + "the scan without readahead. " +
        "Straight against loopback MinIO (no added latency).",
      settings: { ...settings, added_latency_ms: 0 },
      peers: readaheadPeers,
      notes: readaheadNote(0),
      ...describe(0),
    });
    recordResult("cold_scan_ratio_vs_direct_get", round(vsDirect(DELAY_MS), 3), "≥ 0.5", {
      method: scanMethod + directMethod + order + value(DELAY_MS) + "the direct GETs." +
        proxyNote + " Without the proxy: cold_scan_ratio_vs_direct_get_no_added_latency.",
      settings: { ...settings, added_latency_ms: DELAY_MS },
      peers: directPeers,
      notes: `${directNote(DELAY_MS)}; no added latency: ratio ${vsDirect(0).toFixed(2)}.`,
      ...describe(DELAY_MS),
    });
    recordResult("cold_scan_ratio_vs_direct_get_no_added_latency", round(vsDirect(0), 3), "≥ 0.5", {
      method: scanMethod + directMethod + order + value(0) + "the direct GETs. Straight " +
        "against loopback MinIO (no added latency).",
      settings: { ...settings, added_latency_ms: 0 },
      peers: directPeers,
      notes: directNote(0),
      ...describe(0),
    });
    // tierd's CPU per GiB served cold: the figure that does not depend on the machine's speed.
    const plainScans = [DELAY_MS, 0].flatMap((d) => byDelay[d].plain);
    const { perGiB, cpuPerGiB, systemShare, faultsPerGiB } = cpuPerGiBOf(plainScans);
    const relayScans = [DELAY_MS, 0].flatMap((d) => byDelay[d].relay);
    const {
      perGiB: relayPerGiB,
      cpuPerGiB: relayCpuPerGiB,
      systemShare: relaySystemShare,
      faultsPerGiB: relayFaultsPerGiB,
    } = cpuPerGiBOf(relayScans);
    const relayNote = `A caching relay (bench/caching_relay.ts under Bun, the runtime of the ` +
      `shipped binary: each object fetched, streamed to the client and kept as new 8 MiB files ` +
      `written around the page cache as tierd writes its chunks, ` +
      `nothing parsed, hashed or planned) costs ${relayCpuPerGiB} CPU s per GiB (per scan ` +
      `${relayPerGiB.map((v) => round(v, 2)).join(", ")}; the kernel's share ` +
      `${
        round(relaySystemShare, 2)
      }; ${relayFaultsPerGiB} minor page faults per GiB): tierd ÷ relay ${
        (cpuPerGiB / relayCpuPerGiB).toFixed(2)
      }.`;
    recordResult("cold_scan_cpu_seconds_per_gib", cpuPerGiB, "≤ 1.5", {
      method: scanMethod + `The agent's CPU seconds (user + system, /proc/<pid>/stat) over ` +
        `each plain-client scan (readahead on), with and without the ${DELAY_MS} ms added ` +
        `latency, ÷ the GiB (2^30 bytes) of records answered; the value is the median over ` +
        `those ${plainScans.length} scans.`,
      settings: { ...settings, added_latency_ms: [DELAY_MS, 0] },
      notes: `tierd CPU per GiB served cold, per scan: ${
        perGiB.map((v) => round(v, 2)).join(", ")
      } (CPU seconds ${
        plainScans.map((s) => s.cpuSeconds).join(", ")
      } for ` +
        `${plainScans.map((s) => round(s.bytes / MiB, 0)).join(", ")} MiB); the kernel's ` +
        `share ${round(systemShare, 2)}; ${faultsPerGiB} minor page faults per GiB (first ` +
        `touches of memory new to the process; 262,144 would be one per 4 KiB page served); ` +
        `the agent's peak RSS per scan ${
          plainScans.map((s) => s.peakRssMiB ?? "?").join(", ")
        } MiB (VmHWM of each scan's fresh agent). ` +
        `This machine writing new 8 MiB files through the page ` +
        `cache (tierd's chunk files go around it, by direct I/O) costs ` +
        `${machineWrite.cpuSecondsPerGiB} CPU s per GiB the first time, ` +
        `${machineWrite.againCpuSecondsPerGiB} over the same files again. ${relayNote}`,
      scans: plainScans,
      system_share: round(systemShare, 3),
      minor_faults_per_gib: faultsPerGiB,
      machine_file_write: machineWrite,
      caching_relay: {
        cpu_seconds_per_gib: relayCpuPerGiB,
        system_share: round(relaySystemShare, 3),
        scans: relayScans,
      },
    });
    recordResult(
      "cold_scan_cpu_ratio_vs_caching_relay",
      round(cpuPerGiB / relayCpuPerGiB, 3),
      NO_GOAL,
      {
        method: scanMethod + `The peer is the machine's own limit for an agent that keeps what ` +
          `it fetches: bench/caching_relay.ts run by Bun (the runtime tierd's binary is built ` +
          `with), which answers a GET of each evicted .log object by streaming the store's ` +
          `answer (a presigned GET through the same endpoint) to the client as it arrives and ` +
          `writing each 8 MiB of it as a new file (.part, renamed) in a fresh directory, deleted ` +
          `after the scan as tierd's cache is; it parses, hashes and plans nothing. Value = ` +
          `tierd's median CPU seconds per GiB served (cold_scan_cpu_seconds_per_gib) ÷ the ` +
          `relay's median over its ${relayScans.length} scans (with and without the ` +
          `${DELAY_MS} ms added latency), each process's user + system time from ` +
          `/proc/<pid>/stat.`,
        settings: { ...settings, added_latency_ms: [DELAY_MS, 0] },
        peers: { caching_relay: "bench/caching_relay.ts, Bun 1 (npx -y bun@1)", store },
        notes: `tierd ${cpuPerGiB} vs relay ${relayCpuPerGiB} CPU s per GiB (kernel's share ` +
          `${round(systemShare, 2)} vs ${round(relaySystemShare, 2)}); relay per scan ` +
          `${relayPerGiB.map((v) => round(v, 2)).join(", ")}`,
        tierd_scans: plainScans,
        relay_scans: relayScans,
      },
    );
    progress(
      "read_scan",
      `tierd CPU per GiB served cold: ${cpuPerGiB} s (median of ${perGiB.length} scans)`,
    );
    progress(
      "read_scan",
      `readahead ratio ${readahead(DELAY_MS).toFixed(2)} (+${DELAY_MS} ms), ` +
        `${readahead(0).toFixed(2)} (loopback); ÷ direct GET ${vsDirect(DELAY_MS).toFixed(2)} ` +
        `(+${DELAY_MS} ms), ${vsDirect(0).toFixed(2)} (loopback)`,
    );
    return readahead(DELAY_MS);
  } finally {
    await data.close();
  }
}
