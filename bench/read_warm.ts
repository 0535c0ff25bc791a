// `warm_ratio_vs_local`: MB/s reading cached remote data through tierd's HTTP API ÷ MB/s reading
// an equal range of a local (not evicted) segment of the same partition through the same API.
// One `tierd run` (the compiled binary) with a fresh cache: an evicted segment's range is read
// once (cold: it fills the cache), then, per round, the same range again (warm) and the local
// range, in alternating order; the median MB/s of each counts.
import { open } from "node:fs/promises";
import { join } from "node:path";
import { readAt } from "../src/format/_file.ts";
import { codecFor } from "../src/format/codecs.ts";
import { ChunkCache, chunkCacheOptions } from "../src/cache/mod.ts";
import { loadConfig } from "../src/config/load.ts";
import { initHashes, xxh3_64 } from "../src/hash.ts";
import { createReadContext } from "../src/read/context.ts";
import { readRecords } from "../src/read/read_records.ts";
import { recordResult } from "./_results.ts";
import { median, MiB, progress, round } from "./_stats.ts";
import { waitForQuiet } from "./_proc.ts";
import {
  expectedAnswer,
  LOCAL_RETENTION,
  metrics,
  metricSum,
  prepareReadData,
  READ_LAYOUT,
  type ReadData,
  type ReadSegment,
  recordsUrl,
  sameBytes,
  startServer,
  summary,
  type TierdServer,
  waitSettled,
} from "./read_common.ts";

/** max_bytes of the headline, and of a second, smaller-request variant. */
const VARIANTS = [
  { maxBytes: 8 * MiB, requests: 7 },
  { maxBytes: 1 * MiB, requests: 56 },
];
const ROUNDS = 15;

interface Pass {
  bytes: number;
  seconds: number;
  sources: Set<string>;
}

/** Reads `requests` consecutive answers from the segment's first offset. */
async function readPass(
  data: ReadData,
  server: TierdServer,
  seg: ReadSegment,
  maxBytes: number,
  requests: number,
  verify = false,
): Promise<Pass> {
  let offset = seg.start;
  let bytes = 0;
  const sources = new Set<string>();
  let position = 0;
  const t0 = performance.now();
  for (let i = 0; i < requests; i++) {
    const res = await fetch(recordsUrl(data, server, offset, maxBytes));
    const body = new Uint8Array(await res.arrayBuffer());
    if (res.status !== 200) {
      throw new Error(
        `read at ${offset} answered ${res.status}: ${new TextDecoder().decode(body)}`,
      );
    }
    sources.add(res.headers.get("x-tierd-source") ?? "?");
    if (verify) {
      const want = await expectedAnswer(seg, position, maxBytes);
      if (!sameBytes(body, want)) throw new Error(`read at ${offset}: bytes differ from the file`);
    }
    position += body.length;
    bytes += body.length;
    offset = BigInt(res.headers.get("x-tierd-next-offset")!);
  }
  const seconds = (performance.now() - t0) / 1000;
  if (position >= seg.size) throw new Error("a pass left its segment; use fewer requests");
  return { bytes, seconds, sources };
}

const mbps = (p: Pass) => p.bytes / 1e6 / p.seconds;

/**
 * Where a warm remote read's time goes, in-process (this Deno process, not the Bun binary): the
 * same read path and ChunkCache (fresh directory, filled by one pass), timing the whole
 * `readRecords` for the remote and the local segment, and the pieces a remote read adds:
 * reading the chunk file with its block checksums (`ChunkCache.read`), the XXH3-64 of those
 * blocks alone, and the record checksum walk the read path does for bytes from the store.
 */
