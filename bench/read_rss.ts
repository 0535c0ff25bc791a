// `read_peak_rss_mib_24x64mib`: the peak resident set of the agent (the compiled binary, `tierd
// run`) while 24 clients each read 64 MiB (`max_bytes=67108864`) of remote data through its HTTP
// API at once — first cold (an empty chunk cache: every byte comes from the store), then cached
// (a new process over the chunk cache the cold reads filled). The node-wide read memory budget
// (`agent.read_memory_budget`) holds reads back: a read that cannot reserve its bytes waits
// briefly, then answers 503 with Retry-After, and the client tries again after that many
// seconds. Every read is answered 200 in the end; how many 503s it took is reported.
import { loadConfig } from "../src/config/load.ts";
import { readBudgetBytes } from "../src/read/read_budget.ts";
import { join } from "node:path";
import { readStatus, waitForQuiet } from "./_proc.ts";
import { recordResult } from "./_results.ts";
import { MiB, progress, round } from "./_stats.ts";
import {
  LOCAL_RETENTION,
  metrics,
  metricSum,
  prepareReadData,
  READ_LAYOUT,
  type ReadData,
  type ReadSegment,
  recordsUrl,
  startServer,
  summary,
  type TierdServer,
  waitSettled,
} from "./read_common.ts";

/** Concurrent reads. */
const READS = 24;
/** Each read's `max_bytes`. */
const READ_BYTES = 64 * MiB;
/** How often the agent's /proc/<pid>/status is read. */
const SAMPLE_MS = 50;
/** A read refused more often than this fails the benchmark. */
const MAX_ATTEMPTS = 120;

/** One read's outcome. */
interface ReadOutcome {
  offset: string;
  bytes: number;
  /** 503 answers before its 200. */
  refused: number;
  source: string;
  seconds: number;
}

/** One phase: 24 concurrent reads on one agent process. */
interface Phase {
  phase: "cold" | "cached";
  peak_rss_mib: number;
  /** VmHWM once the agent was ready and settled, before the reads. */
  rss_before_reads_mib: number;
  /** VmRSS samples taken during the reads. */
  rss_during_reads_mib: ReturnType<typeof summary>;
  answered_200: number;
  answered_503: number;
  /** Reads that were refused at least once before their 200. */
  reads_refused_at_least_once: number;
  seconds: number;
  bytes: number;
  sources: Record<string, number>;
  store_gets: number;
  cache_hits: number;
  cache_misses: number;
  reads: ReadOutcome[];
}

/**
 * Where the reads start: `READS` batches spread evenly over the evicted range, each far enough
 * from its end that a 64 MiB read stays in remote data (when the range allows).
 */
function readStarts(evicted: ReadSegment[]): bigint[] {
  const total = evicted.reduce((n, s) => n + s.size, 0);
  const span = Math.max(0, total - READ_BYTES - 4 * MiB);
  const starts: bigint[] = [];
  for (let i = 0; i < READS; i++) {
    let pos = Math.floor(i * span / READS);
    let found: bigint | undefined;
    for (let s = 0; s < evicted.length && found === undefined; s++) {
      const seg = evicted[s];
      if (pos >= seg.size) {
        pos -= seg.size;
        continue;
      }
      // The first batch at or after `pos`, else the next segment's first.
      found = seg.entries.find((e) => e.position >= pos)?.offset ?? evicted[s + 1]?.start;
    }
    starts.push(found ?? evicted[0].start);
  }
  return starts;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One client's read: tries again after Retry-After while the agent answers 503. */
async function readOne(
  data: ReadData,
  server: TierdServer,
  offset: bigint,
): Promise<ReadOutcome> {
  const t0 = performance.now();
  let refused = 0;
  for (;;) {
    const res = await fetch(recordsUrl(data, server, offset, READ_BYTES));
    if (res.status === 503 && refused < MAX_ATTEMPTS) {
      refused++;
      const after = Number(res.headers.get("retry-after"));
      await res.body?.cancel();
      await sleep(1000 * (Number.isFinite(after) && after > 0 ? after : 1));
      continue;
    }
    if (res.status !== 200 || !res.body) {
      throw new Error(`read at ${offset} answered ${res.status}: ${await res.text()}`);
    }
    const first = res.headers.get("x-tierd-first-offset");
    if (first !== String(offset)) {
      await res.body.cancel();
      throw new Error(`read at ${offset} answered from offset ${first}`);
    }
    // Consumed as a stream: the client holds no 64 MiB buffers of its own.
    const reader = res.body.getReader();
    let bytes = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
    }
    if (bytes !== Number(res.headers.get("content-length")) || bytes === 0) {
      throw new Error(
        `read at ${offset}: ${bytes} bytes, content-length ${res.headers.get("content-length")}`,
      );
    }
    return {
      offset: String(offset),
      bytes,
      refused,
      source: res.headers.get("x-tierd-source") ?? "?",
      seconds: round((performance.now() - t0) / 1000, 3),
    };
  }
}

