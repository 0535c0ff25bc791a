// `readahead_scan_ratio`: MB/s of a sequential cold scan of the whole evicted range through
// tierd's HTTP API with adaptive readahead (`cache.readahead_max` default) ÷ the same scan with
// readahead off (`readahead_max = 0`). Each scan runs on a fresh `tierd run` (the compiled
// binary) with an empty cache directory, over the same objects. Loopback MinIO answers in well
// under a millisecond, which hides what readahead is for, so the headline puts a delay proxy
// (bench/read_proxy.ts, a separate process) in front of MinIO that holds every request for a
// fixed time, emulating a real store's first-byte latency; the scan straight against MinIO is
// recorded too (`readahead_scan_ratio_no_added_latency`).
import { join } from "node:path";
import { S3Store } from "../providers/s3/store.ts";
import { ChunkCache, chunkCacheOptions } from "../src/cache/mod.ts";
import { isSequential, type ReaderState } from "../src/cache/readahead.ts";
import type { ChunkSource, RangeReader, RangeReadOptions } from "../src/cache/types.ts";
import { loadConfig } from "../src/config/load.ts";
import { createReadContext } from "../src/read/context.ts";
import { readRecords } from "../src/read/read_records.ts";
import { recordResult } from "./_results.ts";
import { median, MiB, progress, round } from "./_stats.ts";
import { waitForQuiet } from "./_proc.ts";
import {
  LOCAL_RETENTION,
  metrics,
  metricSum,
  prepareReadData,
  READ_LAYOUT,
  type ReadData,
  recordsUrl,
  startServer,
  summary,
  waitSettled,
} from "./read_common.ts";
import { type DelayProxy, startDelayProxy } from "./read_proxy.ts";

/** The consumer's request size (the API's default max_bytes). */
const MAX_BYTES = 1 * MiB;
/** Added store latency of the headline, per request (one way, before the store sees it). */
const DELAY_MS = 10;
const ROUNDS = 2;

interface Scan {
  readahead: string;
  delayMs: number;
  bytes: number;
  requests: number;
  seconds: number;
  mbps: number;
  storeGets: number;
  cacheHits: number;
  cacheMisses: number;
  fetches: Record<string, number>;
}

/**
 * One scan on a fresh server. Readahead is per reader: with `readerId` the reads carry the same
 * `x-tierd-reader` header (adaptive readahead, tierd's default readahead_max); without it they
 * carry none, which turns readahead off for them (the config refuses readahead_max = 0).
 */