async function breakdown(data: ReadData, remote: ReadSegment, local: ReadSegment, config: string) {
  const maxBytes = VARIANTS[0].maxBytes;
  const env = {
    ...Deno.env.toObject(),
    TIERD_S3_ACCESS_KEY: data.store.accessKey,
    TIERD_S3_SECRET_KEY: data.store.secretKey,
  };
  const cfg = await loadConfig(config, env);
  const dir = join(data.runDir, "cache-breakdown");
  const cache = await ChunkCache.open(data.store.client, {
    ...chunkCacheOptions(cfg.tiered_storage),
    path: dir,
  });
  await initHashes();
  try {
    const ctx = createReadContext({
      config: cfg,
      store: data.store.client,
      prefix: data.prefix,
      reader: cache,
    });
    const partition = { stream: data.stream, topic: data.topic, partition: data.partition };
    const read = (seg: ReadSegment) => readRecords(ctx, { partition, offset: seg.start, maxBytes });
    const answer = await read(remote); // cold: fills the chunks
    await cache.idle();
    await read(local);
    const head = await data.store.client.head(remote.key);
    const starts = [0, ...remote.entries.map((e) => e.position).filter((p) => p > 0)];
    const src = {
      key: remote.key,
      checksum: head.metadata["xxh3-128"],
      size: remote.size,
      recordStarts: () => Promise.resolve(starts),
    };
    const codec = codecFor("iggy-0.9");
    const n = answer.bytes.length;
    const times: Record<string, number[]> = {
      read_records_remote_warm: [],
      read_records_local: [],
      chunk_cache_read: [],
      block_xxh3_only: [],
      record_walk_verify: [],
      record_walk_no_verify: [],
      local_file_read: [],
    };
    const nodeFh = await open(local.logPath, "r");
    try {
      for (let r = 0; r < 7; r++) {
        let t = performance.now();
        const rr = await read(remote);
        times.read_records_remote_warm.push(performance.now() - t);
        if (rr.source !== "remote") throw new Error("breakdown: remote read not remote");
        t = performance.now();
        await read(local);
        times.read_records_local.push(performance.now() - t);
        t = performance.now();
        const b = await cache.read(src, 0, n);
        times.chunk_cache_read.push(performance.now() - t);
        if (b.length !== n) throw new Error("breakdown: short cache read");
        t = performance.now();
        for (let at = 0; at < n; at += 64 * 1024) {
          xxh3_64(answer.bytes.subarray(at, Math.min(n, at + 64 * 1024)));
        }
        times.block_xxh3_only.push(performance.now() - t);
        for (const verify of [true, false]) {
          t = performance.now();
          const walk = codec.walk(answer.bytes, {
            file: remote.key,
            startOffset: remote.start,
            expectedOffset: remote.start,
            filePosition: 0,
            verify,
          });
          for (const _ of walk) { /* validate */ }
          times[verify ? "record_walk_verify" : "record_walk_no_verify"].push(
            performance.now() - t,
          );
        }
        t = performance.now();
        await readAt(nodeFh, 0, n);
        times.local_file_read.push(performance.now() - t);
      }
    } finally {
      await nodeFh.close();
    }
    const out: Record<string, unknown> = { bytes: n, runtime: `Deno ${Deno.version.deno}` };
    for (const [k, v] of Object.entries(times)) {
      const ms = median(v);
      out[k] = { median_ms: round(ms, 2), mbps: round(n / 1e6 / (ms / 1000), 0) };
    }
    return out;
  } finally {
    await cache.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Runs the benchmark and records its figure. @returns the headline ratio */
export async function runReadWarmBench(): Promise<number> {
  const data = await prepareReadData("read_warm");
  try {
    const remote = data.segments.find((s) => s.evicted)!;
    const local = data.segments.find((s) => !s.evicted)!;
    await waitForQuiet(20_000);
    const server = await startServer(data, { name: "warm" });
    const results: Record<string, unknown> = {};
    let headline = NaN;
    try {
      for (const v of VARIANTS) {
        // Cold pass (fills the cache; verified), then one untimed pass of each to warm up.
        const cold = await readPass(data, server, remote, v.maxBytes, v.requests, true);
        await waitSettled(server);
        await readPass(data, server, local, v.maxBytes, v.requests, true);
        await readPass(data, server, remote, v.maxBytes, v.requests);
        const before = await metrics(server);
        const warm: Pass[] = [];
        const loc: Pass[] = [];
        for (let r = 0; r < ROUNDS; r++) {
          if (r % 2 === 0) {
            warm.push(await readPass(data, server, remote, v.maxBytes, v.requests));
            loc.push(await readPass(data, server, local, v.maxBytes, v.requests));
          } else {
            loc.push(await readPass(data, server, local, v.maxBytes, v.requests));
            warm.push(await readPass(data, server, remote, v.maxBytes, v.requests));
          }
        }
        const after = await metrics(server);
        const fetched = metricSum(after, "tierd_store_requests_total", 'op="get"') -
          metricSum(before, "tierd_store_requests_total", 'op="get"');
        for (const p of warm) {
          if ([...p.sources].join() !== "remote") throw new Error("warm pass not from remote");
        }
        for (const p of loc) {
          if ([...p.sources].join() !== "local") throw new Error("local pass not from local");
        }
        const w = median(warm.map(mbps));
        const l = median(loc.map(mbps));
        const ratio = w / l;
        progress(
          "read_warm",
          `max_bytes ${v.maxBytes / MiB} MiB: warm remote ${w.toFixed(0)} MB/s, local ${
            l.toFixed(0)
          } MB/s, ratio ${ratio.toFixed(3)} (cold pass ${mbps(cold).toFixed(0)} MB/s; ${fetched} ` +
            `store GETs during the warm rounds)`,
        );
        results[`max_bytes_${v.maxBytes / MiB}MiB`] = {
          ratio: round(ratio, 3),
          warm_remote_mbps: summary(warm.map(mbps), 1),
          local_mbps: summary(loc.map(mbps), 1),
          cold_pass_mbps: round(mbps(cold), 1),
          bytes_per_pass: warm[0].bytes,
          requests_per_pass: v.requests,
          store_gets_during_warm_rounds: fetched,
        };
        if (Number.isNaN(headline)) headline = ratio;
      }
      const m = await metrics(server);
      results.cache = {
        hits: metricSum(m, "tierd_cache_hits_total"),
        misses: metricSum(m, "tierd_cache_misses_total"),
      };
    } finally {
      await server.stop();
    }
    progress("read_warm", "breaking a warm read down in-process…");
    results.breakdown_in_process = await breakdown(
      data,
      remote,
      local,
      join(data.runDir, "tierd-warm.toml"),
    );
    progress("read_warm", JSON.stringify(results.breakdown_in_process));
    const bd = results.breakdown_in_process as {
      bytes: number;
      block_xxh3_only: { median_ms: number };
      record_walk_verify: { median_ms: number };
    };
    const h = results[`max_bytes_${VARIANTS[0].maxBytes / MiB}MiB`] as {
      warm_remote_mbps: { median: number };
      local_mbps: { median: number };
    };
    recordResult("warm_ratio_vs_local", round(headline, 3), "≥ 0.9", {
      method: `tierd: the compiled binary (\`tierd run\`) over one Iggy 0.9 partition of ` +
        `${READ_LAYOUT.sealedPerPartition} sealed ${READ_LAYOUT.segmentSize / MiB} MiB segments ` +
        `(4 KiB payloads) in ${data.store.describe}, the oldest evicted by the agent ` +
        `(local_retention_size ${LOCAL_RETENTION}). A pass reads ${VARIANTS[0].requests} ` +
        `consecutive answers of max_bytes ${VARIANTS[0].maxBytes / MiB} MiB (following ` +
        `x-tierd-next-offset) from the first offset of a segment, inside that segment, ` +
        `timed from the first request to the last body byte (one client, sequential ` +
        `requests). Remote: an evicted segment, read once cold (filling the chunk cache; ` +
        `bytes checked against the generated file), once more untimed, then timed ` +
        `(x-tierd-source: remote, no store GETs). Local: an uploaded but not evicted segment ` +
        `of the same partition (x-tierd-source: local), warmed once. ${ROUNDS} rounds, order ` +
        `alternating; value = median remote MB/s ÷ median local MB/s. The same with max_bytes ` +
        `1 MiB is in the details.`,
      settings: { chunk_size: "8 MiB (default)", cache: "default budget, fresh directory" },
      peers: { local: "the same API reading a local segment file", store: data.store.describe },
      notes: `max_bytes 8 MiB: warm remote ${h.warm_remote_mbps.median} MB/s vs local ` +
        `${h.local_mbps.median} MB/s; max_bytes 1 MiB ratio ${
          (results["max_bytes_1MiB"] as { ratio: number }).ratio
        }. A warm remote read hashes its bytes twice, which a local read does not: chunk ` +
        `block checksums (${bd.block_xxh3_only.median_ms} ms per ${
          (bd.bytes / 1e6).toFixed(1)
        } MB in-process) and the record checksum walk (${bd.record_walk_verify.median_ms} ms).`,
      ...results,
    });
    return headline;
  } finally {
    await data.close();
  }
}
