// `cold_ttfb_ratio_vs_direct_get`: time to the first body byte of a cold read through tierd's
// HTTP API (the compiled binary, `tierd run`, reading an evicted segment through its chunk cache)
// ÷ a direct ranged GET of exactly the same bytes from the same store (a presigned URL fetched by
// the same client code, timed the same way). Samples are interleaved (the order alternates) and
// every API sample reads a chunk that is not cached. Two kinds of cold read are measured:
//   - "strict": the first read of a segment since the server started: neither its chunk nor its
//     `.index` is cached (the headline);
//   - "index warm": another, uncached chunk of a segment read before (its index is in memory):
//     recorded as `cold_ttfb_ratio_vs_direct_get_index_warm`.
// A traced in-process cold read (the same read path and ChunkCache over an S3Store that logs its
// GETs) shows where the time goes.
import { ChunkCache, chunkCacheOptions } from "../src/cache/mod.ts";
import { chunkName, ChunkStore } from "../src/cache/chunk_store.ts";
import { loadConfig } from "../src/config/load.ts";
import { createReadContext } from "../src/read/context.ts";
import { readRecords } from "../src/read/read_records.ts";
import type { ObjectStore } from "../providers/types.ts";
import { recordResult } from "./_results.ts";
import { median, MiB, progress, round } from "./_stats.ts";
import { seededRandom } from "../src/base/rng.ts";
import { waitForQuiet } from "./_proc.ts";
import {
  entryAt,
  expectedAnswer,
  LOCAL_RETENTION,
  prepareReadData,
  READ_LAYOUT,
  type ReadData,
  type ReadSegment,
  recordsUrl,
  sameBytes,
  startServer,
  summary,
  type TierdServer,
  timedFetch,
  waitSettled,
} from "./read_common.ts";
import { join } from "node:path";

const MAX_BYTES = 65_536;
/** tierd's default `cache.chunk_size`. */
const CHUNK = 8 * MiB;
/** Per server run (fresh cache): the chunk read first in each segment, and the chunks read
 * after it (index warm). Different per run so no chunk is read twice. */
const PLAN = [
  { strict: 1, warm: [3, 6] },
  { strict: 5, warm: [2, 7] },
];
/** Strict samples discarded at the start of each server run (JIT and connection warm-up). */
const WARMUP = 2;

interface Sample {
  kind: "strict" | "index_warm" | "warmup";
  segment: string;
  chunk: number;
  bytes: number;
  apiTtfbMs: number;
  apiTotalMs: number;
  directTtfbMs: number;
  directTotalMs: number;
  /** S3Store.get (signed, whole body buffered). */
  storeGetMs: number;
  apiFirst: boolean;
}

function shuffle<T>(xs: T[], rand: () => number): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

async function sample(
  data: ReadData,
  server: TierdServer,
  seg: ReadSegment,
  chunk: number,
  kind: Sample["kind"],
  apiFirst: boolean,
): Promise<Sample> {
  const entry = entryAt(seg, chunk * CHUNK + 3 * MiB);
  const expected = await expectedAnswer(seg, entry.position, MAX_BYTES);
  const client = data.store.client;
  const presigned = await client.presignGet(seg.key, 3600);
  const range = `bytes=${entry.position}-${entry.position + expected.length - 1}`;
  const api = async () => {
    const r = await timedFetch(recordsUrl(data, server, entry.offset, MAX_BYTES));
    if (r.status !== 200) {
      throw new Error(
        `API read of ${entry.offset} answered ${r.status}: ${
          new TextDecoder().decode(r.body).slice(0, 300)
        }`,
      );
    }
    if (r.headers.get("x-tierd-source") !== "remote") {
      throw new Error(`API read of ${entry.offset} came from ${r.headers.get("x-tierd-source")}`);
    }
    if (!sameBytes(r.body, expected)) {
      throw new Error(
        `API read of ${entry.offset}: ${r.body.length} bytes, not the expected ${expected.length} bytes of the segment`,
      );
    }
    return r;
  };
  const direct = async () => {
    const r = await timedFetch(presigned, { headers: { range } });
    if (r.status !== 206 || !sameBytes(r.body, expected)) {
      throw new Error(`direct GET ${range} of ${seg.key} answered ${r.status}, ${r.body.length} B`);
    }
    return r;
  };
  let a, d;
  if (apiFirst) {
    a = await api();
    d = await direct();
  } else {
    d = await direct();
    a = await api();
  }
  const t0 = performance.now();
  const got = await client.get(seg.key, {
    range: { start: entry.position, length: expected.length },
  });
  const storeGetMs = performance.now() - t0;
  if (!sameBytes(got.bytes, expected)) throw new Error("S3Store.get answered other bytes");
  // Let the chunk hydrate (background GET) before the next sample, so samples do not overlap.
  await waitSettled(server);
  return {
    kind,
    segment: String(seg.start),
    chunk,
    bytes: expected.length,
    apiTtfbMs: a.ttfbMs,
    apiTotalMs: a.totalMs,
    directTtfbMs: d.ttfbMs,
    directTotalMs: d.totalMs,
    storeGetMs,
    apiFirst,
  };
}