async function runPhase(
  data: ReadData,
  server: TierdServer,
  phase: Phase["phase"],
  starts: bigint[],
): Promise<Phase> {
  await waitSettled(server);
  const before = await metrics(server);
  const kib = async () => await readStatus(server.pid) ?? {};
  const beforeHwm = (await kib()).hwm ?? NaN;
  let peak = beforeHwm;
  const samples: number[] = [];
  let done = false;
  const sampling = (async () => {
    while (!done) {
      const s = await kib();
      if (s.hwm !== undefined) peak = Math.max(peak, s.hwm);
      if (s.rss !== undefined) {
        samples.push(s.rss / 1024);
        peak = Math.max(peak, s.rss);
      }
      await sleep(SAMPLE_MS);
    }
  })();
  const t0 = performance.now();
  let reads: ReadOutcome[];
  try {
    reads = await Promise.all(starts.map((offset) => readOne(data, server, offset)));
  } finally {
    done = true;
    await sampling;
  }
  const seconds = (performance.now() - t0) / 1000;
  const last = await kib();
  if (last.hwm !== undefined) peak = Math.max(peak, last.hwm);
  await waitSettled(server);
  const after = await metrics(server);
  const d = (name: string, filter = "") =>
    metricSum(after, name, filter) - metricSum(before, name, filter);
  const sources: Record<string, number> = {};
  for (const r of reads) sources[r.source] = (sources[r.source] ?? 0) + 1;
  const refused = reads.reduce((n, r) => n + r.refused, 0);
  return {
    phase,
    peak_rss_mib: round(peak / 1024, 1),
    rss_before_reads_mib: round(beforeHwm / 1024, 1),
    rss_during_reads_mib: summary(samples, 1),
    answered_200: reads.length,
    answered_503: refused,
    reads_refused_at_least_once: reads.filter((r) => r.refused > 0).length,
    seconds: round(seconds, 2),
    bytes: reads.reduce((n, r) => n + r.bytes, 0),
    sources,
    store_gets: d("tierd_store_requests_total", 'op="get"'),
    cache_hits: d("tierd_cache_hits_total"),
    cache_misses: d("tierd_cache_misses_total"),
    reads,
  };
}

/** Runs the benchmark and records its figure. @returns the peak RSS in MiB */
export async function runReadRssBench(): Promise<number> {
  const data = await prepareReadData("read_rss");
  try {
    const evicted = data.segments.filter((s) => s.evicted);
    const evictedBytes = evicted.reduce((n, s) => n + s.size, 0);
    const starts = readStarts(evicted);
    const phases: Phase[] = [];
    let budget = NaN;
    for (const phase of ["cold", "cached"] as const) {
      await waitForQuiet(20_000);
      // The cached phase is a new process (its own high-water mark) over the cold one's cache.
      const server = await startServer(data, { name: "rss", keepCache: phase === "cached" });
      try {
        if (phase === "cold") {
          const cfg = await loadConfig(join(data.runDir, "tierd-rss.toml"), {
            ...Deno.env.toObject(),
            TIERD_S3_ACCESS_KEY: data.store.accessKey,
            TIERD_S3_SECRET_KEY: data.store.secretKey,
          });
          budget = readBudgetBytes(cfg.agent.read_memory_budget, cfg.tiered_storage.cache.size);
        }
        const p = await runPhase(data, server, phase, starts);
        phases.push(p);
        progress(
          "read_rss",
          `${phase}: peak RSS ${p.peak_rss_mib} MiB (${p.rss_before_reads_mib} MiB before the ` +
            `reads); ${p.answered_200} answered 200, ${p.answered_503} answers 503 ` +
            `(${p.reads_refused_at_least_once} reads refused at least once); ` +
            `${(p.bytes / MiB).toFixed(0)} MiB in ${p.seconds} s; sources ` +
            `${JSON.stringify(p.sources)}; ${p.store_gets} store GETs`,
        );
      } finally {
        await server.stop();
      }
    }
    const value = Math.max(...phases.map((p) => p.peak_rss_mib));
    const line = (p: Phase) =>
      `${p.phase}: peak ${p.peak_rss_mib} MiB (${p.rss_before_reads_mib} MiB before), ` +
      `${p.answered_200} answered 200 and ${p.answered_503} answered 503 + Retry-After ` +
      `(${p.reads_refused_at_least_once} of ${READS} reads refused at least once), ` +
      `${p.seconds} s, ${p.store_gets} store GETs`;
    recordResult("read_peak_rss_mib_24x64mib", value, "≤ 768", {
      method: `tierd: the compiled binary (\`tierd run\`, default settings) over one Iggy 0.9 ` +
        `partition whose ${evicted.length} oldest ${READ_LAYOUT.segmentSize / MiB} MiB ` +
        `segments (${(evictedBytes / MiB).toFixed(0)} MiB) were copied to ` +
        `${data.store.describe} and evicted by the agent (local_retention_size ` +
        `${LOCAL_RETENTION}). ${READS} clients in the bench process each read ` +
        `\`max_bytes=${READ_BYTES}\` at once, starting at batches spread evenly over the ` +
        `evicted range (so the answers are remote data), each body consumed as a stream; a 503 ` +
        `(the read memory budget is spent) is tried again after its Retry-After, until 200. ` +
        `Two phases, each on its own agent process: cold (an empty chunk cache) and cached (a ` +
        `new process over the cache the cold phase filled). /proc/<pid>/status of the agent is ` +
        `read every ${SAMPLE_MS} ms during the reads and once after; a phase's peak is the ` +
        `largest VmHWM (high-water mark, so peaks between samples count) or VmRSS seen. The ` +
        `value is the higher of the two phases' peaks, in MiB (2^20 bytes).`,
      settings: {
        read_memory_budget: `0 (default) = ${round(budget / MiB, 1)} MiB (a sixteenth of the ` +
          `cache size, between 64 MiB and 512 MiB)`,
        budget_wait_ms: "2000 (a read waits this long in line before its 503)",
        max_bytes: READ_BYTES,
        reads: READS,
        chunk_size: "8 MiB (default)",
      },
      peers: { store: data.store.describe },
      notes: phases.map(line).join("; "),
      phases,
    });
    return value;
  } finally {
    await data.close();
  }
}