async function scanOnce(
  data: ReadData,
  readerId: string | undefined,
  proxy: DelayProxy | undefined,
  name: string,
): Promise<Scan> {
  const server = await startServer(data, { name, endpoint: proxy?.endpoint });
  try {
    await waitSettled(server);
    const before = await metrics(server);
    let offset = 0n;
    let bytes = 0;
    let requests = 0;
    const t0 = performance.now();
    while (offset < data.firstLocalOffset) {
      const res = await fetch(recordsUrl(data, server, offset, MAX_BYTES), {
        headers: readerId ? { "x-tierd-reader": readerId } : {},
      });
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
    const seconds = (performance.now() - t0) / 1000;
    await waitSettled(server);
    const after = await metrics(server);
    const d = (name: string, filter = "") =>
      metricSum(after, name, filter) - metricSum(before, name, filter);
    return {
      readahead: readerId ? "on: x-tierd-reader, readahead_max 4 (default)" : "off: no reader id",
      delayMs: proxy?.delayMs ?? 0,
      bytes,
      requests,
      seconds: round(seconds, 3),
      mbps: round(bytes / 1e6 / seconds, 1),
      storeGets: d("tierd_store_requests_total", 'op="get"'),
      cacheHits: d("tierd_cache_hits_total"),
      cacheMisses: d("tierd_cache_misses_total"),
      fetches: {
        ok: d("tierd_fetches_total", 'outcome="ok"'),
        aborted: d("tierd_fetches_total", 'outcome="aborted"'),
        error: d("tierd_fetches_total", 'outcome="error"'),
        cache_full: d("tierd_fetches_total", 'outcome="cache_full"'),
      },
    };
  } finally {
    await server.stop();
  }
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

/** Runs the benchmark and records its figures. @returns the headline ratio */
export async function runReadScanBench(): Promise<number> {
  const data = await prepareReadData("read_scan");
  try {
    const evicted = data.segments.filter((s) => s.evicted);
    const evictedBytes = evicted.reduce((n, s) => n + s.size, 0);
    progress(
      "read_scan",
      `scanning ${evicted.length} evicted segments (${(evictedBytes / MiB).toFixed(0)} MiB), ` +
        `max_bytes ${MAX_BYTES / MiB} MiB per request`,
    );
    const byDelay: Record<number, { on: Scan[]; off: Scan[] }> = {};
    for (const delayMs of [DELAY_MS, 0]) {
      const proxy = delayMs > 0 ? await startDelayProxy(data.store.endpoint, delayMs) : undefined;
      const on: Scan[] = [];
      const off: Scan[] = [];
      try {
        for (let r = 0; r < ROUNDS; r++) {
          const order = r % 2 === 0 ? [true, false] : [false, true];
          for (const ra of order) {
            await waitForQuiet(20_000);
            const scan = await scanOnce(
              data,
              ra ? "backfill-scan" : undefined,
              proxy,
              `scan-${delayMs}-${ra ? "on" : "off"}-${r}`,
            );
            (ra ? on : off).push(scan);
            progress(
              "read_scan",
              `+${delayMs} ms, readahead ${scan.readahead}: ${scan.mbps} MB/s ` +
                `(${scan.requests} requests, ${scan.storeGets} store GETs, ${scan.seconds} s)`,
            );
          }
        }
      } finally {
        await proxy?.stop();
      }
      byDelay[delayMs] = { on, off };
    }
    progress("read_scan", "diagnosing readahead in-process…");
    const diagnosis = await diagnose(data, join(data.runDir, "tierd-scan-0-on-0.toml"));
    progress("read_scan", JSON.stringify(diagnosis));
    const ratioOf = (x: { on: Scan[]; off: Scan[] }) =>
      median(x.on.map((s) => s.mbps)) / median(x.off.map((s) => s.mbps));
    const headline = ratioOf(byDelay[DELAY_MS]);
    const loopback = ratioOf(byDelay[0]);
    const describe = (x: { on: Scan[]; off: Scan[] }) => ({
      readahead_default_mbps: summary(x.on.map((s) => s.mbps), 1),
      readahead_off_mbps: summary(x.off.map((s) => s.mbps), 1),
      scans: [...x.on, ...x.off],
    });
    const method = `tierd: the compiled binary (\`tierd run\`), one fresh server and empty ` +
      `cache directory per scan, over one Iggy 0.9 partition whose ${evicted.length} oldest ` +
      `${READ_LAYOUT.segmentSize / MiB} MiB segments (${(evictedBytes / MiB).toFixed(0)} MiB) ` +
      `were copied to ${data.store.describe} and evicted by the agent (local_retention_size ` +
      `${LOCAL_RETENTION}). A scan reads from offset 0 to the first local offset with ` +
      `consecutive \`max_bytes=${MAX_BYTES}\` requests following x-tierd-next-offset, one ` +
      `client, one request at a time, timed from the first request to the last body byte. ` +
      `Readahead on = every request carries the same \`x-tierd-reader\` header (adaptive ` +
      `readahead up to tierd's default readahead_max, 4 chunks of 8 MiB); off = the same ` +
      `server and config, requests without the header (readahead is per named reader; the ` +
      `config refuses readahead_max = 0, which ChunkCache itself accepts as "off"). ` +
      `${ROUNDS} scans of each, ` +
      `order alternating; value = median MB/s on ÷ median MB/s off.`;
    const settings = { chunk_size: "8 MiB (default)", max_bytes: MAX_BYTES, rounds: ROUNDS };
    recordResult("readahead_scan_ratio", round(headline, 3), "≥ 2.0", {
      method: method + ` The store is MinIO behind a delay proxy (bench/read_proxy.ts, its ` +
        `own process) that holds each request ${DELAY_MS} ms before forwarding it and streams ` +
        `answers back undelayed: it emulates a real store's per-request first-byte latency ` +
        `(S3 is typically 10–30 ms), which loopback MinIO lacks. Without the proxy: ` +
        `readahead_scan_ratio_no_added_latency.`,
      settings: { ...settings, added_latency_ms: DELAY_MS },
      peers: {
        readahead_off: "the same tierd, reads without x-tierd-reader",
        store: data.store.describe,
      },
      notes: `+${DELAY_MS} ms per store request: ${
        median(byDelay[DELAY_MS].on.map((s) => s.mbps))
      } MB/s with readahead vs ${
        median(byDelay[DELAY_MS].off.map((s) => s.mbps))
      } MB/s without; no added latency: ratio ${loopback.toFixed(2)}. Readahead never ` +
        `starts through the API: ${diagnosis.read_path.prefetches_started} prefetches in ` +
        `${diagnosis.read_path.cache_reads} cache reads (each request asks for [p, p+64 KiB) ` +
        `then [p, p+max_bytes+256), so no read begins at the previous one's end); the cache ` +
        `alone, read sequentially with a reader id, gains ${diagnosis.cache_alone_sequential.ratio}× at +${DELAY_MS} ms.`,
      ...describe(byDelay[DELAY_MS]),
      diagnosis,
    });
    recordResult("readahead_scan_ratio_no_added_latency", round(loopback, 3), "≥ 2.0", {
      method: method + " Straight against loopback MinIO (no added latency).",
      settings: { ...settings, added_latency_ms: 0 },
      peers: {
        readahead_off: "the same tierd, reads without x-tierd-reader",
        store: data.store.describe,
      },
      notes: `loopback MinIO: ${median(byDelay[0].on.map((s) => s.mbps))} MB/s with readahead ` +
        `vs ${median(byDelay[0].off.map((s) => s.mbps))} MB/s without`,
      ...describe(byDelay[0]),
    });
    return headline;
  } finally {
    await data.close();
  }
}