interface TracedGet {
  op: string;
  key: string;
  start?: number;
  length?: number;
  atMs: number;
  ms: number;
}

/**
 * Cold reads in-process, through the same read path and ChunkCache over an S3Store that logs
 * every request: which GETs a cold read issues and which of them the answer waited for. Per
 * segment: a strict cold read (max_bytes 65536), then an index-warm read of another chunk, then
 * an index-warm read of a third chunk with max_bytes 65280 (so the walk's window, max_bytes plus
 * one 256-byte batch header, fits the 64 KiB first fetch).
 */
async function traceColdReads(data: ReadData, segs: ReadSegment[], config: string) {
  const env = {
    ...Deno.env.toObject(),
    TIERD_S3_ACCESS_KEY: data.store.accessKey,
    TIERD_S3_SECRET_KEY: data.store.secretKey,
  };
  const cfg = await loadConfig(config, env);
  const s3 = data.store.client;
  const log: TracedGet[] = [];
  let t0 = performance.now();
  const traced = new Proxy(s3, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (prop === "get" || prop === "head") {
        return async (key: string, opts?: { range?: { start: number; length: number } }) => {
          const began = performance.now();
          try {
            return await (v as (k: string, o?: unknown) => Promise<unknown>).call(
              target,
              key,
              opts,
            );
          } finally {
            log.push({
              op: String(prop),
              key: key.slice(key.lastIndexOf("/") + 1),
              start: opts?.range?.start,
              length: opts?.range?.length,
              atMs: round(began - t0, 2),
              ms: round(performance.now() - began, 2),
            });
          }
        };
      }
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as unknown as ObjectStore;
  const cacheDir = join(data.runDir, "cache-trace");
  await Deno.remove(cacheDir, { recursive: true }).catch(() => {});
  const cache = await ChunkCache.open(traced, {
    ...chunkCacheOptions(cfg.tiered_storage),
    path: cacheDir,
  });
  const partition = { stream: data.stream, topic: data.topic, partition: data.partition };
  const out = [];
  try {
    const ctx = createReadContext({
      config: cfg,
      store: traced,
      prefix: data.prefix,
      reader: cache,
    });
    // Warm the code paths on a local segment, and the store connection, first (not traced).
    const local = data.segments.find((s) => !s.evicted)!;
    await readRecords(ctx, { partition, offset: local.entries[10].offset, maxBytes: MAX_BYTES });
    await s3.get(local.key, { range: { start: 0, length: 4096 } });
    for (const seg of segs) {
      for (
        const [what, chunk, maxBytes] of [
          ["strict", 4, MAX_BYTES],
          ["index_warm", 6, MAX_BYTES],
          ["index_warm, max_bytes 65280", 2, MAX_BYTES - 256],
        ] as const
      ) {
        const entry = entryAt(seg, chunk * CHUNK + 3 * MiB);
        log.length = 0;
        t0 = performance.now();
        const r = await readRecords(ctx, { partition, offset: entry.offset, maxBytes });
        const answeredMs = performance.now() - t0;
        await cache.idle();
        out.push({
          read: what,
          segment: String(seg.start),
          chunk,
          max_bytes: maxBytes,
          answered_ms: round(answeredMs, 2),
          answer_bytes: r.bytes.length,
          requests: log.map((g) => ({ ...g })),
        });
      }
    }
  } finally {
    await cache.close();
    await Deno.remove(cacheDir, { recursive: true }).catch(() => {});
  }
  // What landing a chunk costs on this disk: ChunkStore.write (header with block checksums,
  // .part, fsync, rename) of an 8 MiB chunk; a read waiting for the chunk waits for this too.
  const writeMs: number[] = [];
  const probeDir = join(data.runDir, "chunk-write-probe");
  const chunks = new ChunkStore(probeDir);
  const bytes = new Uint8Array(CHUNK).map((_, i) => i & 0xff);
  for (let i = 0; i < 5; i++) {
    const range = { start: i * CHUNK, end: (i + 1) * CHUNK };
    const began = performance.now();
    await chunks.write(chunkName("0".repeat(32), range.start, range.end), range, bytes);
    writeMs.push(performance.now() - began);
  }
  await Deno.remove(probeDir, { recursive: true }).catch(() => {});
  return { reads: out, chunk_store_write_8mib_ms: summary(writeMs) };
}

/** Runs the benchmark and records its figures. @returns the headline ratio */
export async function runReadColdBench(): Promise<number> {
  const data = await prepareReadData("read_cold");
  try {
    const evicted = data.segments.filter((s) => s.evicted);
    progress(
      "read_cold",
      `${evicted.length} evicted segments of ${(evicted[0].size / MiB).toFixed(0)} MiB`,
    );
    const rand = seededRandom(42);
    const samples: Sample[] = [];
    let lastConfig = "";
    for (let run = 0; run < PLAN.length; run++) {
      await waitForQuiet(20_000);
      const server = await startServer(data, { name: `cold-${run}` });
      lastConfig = join(data.runDir, `tierd-cold-${run}.toml`);
      try {
        await waitSettled(server);
        // Warm the client's connections to both servers (not measured).
        await (await fetch(`${server.url}/healthz`)).text();
        await data.store.client.get(evicted[0].key, { range: { start: 0, length: 4096 } });
        const order = shuffle(evicted, rand);
        let i = 0;
        for (const seg of order) {
          const kind = i < WARMUP ? "warmup" : "strict";
          samples.push(await sample(data, server, seg, PLAN[run].strict, kind, i % 2 === 0));
          i++;
        }
        for (const seg of order) {
          for (const c of PLAN[run].warm) {
            samples.push(await sample(data, server, seg, c, "index_warm", i % 2 === 0));
            i++;
          }
        }
        const last = samples[samples.length - 1];
        progress(
          "read_cold",
          `run ${run}: ${i} samples; last API ${last.apiTtfbMs.toFixed(1)} ms, direct ${
            last.directTtfbMs.toFixed(1)
          } ms`,
        );
      } finally {
        await server.stop();
      }
    }
    const of = (kind: Sample["kind"]) => samples.filter((s) => s.kind === kind);
    const figures = (list: Sample[]) => {
      const api = median(list.map((s) => s.apiTtfbMs));
      const direct = median(list.map((s) => s.directTtfbMs));
      return {
        api,
        direct,
        ratio: api / direct,
        storeGet: median(list.map((s) => s.storeGetMs)),
        perSampleRatio: median(list.map((s) => s.apiTtfbMs / s.directTtfbMs)),
      };
    };
    const strict = figures(of("strict"));
    const warm = figures(of("index_warm"));
    progress("read_cold", "tracing cold reads in-process…");
    const traces = await traceColdReads(data, evicted.slice(0, 4), lastConfig);
    const traced = (what: string) =>
      median(traces.reads.filter((r) => r.read === what).map((r) => r.answered_ms));
    const strictIndexGets = traces.reads.some((r) =>
      r.read === "strict" && r.requests.some((q) => q.key.endsWith(".index"))
    );
    const traceNote = `In-process trace: a strict cold read ${
      strictIndexGets
        ? "GETs the .index"
        : "seeks with the .index copy eviction kept (no store request for it)"
    }, an index-warm one with the index already parsed; then one ` +
      `exact-range first fetch of its window (max_bytes and the record header after it), which ` +
      `answers it; the 8 MiB chunk's GET starts one event-loop turn after that fetch landed, ` +
      `once the answer's first bytes are on their way (answered in ${
        traced("strict").toFixed(1)
      } ms strict, ` +
      `${traced("index_warm").toFixed(1)} ms index warm; with max_bytes 65280 ` +
      `${traced("index_warm, max_bytes 65280").toFixed(1)} ms).`;
    const method = `tierd: the compiled binary (\`tierd run\`) over one Iggy 0.9 partition of ` +
      `${READ_LAYOUT.sealedPerPartition} sealed ${READ_LAYOUT.segmentSize / MiB} MiB segments ` +
      `(${READ_LAYOUT.payloadSize}-byte payloads, 8 messages per batch), copied to ` +
      `${data.store.describe} and evicted by the agent itself (local_retention_size ` +
      `${LOCAL_RETENTION}: ${evicted.length} segments evicted). Each sample reads ` +
      `\`GET /v1/.../records?offset=N&max_bytes=${MAX_BYTES}\` at a batch about 3 MiB into an ` +
      `8 MiB chunk that is not cached, and is timed from the fetch() call to the first body ` +
      `byte; the peer is a direct ranged GET of exactly the bytes tierd answered (the same ` +
      `records, checked byte for byte), a presigned URL fetched and timed by the same code. ` +
      `API and peer alternate which goes first. After each sample the bench waits until ` +
      `tierd's background chunk hydration is done (store request count and cache bytes ` +
      `settled). Two server runs, each with a fresh cache directory; in each the first read of ` +
      `every evicted segment is a "strict" cold read (chunk and .index uncached; the first ` +
      `${WARMUP} of each run are discarded as warm-up), then two more uncached chunks of each ` +
      `segment are read with its index already in memory ("index warm"). Value: median API ` +
      `TTFB ÷ median direct TTFB over the ${of("strict").length} strict samples.`;
    const common = {
      peers: {
        direct_get: "presigned GET (X-Amz-Expires 3600) with a Range header, Deno fetch, " +
          "same process and connection pool as the API client",
        s3store_get: "tierd's own S3Store.get(key, { range }) (signed per request, whole " +
          "body buffered), reported for reference",
        store: data.store.describe,
      },
      settings: {
        chunk_size: "8 MiB (default)",
        first_fetch: "64 KiB–2 MiB (default)",
        fetch_concurrency: "4 (default)",
        max_bytes: MAX_BYTES,
        tiering_seconds: round(data.tieringSeconds, 1),
      },
    };
    recordResult("cold_ttfb_ratio_vs_direct_get", round(strict.ratio, 3), "≤ 1.5", {
      method,
      ...common,
      notes: `strict cold: API ${strict.api.toFixed(1)} ms vs direct GET ${
        strict.direct.toFixed(1)
      } ms median TTFB (S3Store.get ${strict.storeGet.toFixed(1)} ms); index warm: API ${
        warm.api.toFixed(1)
      } ms vs ${warm.direct.toFixed(1)} ms. ${traceNote}`,
      strict: {
        api_ttfb_ms: summary(
          of("strict").map((s) =>
            s.apiTtfbMs
          ),
        ),
        direct_ttfb_ms: summary(of("strict").map((s) => s.directTtfbMs)),
        s3store_get_ms: summary(of("strict").map((s) => s.storeGetMs)),
        api_total_ms: summary(of("strict").map((s) => s.apiTotalMs)),
        median_per_sample_ratio: round(strict.perSampleRatio, 3),
        answer_bytes: summary(of("strict").map((s) => s.bytes), 0),
      },
      index_warm: {
        ratio: round(warm.ratio, 3),
        api_ttfb_ms: summary(of("index_warm").map((s) => s.apiTtfbMs)),
        direct_ttfb_ms: summary(of("index_warm").map((s) => s.directTtfbMs)),
      },
      traced_cold_reads: traces,
      samples: samples.map((s) => ({
        ...s,
        apiTtfbMs: round(s.apiTtfbMs, 2),
        apiTotalMs: round(s.apiTotalMs, 2),
        directTtfbMs: round(s.directTtfbMs, 2),
        directTotalMs: round(s.directTotalMs, 2),
        storeGetMs: round(s.storeGetMs, 2),
      })),
    });
    recordResult("cold_ttfb_ratio_vs_direct_get_index_warm", round(warm.ratio, 3), "≤ 1.5", {
      method: method.replace(
        /Value: .*$/,
        `Value: median API TTFB ÷ median direct TTFB over the ${
          of("index_warm").length
        } index-warm samples (the chunk is uncached, the segment's .index already parsed).`,
      ),
      ...common,
      notes: `index warm: API ${warm.api.toFixed(1)} ms vs direct GET ${
        warm.direct.toFixed(1)
      } ms median TTFB`,
    });
    progress(
      "read_cold",
      `strict: API ${strict.api.toFixed(2)} ms / direct ${strict.direct.toFixed(2)} ms = ${
        strict.ratio.toFixed(2)
      }; index warm: ${warm.api.toFixed(2)} / ${warm.direct.toFixed(2)} = ${warm.ratio.toFixed(2)}`,
    );
    return strict.ratio;
  } finally {
    await data.close();
  }
}
