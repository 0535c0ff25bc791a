// `iggy_tcp_*`: tierd's binary front (`[agent.iggy_tcp]`) against the real Iggy 0.8.0 broker it
// fronts, in one run, with one client (bench/_iggy_client.ts) driving every path the same way:
// - `iggy_tcp_produce_ratio` (one connection) and `iggy_tcp_produce_ratio_4conn` (four in
//   parallel, one partition each): SendMessages throughput, batches of 100 messages of 1 KiB, each
//   connection sending one batch at a time, through the front ÷ straight to the broker;
// - `iggy_tcp_local_poll_ratio`: PollMessages by offset, count 100, walking forward through ~50 MB
//   of the tiered topic's offsets the broker still has, through the front ÷ direct;
// - `iggy_tcp_{ping,poll1}_added_{p50,p99}_us`: what the front adds to the round trip of a Ping
//   and of a one-message poll of local data, interleaved blocks of many round trips;
// - `iggy_tcp_cold_poll_mb_s` and `iggy_tcp_cold_poll_ratio_vs_api`: polls of the evicted range
//   from offset 0 (1000 messages per poll) through the front, ÷ tierd's own raw scan of the same
//   range over its HTTP API with the same number of messages per request, each on a freshly
//   started agent with an empty cache directory;
// - `iggy_json_poll_peak_rss_mib_24`: the agent's peak resident set while 24 clients at once poll
//   the evicted range from offset 0 with the largest count (u32::MAX) through tierd's
//   Iggy-compatible HTTP listener (`[agent.iggy_http]`), each answer JSON with base64 payloads.
// Beside direct and front, the first three also run through a bare byte relay (bench/read_proxy.ts
// with no delay, its own process): the cost of one more TCP hop on this machine, which any proxy
// pays, so that a missed ratio can be split into the hop and what tierd adds to it.
// The broker is 0.8.0 as shipped in shared/iggy (one shard), with 16 MiB segments; tierd is the
// compiled binary, copying to an fs store and evicting through the broker's API.
import { loadConfig } from "../src/config/load.ts";
import { readBudgetBytes } from "../src/read/read_budget.ts";
import { findIggy, IGGY_ROOT, type IggyServer, startIggy } from "../test/fixtures/iggy.ts";
import { IggyHttp } from "../test/e2e/_iggy_http.ts";
import { logStarts } from "../test/e2e/_iggy_watch.ts";
import { seededUint32 } from "../src/base/rng.ts";
import { concatBytes } from "../src/base/bytes.ts";
import type { PollMessagesRequest } from "../src/iggy_tcp/wire.ts";
import {
  IggyTcpClient,
  pingFrame,
  polledCount,
  pollFrame,
  sendMessagesFrame,
} from "./_iggy_client.ts";
import {
  agentPartitions,
  type IggyAgent,
  pidInDir,
  pidWithArgs,
  startIggyAgent,
} from "./_iggy_agent.ts";
import { NO_GOAL, recordNotMeasured, recordResult } from "./_results.ts";
import { median, MiB, progress, round } from "./_stats.ts";
import { readCpu, readStatus, waitForQuiet } from "./_proc.ts";
import { metrics, metricSum, summary, waitSettled } from "./read_common.ts";
import { type DelayProxy, startDelayProxy } from "./read_proxy.ts";

const BENCH = "iggy_tcp";
/** Payload bytes of every message. */
const PAYLOAD = 1024;
/** A 0.8 message as stored and as polled: its 64-byte header and payload. */
const RECORD = 64 + PAYLOAD;
/** Messages per SendMessages request. */
const BATCH = 100;
/** The broker's segment size (its shipped test config says 1 MiB). */
const SEGMENT = "16 MiB";
/** Messages written to the tiered topic: about 11 segments of 16 MiB. */
const COLD_MESSAGES = 170_000;
/** tierd's local retention of that topic: the rest, about 7 segments, is evicted. */
const LOCAL_RETENTION = "64 MiB";
/** How far the local-poll walk goes, in messages (about 50 MB). */
const LOCAL_WALK = 46_000;
/** Messages per poll of the local walk and of the cold scan. */
const LOCAL_COUNT = 100;
const COLD_COUNT = 1000;
/** Seconds of one produce run. */
const PRODUCE_SECONDS = 2;
/** Round trips per path, in interleaved blocks. */
const PING_TRIPS = 4000;
const POLL1_TRIPS = 2000;
const BLOCK = 250;
/** Clients polling the evicted range at once through the Iggy HTTP listener, and their count. */
const JSON_POLLS = 24;
const JSON_POLL_COUNT = 4_294_967_295;
/** How often the agent's /proc/<pid>/status is read during those polls. */
const RSS_SAMPLE_MS = 50;
/** A poll answered 503 more often than this fails the benchmark. */
const MAX_POLL_ATTEMPTS = 60;

/** Options of {@link runIggyTcpBench}. */
export interface IggyTcpBenchOptions {
  /** Runs of each path per throughput figure; the median counts. @default 3 */
  rounds?: number;
}

/** How a client reaches the broker: straight, through a bare byte relay, through tierd's front. */
type Path = "direct" | "relay" | "front";
const PATHS: readonly Path[] = ["direct", "relay", "front"];

const PATH_LABEL: Record<Path, string> = {
  direct: "direct to the Iggy 0.8.0 broker (the machine's own limit)",
  relay:
    "through a bare byte relay (bench/read_proxy.ts, no delay): one more TCP hop, nothing else",
  front: "through tierd's binary front",
};

/** Everything the measurements share. */
interface Setup {
  broker: IggyServer;
  dir: string;
  stream: number;
  /** The tiered topic (one partition): evicted [0, firstLocal), local [firstLocal, end). */
  cold: number;
  /** The produce topic: four partitions, not tiered. */
  produce: number;
  firstLocal: bigint;
  /** Start of the broker's second local segment: tierd answers polls below it once copied. */
  secondLocal: bigint;
  end: bigint;
  /** Evicted / local segments after tiering, and how long tiering took. */
  tiering: { remote: number; local: number; seconds: number };
}

/** The running paths and the processes whose CPU time is sampled around each run. */
interface Paths {
  address: Record<Path, string>;
  pids: Record<string, number | undefined>;
  /** The agent whose front is the `front` path (its metrics are read between walks). */
  agent: IggyAgent;
}

const LOGIN = { username: IGGY_ROOT.username, password: IGGY_ROOT.password };

/** CPU seconds (user + system) of each process, so far. */
async function cpuOf(pids: Record<string, number | undefined>): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    const c = pid === undefined ? undefined : await readCpu(pid);
    if (c) out[name] = c.user + c.system;
  }
  return out;
}

function cpuDelta(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(b)) if (k in a) out[k] = round(b[k] - a[k], 2);
  return out;
}

/** Median per process of several CPU deltas. */
function cpuMedian(runs: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(runs[0] ?? {})) out[k] = round(median(runs.map((r) => r[k])), 2);
  return out;
}

/** The payloads every batch carries (the same bytes each time; the broker does not dedupe). */
function payloads(seed: number): Uint8Array[] {
  const next = seededUint32(seed);
  return Array.from({ length: BATCH }, () => {
    const p = new Uint8Array(PAYLOAD);
    const v = new DataView(p.buffer);
    for (let i = 0; i < PAYLOAD; i += 4) v.setUint32(i, next(), true);
    return p;
  });
}

/** A poll of the tiered topic's partition by offset, as consumer 1, without auto-commit. */
function pollRequest(
  t: { stream: number; cold: number },
  offset: bigint,
  count: number,
): PollMessagesRequest {
  return {
    consumer: { kind: "consumer", id: { kind: "numeric", id: 1 } },
    streamId: { kind: "numeric", id: t.stream },
    topicId: { kind: "numeric", id: t.cold },
    partitionId: 0,
    strategy: { kind: "offset", value: offset },
    count,
    autoCommit: false,
  };
}

/** Writes the tiered topic, starts tierd over it and waits until the oldest segments are evicted. */
async function prepare(
  broker: IggyServer,
  dir: string,
): Promise<{ setup: Setup; agent: IggyAgent }> {
  const http = new IggyHttp(broker.httpUrl);
  await http.login(IGGY_ROOT.username, IGGY_ROOT.password);
  const stream = await http.createStream("bench");
  const cold = await http.createTopic(stream, { name: "tiered", partitions: 1 });
  const produce = await http.createTopic(stream, { name: "produce", partitions: 4 });
  const writer = await IggyTcpClient.connect(broker.tcpAddress, LOGIN);
  const frame = sendMessagesFrame({ stream, topic: cold, partition: 0, payloads: payloads(1) });
  progress(BENCH, `writing ${COLD_MESSAGES} messages of ${PAYLOAD} B to the tiered topic…`);
  for (let sent = 0; sent < COLD_MESSAGES; sent += BATCH) {
    const a = await writer.request(frame);
    if (a.status !== 0) throw new Error(`SendMessages answered status ${a.status}`);
  }
  await http.flush(stream, cold, 0);
  const began = performance.now();
  const agent = await startIggyAgent({
    dir,
    broker,
    stream,
    topic: cold,
    localRetention: LOCAL_RETENTION,
    name: "main",
  });
  try {
    /** The broker's first retained offset of the tiered partition (a `first` poll). */
    const first = async () => {
      const a = await writer.request(pollFrame({
        ...pollRequest({ stream, cold }, 0n, 1),
        strategy: { kind: "first", value: 0n },
      }));
      if (a.status !== 0 || polledCount(a.payload) !== 1) throw new Error("a first poll failed");
      // After the 16-byte head: checksum u64, id u128, then the offset.
      return new DataView(a.payload.buffer, a.payload.byteOffset + 40, 8).getBigUint64(0, true);
    };
    const deadline = Date.now() + 120_000;
    let last = "";
    let stableSince = Date.now();
    let view;
    for (;;) {
      view = (await agentPartitions(agent)).find((p) => p.topic === cold && p.partition === 0);
      const now = `${JSON.stringify(view?.segments)} ${await first()}`;
      if (now !== last) stableSince = Date.now();
      last = now;
      const s = view?.segments;
      if (s && s.remote > 0 && s.dangling === 0 && Date.now() - stableSince > 2000) break;
      if (Date.now() > deadline) {
        throw new Error(`tiering did not settle: ${now}; tierd: ${agent.logTail()}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const firstLocal = await first();
    const starts = await logStarts(
      `${broker.dataDir}/streams/${stream}/topics/${cold}/partitions/0`,
    );
    const setup: Setup = {
      broker,
      dir,
      stream,
      cold,
      produce,
      firstLocal,
      secondLocal: starts.find((o) => o > firstLocal) ?? BigInt(COLD_MESSAGES),
      end: BigInt(COLD_MESSAGES),
      tiering: {
        remote: view!.segments.remote,
        local: view!.segments.local,
        seconds: round((performance.now() - began) / 1000, 1),
      },
    };
    progress(
      BENCH,
      `tiered in ${setup.tiering.seconds} s: ${view!.segments.remote} segments evicted, offsets ` +
        `[0, ${firstLocal}) only in the store, [${firstLocal}, ${setup.end}) local`,
    );
    return { setup, agent };
  } catch (err) {
    await agent.stop();
    throw err;
  } finally {
    writer.close();
  }
}

/** The order of the paths in round `r`: rotated, so drift favours none. */
function order(r: number): Path[] {
  return PATHS.map((_, i) => PATHS[(i + r) % PATHS.length]);
}

/** One logged-in client per path. */
async function connectAll(paths: Paths): Promise<Record<Path, IggyTcpClient>> {
  return {
    direct: await IggyTcpClient.connect(paths.address.direct, LOGIN),
    relay: await IggyTcpClient.connect(paths.address.relay, LOGIN),
    front: await IggyTcpClient.connect(paths.address.front, LOGIN),
  };
}

/** The median of `pick` over each path's runs, and each path's ratio to direct. */
function byPath<T>(runs: Record<Path, T[]>, pick: (t: T) => number) {
  const med = (p: Path) => round(median(runs[p].map(pick)), 1);
  return {
    med,
    ratio: (p: Path) => round(med(p) / med("direct"), 3),
  };
}

interface ProduceRun {
  messages: number;
  seconds: number;
  msgsPerSecond: number;
  mbPerSecond: number;
  cpu: Record<string, number>;
}

/** Each client sends its frame, one at a time, until `seconds` have passed. */
async function produceRun(
  clients: IggyTcpClient[],
  frames: Uint8Array[],
  seconds: number,
  pids: Record<string, number | undefined>,
): Promise<ProduceRun> {
  const before = await cpuOf(pids);
  const t0 = performance.now();
  const until = t0 + seconds * 1000;
  const counts = await Promise.all(clients.map(async (c, i) => {
    let n = 0;
    while (performance.now() < until) {
      const a = await c.request(frames[i]);
      if (a.status !== 0) throw new Error(`SendMessages answered status ${a.status}`);
      n++;
    }
    return n;
  }));
  const elapsed = (performance.now() - t0) / 1000;
  const messages = counts.reduce((a, b) => a + b, 0) * BATCH;
  return {
    messages,
    seconds: round(elapsed, 3),
    msgsPerSecond: round(messages / elapsed, 0),
    mbPerSecond: round(messages * PAYLOAD / 1e6 / elapsed, 1),
    cpu: cpuDelta(before, await cpuOf(pids)),
  };
}

async function measureProduce(s: Setup, paths: Paths, rounds: number): Promise<void> {
  const data = payloads(2);
  const frames = [0, 1, 2, 3].map((partition) =>
    sendMessagesFrame({ stream: s.stream, topic: s.produce, partition, payloads: data })
  );
  const sets = await Promise.all(frames.map(() => connectAll(paths)));
  const clients = (p: Path, n: number) => sets.slice(0, n).map((set) => set[p]);
  try {
    for (const conns of [1, 4]) {
      for (const p of PATHS) await produceRun(clients(p, conns), frames, 0.5, paths.pids);
      const runs: Record<Path, ProduceRun[]> = { direct: [], relay: [], front: [] };
      for (let r = 0; r < rounds; r++) {
        for (const p of order(r)) {
          runs[p].push(await produceRun(clients(p, conns), frames, PRODUCE_SECONDS, paths.pids));
        }
      }
      const msgs = byPath(runs, (x) => x.msgsPerSecond);
      const mb = byPath(runs, (x) => x.mbPerSecond);
      const ratio = msgs.ratio("front");
      progress(
        BENCH,
        `produce, ${conns} connection(s): ` +
          PATHS.map((p) => `${p} ${msgs.med(p)} msg/s (${mb.med(p)} MB/s)`).join(", ") +
          `: front ÷ direct ${ratio}, relay ÷ direct ${msgs.ratio("relay")}`,
      );
      const key = conns === 1 ? "iggy_tcp_produce_ratio" : "iggy_tcp_produce_ratio_4conn";
      recordResult(key, ratio, "≥ 0.9", {
        method: `SendMessages (101) requests of ${BATCH} messages of ${PAYLOAD} B (no user ` +
          `headers; a ${frames[0].length}-byte frame, encoded once by bench/_iggy_client.ts as ` +
          `Iggy 0.8's send_messages.rs lays it out) to a 4-partition topic tierd does not tier, ` +
          `${
            conns === 1 ? "over one connection" : "over four connections in parallel, one " +
              "partition each"
          }, each sending its next request when the previous one is answered, ` +
          `for ${PRODUCE_SECONDS} s per run; ${rounds} runs per path (direct, bare relay, front), ` +
          `the order rotated each round, after a 0.5 s warm-up of each. The value is the median ` +
          `messages/s through tierd's front ÷ the median straight to the broker. MB/s counts ` +
          `payload bytes. The same logged-in connections serve every run; tierd runs (idle) ` +
          `during the direct and relay runs too. Client, relay, tierd and broker share the ` +
          `machine's ${navigator.hardwareConcurrency} cores; CPU seconds per run are in the details.`,
        peers: Object.fromEntries(PATHS.map((p) => [PATH_LABEL[p], {
          msgs_per_s: msgs.med(p),
          mb_per_s: mb.med(p),
          ratio_to_direct: msgs.ratio(p),
        }])),
        connections: conns,
        frame_bytes: frames[0].length,
        relay_ratio: msgs.ratio("relay"),
        runs,
        cpu_seconds_per_run_median: Object.fromEntries(
          PATHS.map((p) => [p, cpuMedian(runs[p].map((x) => x.cpu))]),
        ),
        notes: `msg/s: direct ${msgs.med("direct")} (${mb.med("direct")} MB/s), bare relay ` +
          `${msgs.med("relay")} (${msgs.ratio("relay")} of direct), front ${msgs.med("front")} ` +
          `(${mb.med("front")} MB/s)`,
      });
    }
  } finally {
    for (const set of sets) for (const c of Object.values(set)) c.close();
  }
}

interface WalkRun {
  messages: number;
  seconds: number;
  mbPerSecond: number;
  cpu: Record<string, number>;
  /** Seconds of each poll, in order. */
  pollSeconds: number[];
}

/** Sends each poll frame in turn, checking each answer's message count. */
async function walk(
  client: IggyTcpClient,
  frames: { frame: Uint8Array; count: number }[],
  pids: Record<string, number | undefined>,
): Promise<WalkRun> {
  const before = await cpuOf(pids);
  const t0 = performance.now();
  let messages = 0;
  const pollSeconds: number[] = [];
  for (const { frame, count } of frames) {
    const t = performance.now();
    const a = await client.request(frame);
    pollSeconds.push((performance.now() - t) / 1000);
    if (a.status !== 0 || polledCount(a.payload) !== count) {
      throw new Error(`a poll answered status ${a.status}, not ${count} messages`);
    }
    messages += count;
  }
  const seconds = (performance.now() - t0) / 1000;
  return {
    messages,
    seconds: round(seconds, 3),
    mbPerSecond: round(messages * RECORD / 1e6 / seconds, 1),
    cpu: cpuDelta(before, await cpuOf(pids)),
    pollSeconds,
  };
}

/** Poll frames from `from`, `count` messages each, up to `until` (exclusive). */
function walkFrames(s: Setup, from: bigint, until: bigint, count: number) {
  const out: { frame: Uint8Array; count: number }[] = [];
  for (let o = from; o < until; o += BigInt(count)) {
    const n = Number(until - o < BigInt(count) ? until - o : BigInt(count));
    out.push({ frame: pollFrame(pollRequest(s, o, n)), count: n });
  }
  return out;
}

/** @returns the broker's own MB/s answering polls of `COLD_COUNT` local messages */
async function measureLocalPoll(s: Setup, paths: Paths, rounds: number): Promise<number> {
  const span = s.end - s.firstLocal < BigInt(LOCAL_WALK)
    ? s.end - s.firstLocal
    : BigInt(LOCAL_WALK);
  const frames = walkFrames(s, s.firstLocal, s.firstLocal + span, LOCAL_COUNT);
  const clients = await connectAll(paths);
  const walks = Math.max(rounds, 5);
  try {
    // The same bytes on every path (a sample), and a warm-up walk of each (page cache).
    const sample = (await clients.direct.request(frames[1].frame)).payload.slice();
    for (const p of PATHS) {
      if (!sameBytes(sample, (await clients[p].request(frames[1].frame)).payload)) {
        throw new Error(`the ${p} path answered a local poll otherwise than the broker`);
      }
      await walk(clients[p], frames, paths.pids);
    }
    const runs: Record<Path, WalkRun[]> = { direct: [], relay: [], front: [] };
    const readPathBytes: number[] = []; // per front walk: record bytes tierd's read path produced
    for (let r = 0; r < walks; r++) {
      for (const p of order(r)) {
        const before = p === "front" ? await metrics(paths.agent) : undefined;
        runs[p].push(await walk(clients[p], frames, paths.pids));
        if (before) {
          const after = await metrics(paths.agent);
          readPathBytes.push(
            metricSum(after, "tierd_read_bytes_total") -
              metricSum(before, "tierd_read_bytes_total"),
          );
        }
      }
    }
    // The machine's own limit for the cold scan's request size: the broker answering 1000.
    const big = walkFrames(s, s.firstLocal, s.firstLocal + span, COLD_COUNT);
    const bigRuns: number[] = [];
    for (let i = 0; i < 3; i++) {
      bigRuns.push((await walk(clients.direct, big, paths.pids)).mbPerSecond);
    }
    const direct1000 = median(bigRuns);
    const mb = byPath(runs, (x) => x.mbPerSecond);
    const ratio = mb.ratio("front");
    const msgs = (p: Path) => round(mb.med(p) * 1e6 / RECORD, 0);
    // The walk in two parts: the broker's first local segment (the segment an eviction may take
    // next: forwarded, the broker's answer checked; tierd reads it only when the broker no longer
    // has it) and the later segments (forwarded on the partition's last plan).
    const firstPart = frames.filter((_, i) =>
      s.firstLocal + BigInt(i * LOCAL_COUNT) < s.secondLocal
    ).length;
    const part = (from: number, to: number) => {
      const bytes = frames.slice(from, to).reduce((n, f) => n + f.count * RECORD, 0);
      const mbps = (r: WalkRun) =>
        bytes / 1e6 / r.pollSeconds.slice(from, to).reduce((a, b) => a + b, 0);
      const by = byPath(runs, mbps);
      return Object.fromEntries(
        PATHS.map((p) => [p, { mb_per_s: by.med(p), ratio_to_direct: by.ratio(p) }]),
      ) as Record<Path, { mb_per_s: number; ratio_to_direct: number }>;
    };
    // Per poll (µs, the median over every poll of every walk): what the front and the relay add
    // to the broker's own round trip, to split a missed ratio into the hop and tierd's share.
    const pollUs = (p: Path) => {
      const all = runs[p].flatMap((r) => r.pollSeconds).sort((a, b) => a - b);
      return round(median(all) * 1e6, 0);
    };
    const perPoll = {
      direct_us: pollUs("direct"),
      relay_added_us: pollUs("relay") - pollUs("direct"),
      front_added_us: pollUs("front") - pollUs("direct"),
    };
    const head = part(0, firstPart);
    const rest = part(firstPart, frames.length);
    const headBytes = frames.slice(0, firstPart).reduce((n, f) => n + f.count * RECORD, 0);
    const readPath = {
      bytes_per_walk: median(readPathBytes),
      per_byte_answered_of_the_first_local_segment: round(median(readPathBytes) / headBytes, 2),
    };
    const parts = {
      [`first local segment, offsets [${s.firstLocal}, ${s.secondLocal}): ${firstPart} polls`]:
        head,
      [`later segments: ${frames.length - firstPart} polls`]: rest,
    };
    progress(
      BENCH,
      `local polls of the first local segment: front ${head.front.mb_per_s} MB/s ` +
        `(${head.front.ratio_to_direct} of direct); of later segments: front ` +
        `${rest.front.mb_per_s} MB/s (${rest.front.ratio_to_direct}), relay ` +
        `${rest.relay.ratio_to_direct}`,
    );
    progress(
      BENCH,
      `local polls: ${PATHS.map((p) => `${p} ${mb.med(p)} MB/s`).join(", ")}: front ÷ direct ` +
        `${ratio}, relay ÷ direct ${mb.ratio("relay")}`,
    );
    recordResult("iggy_tcp_local_poll_ratio", ratio, "≥ 0.9", {
      method: `PollMessages by offset, count ${LOCAL_COUNT}, walking forward from the broker's ` +
        `first retained offset of the tiered topic's partition through ${span} messages ` +
        `(${round(Number(span) * RECORD / 1e6, 1)} MB of ${RECORD}-byte records, all still ` +
        `local; every poll is forwarded, on the partition's last plan once one is made, and ` +
        `the broker's answer checked to start where asked), one request at a time on one logged-in ` +
        `connection per path; ${walks} walks per path (direct, bare relay, front), the order ` +
        `rotated each round, after one warm-up walk of each. The value is the median MB/s ` +
        `through tierd's front ÷ the median straight to the broker. A sample answer is checked ` +
        `byte for byte equal on every path.`,
      peers: Object.fromEntries(PATHS.map((p) => [PATH_LABEL[p], {
        mb_per_s: mb.med(p),
        msgs_per_s: msgs(p),
        ratio_to_direct: mb.ratio(p),
      }])),
      relay_ratio: mb.ratio("relay"),
      per_poll_median: perPoll,
      parts,
      tierd_read_path_bytes: readPath,
      runs: Object.fromEntries(
        PATHS.map((p) => [p, runs[p].map(({ pollSeconds: _, ...r }) => r)]),
      ),
      cpu_seconds_per_walk_median: Object.fromEntries(
        PATHS.map((p) => [p, cpuMedian(runs[p].map((x) => x.cpu))]),
      ),
      notes: `MB/s: direct ${mb.med("direct")} (${msgs("direct")} msg/s), bare relay ` +
        `${mb.med("relay")} (${mb.ratio("relay")} of direct), front ${mb.med("front")} ` +
        `(${msgs("front")} msg/s); front ÷ direct over the first local segment ` +
        `${head.front.ratio_to_direct} (tierd's read path read ` +
        `${readPath.per_byte_answered_of_the_first_local_segment} bytes per byte answered: ` +
        `nothing, when every poll went to the broker), over later segments ` +
        `${rest.front.ratio_to_direct}. Median poll: direct ${perPoll.direct_us} µs, the relay ` +
        `adds ${perPoll.relay_added_us} µs, the front ${perPoll.front_added_us} µs — the bound: ` +
        `no proxy here beats the bare relay's ${mb.ratio("relay")}, and the front's share ` +
        `beyond it is its runtime's socket handling of each answer's chunks`,
    });
    return direct1000;
  } finally {
    for (const c of Object.values(clients)) c.close();
  }
}

/** The nearest-rank quantile of sorted values. */
function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

async function measureLatency(s: Setup, paths: Paths): Promise<void> {
  const clients = await connectAll(paths);
  // One-message polls at seeded offsets over the local range, the same sequence on every path.
  const next = seededUint32(7);
  const span = Number(s.end - s.firstLocal);
  const pollFrames = Array.from(
    { length: POLL1_TRIPS },
    () => pollFrame(pollRequest(s, s.firstLocal + BigInt(next() % span), 1)),
  );
  const ping = pingFrame();
  const kinds = [
    { name: "ping", what: "Ping (code 1, no payload)", trips: PING_TRIPS, frame: () => ping },
    {
      name: "poll1",
      what: "PollMessages of one message by offset, at seeded offsets over the local range",
      trips: POLL1_TRIPS,
      frame: (i: number) => pollFrames[i],
    },
  ];
  try {
    for (const k of kinds) {
      const samples: Record<Path, number[]> = { direct: [], relay: [], front: [] };
      for (const p of PATHS) {
        for (let i = 0; i < 200; i++) await clients[p].request(k.frame(i)); // warm-up
      }
      for (let b = 0; b * BLOCK < k.trips; b++) {
        for (const p of order(b)) {
          for (let i = b * BLOCK; i < Math.min(k.trips, (b + 1) * BLOCK); i++) {
            const t0 = performance.now();
            const a = await clients[p].request(k.frame(i));
            samples[p].push((performance.now() - t0) * 1000);
            if (a.status !== 0) throw new Error(`${k.name} answered status ${a.status}`);
          }
        }
      }
      const sorted = Object.fromEntries(
        PATHS.map((p) => [p, [...samples[p]].sort((a, b) => a - b)]),
      ) as Record<Path, number[]>;
      const q = (p: Path, x: number) => round(quantile(sorted[p], x), 1);
      const stat = (p: Path) => ({
        p50_us: q(p, 0.5),
        p90_us: q(p, 0.9),
        p99_us: q(p, 0.99),
        max_us: q(p, 1),
      });
      progress(
        BENCH,
        `${k.name}: ` +
          PATHS.map((p) => `${p} p50 ${q(p, 0.5)} µs p99 ${q(p, 0.99)} µs`).join("; "),
      );
      for (const [quant, label] of [[0.5, "p50"], [0.99, "p99"]] as const) {
        const added = (p: Path) => round(q(p, quant) - q("direct", quant), 1);
        recordResult(`iggy_tcp_${k.name}_added_${label}_us`, added("front"), NO_GOAL, {
          method: `${k.what}: ${k.trips} round trips per path (direct, bare relay, front) on ` +
            `one logged-in connection each, in interleaved blocks of ${BLOCK} (the order ` +
            `rotated each block), after 200 warm-up trips; each timed from before the ` +
            `request's write to its whole answer. The value is the ${label} through tierd's ` +
            `front minus the ${label} straight to the broker, in µs (quantiles of each path's ` +
            `own samples, not of paired differences).`,
          peers: Object.fromEntries(PATHS.map((p) => [PATH_LABEL[p], stat(p)])),
          relay_added_us: added("relay"),
          notes: `${label}: direct ${q("direct", quant)} µs, bare relay ${q("relay", quant)} µs ` +
            `(+${added("relay")}), front ${q("front", quant)} µs`,
        });
      }
    }
  } finally {
    for (const c of Object.values(clients)) c.close();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One client's JSON poll of the evicted range. */
interface JsonPoll {
  /** Bytes of its 200 answer's body. */
  bytes: number;
  /** 503 answers before its 200. */
  refused: number;
  seconds: number;
  /** The body's chunks, when kept (for the one answer that is parsed). */
  chunks?: Uint8Array[];
}

/**
 * One client's poll through the Iggy HTTP listener: tries again after Retry-After while tierd
 * answers 503, then reads the whole body as a stream, counting its bytes (keeping them if `keep`).
 */
async function jsonPollOne(url: string, token: string, keep: boolean): Promise<JsonPoll> {
  const t0 = performance.now();
  let refused = 0;
  for (;;) {
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(300_000),
    });
    if (res.status === 503) {
      refused++;
      const after = Number(res.headers.get("retry-after"));
      await res.body?.cancel();
      if (refused >= MAX_POLL_ATTEMPTS) {
        throw new Error(`a JSON poll was answered 503 ${refused} times`);
      }
      await sleep(1000 * (Number.isFinite(after) && after > 0 ? after : 1));
      continue;
    }
    if (res.status !== 200 || !res.body) {
      throw new Error(`a JSON poll answered ${res.status}: ${(await res.text()).slice(0, 500)}`);
    }
    const chunks: Uint8Array[] | undefined = keep ? [] : undefined;
    let bytes = 0;
    for await (const chunk of res.body) {
      bytes += chunk.byteLength;
      chunks?.push(chunk);
    }
    if (bytes === 0) throw new Error("a JSON poll answered 200 with an empty body");
    return { bytes, refused, seconds: round((performance.now() - t0) / 1000, 3), chunks };
  }
}

/** Checks one poll answer: JSON whose `messages` start at offset 0. @returns what it holds */
function checkJsonAnswer(chunks: Uint8Array[]): { messages: number; lastOffset: number } {
  const answer = JSON.parse(new TextDecoder().decode(concatBytes(chunks))) as {
    messages?: { header?: { offset?: number } }[];
  };
  const messages = answer.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new Error("a JSON poll of the evicted range answered no messages");
  }
  if (messages[0].header?.offset !== 0) {
    throw new Error(`a JSON poll from offset 0 answered from ${messages[0].header?.offset}`);
  }
  return { messages: messages.length, lastOffset: messages[messages.length - 1].header?.offset! };
}

/**
 * `iggy_json_poll_peak_rss_mib_24`: `JSON_POLLS` clients at once poll the evicted range from
 * offset 0 with count u32::MAX through tierd's Iggy HTTP listener, with the broker's JWT, while
 * the agent's /proc/<pid>/status is sampled; the value is the largest VmRSS seen.
 */
async function measureJsonPollMemory(s: Setup, agent: IggyAgent): Promise<void> {
  const http = new IggyHttp(s.broker.httpUrl);
  await http.login(IGGY_ROOT.username, IGGY_ROOT.password);
  const token = http.token!;
  const cfg = await loadConfig(agent.config, {
    ...Deno.env.toObject(),
    TIERD_BROKER_PASSWORD: IGGY_ROOT.password,
  });
  const budget = readBudgetBytes(cfg.agent.read_memory_budget, cfg.tiered_storage.cache.size);
  const url = `${agent.iggyHttpUrl}/streams/${s.stream}/topics/${s.cold}/messages?consumer_id=1` +
    `&partition_id=0&kind=offset&value=0&count=${JSON_POLL_COUNT}`;
  await waitSettled(agent, 200);
  progress(
    BENCH,
    `json poll: ${JSON_POLLS} clients polling offsets from 0 (count ${JSON_POLL_COUNT}) ` +
      `through the Iggy HTTP listener at once, sampling tierd's RSS every ${RSS_SAMPLE_MS} ms…`,
  );
  const before = await metrics(agent);
  const status0 = await readStatus(agent.pid) ?? {};
  let peakKiB = status0.rss ?? 0;
  const samples: number[] = [];
  let done = false;
  const sampling = (async () => {
    while (!done) {
      const st = await readStatus(agent.pid);
      if (st?.rss !== undefined) {
        samples.push(st.rss / 1024);
        peakKiB = Math.max(peakKiB, st.rss);
      }
      await sleep(RSS_SAMPLE_MS);
    }
  })();
  const t0 = performance.now();
  let polls: JsonPoll[];
  try {
    polls = await Promise.all(
      Array.from({ length: JSON_POLLS }, (_, i) => jsonPollOne(url, token, i === 0)),
    );
  } finally {
    done = true;
    await sampling;
  }
  const seconds = (performance.now() - t0) / 1000;
  const status1 = await readStatus(agent.pid) ?? {};
  if (status1.rss !== undefined) peakKiB = Math.max(peakKiB, status1.rss);
  const checked = checkJsonAnswer(polls[0].chunks!);
  delete polls[0].chunks;
  await waitSettled(agent);
  const after = await metrics(agent);
  const d = (m: string, f = "") => metricSum(after, m, f) - metricSum(before, m, f);
  const value = round(peakKiB / 1024, 1);
  const refused = polls.reduce((n, p) => n + p.refused, 0);
  const refusedPolls = polls.filter((p) => p.refused > 0).length;
  const bytes = polls.map((p) => p.bytes);
  const mib = (kib: number | undefined) => kib === undefined ? NaN : round(kib / 1024, 1);
  const vmHwm = mib(status1.hwm);
  const answerMib = round(Math.max(...bytes) / MiB, 1);
  progress(
    BENCH,
    `json poll: peak RSS ${value} MiB (${mib(status0.rss)} MiB before the polls; VmHWM ` +
      `${vmHwm} MiB over the agent's life); ${JSON_POLLS} answered 200, ${refused} answers 503 ` +
      `(${refusedPolls} polls refused at least once); answers of ${answerMib} MiB of JSON ` +
      `(${checked.messages} messages, offsets 0 to ${checked.lastOffset}) in ` +
      `${round(seconds, 2)} s; ${d("tierd_store_requests_total", 'op="get"')} store GETs; ` +
      `${d("tierd_memory_collections_total")} collections asked of the runtime`,
  );
  const mb = round(Number(s.firstLocal) * RECORD / 1e6, 1);
  recordResult("iggy_json_poll_peak_rss_mib_24", value, "≤ 768", {
    method: `tierd: the compiled binary (\`tierd run\`) with its Iggy-compatible HTTP listener ` +
      `(\`[agent.iggy_http]\`) in front of the Iggy 0.8.0 broker, after the rest of this ` +
      `benchmark ran on it (produce, local polls, latency). The tiered topic's evicted range ` +
      `[0, ${s.firstLocal}) (${mb} MB of ${RECORD}-byte records in ${s.tiering.remote} evicted ` +
      `${SEGMENT} segments) is only in the fs store. ${JSON_POLLS} clients in the bench ` +
      `process at once send GET /streams/{stream}/topics/{topic}/messages?consumer_id=1&` +
      `partition_id=0&kind=offset&value=0&count=${JSON_POLL_COUNT} with the root user's JWT ` +
      `from the broker's login (Bearer), each reading its whole body as a stream (bytes ` +
      `counted, not kept); a 503 is tried again after its Retry-After (at most ` +
      `${MAX_POLL_ATTEMPTS} attempts), until 200. One answer is parsed as JSON and checked to ` +
      `hold messages from offset 0; every answer is a 200 with a non-empty body. ` +
      `/proc/<pid>/status of the agent is read every ${RSS_SAMPLE_MS} ms during the polls and ` +
      `once after; the value is the largest VmRSS seen, in MiB (2^20 bytes). VmHWM at the end is ` +
      `given too: it is the process's lifetime high-water mark, earlier phases included.`,
    settings: {
      read_memory_budget: `${cfg.agent.read_memory_budget} (${
        cfg.agent.read_memory_budget === 0 ? "default" : "set"
      }) = ${round(budget / MiB, 1)} MiB`,
      polls: JSON_POLLS,
      count: JSON_POLL_COUNT,
    },
    rss_before_polls_mib: mib(status0.rss),
    rss_during_polls_mib: summary(samples, 1),
    vm_hwm_at_end_mib: vmHwm,
    answered_200: JSON_POLLS,
    answered_503: refused,
    polls_refused_at_least_once: refusedPolls,
    seconds: round(seconds, 2),
    answer_bytes: { min: Math.min(...bytes), max: Math.max(...bytes) },
    checked_answer: checked,
    store_gets: d("tierd_store_requests_total", 'op="get"'),
    cache_misses: d("tierd_cache_misses_total"),
    read_path_bytes: d("tierd_read_bytes_total"),
    polls,
    notes: `peak VmRSS ${value} MiB (${mib(status0.rss)} MiB before the polls; VmHWM at the end ` +
      `${vmHwm} MiB, the agent's lifetime peak); ${JSON_POLLS} polls answered 200 after ` +
      `${refused} answers 503 + Retry-After (${refusedPolls} polls refused at least once); each ` +
      `answer ${answerMib} MiB of JSON, ${checked.messages} messages from offset 0; ` +
      `${round(seconds, 2)} s`,
  });
}

interface ColdScan {
  path: "api" | "front";
  messages: number;
  seconds: number;
  mbPerSecond: number;
  requests: number;
  /** From tierd's metrics over the scan. */
  storeGets: number;
  cacheMisses: number;
  /** Record bytes tierd's read path produced (`tierd_read_bytes_total`), and per byte answered. */
  readPathBytes: number;
  readPathAmplification: number;
  /** Full collections tierd asked of its runtime during the scan (its memory guard). */
  collections: number;
  cpu: Record<string, number>;
}

/** tierd's own cold scan over its HTTP API: raw reads of `COLD_COUNT` records each. */
async function apiScan(s: Setup, agent: IggyAgent): Promise<number> {
  let offset = 0n;
  let requests = 0;
  while (offset < s.firstLocal) {
    const left = s.firstLocal - offset;
    const n = Number(left < BigInt(COLD_COUNT) ? left : BigInt(COLD_COUNT));
    const url = `${agent.url}/v1/streams/${s.stream}/topics/${s.cold}/partitions/0/records` +
      `?offset=${offset}&max_bytes=${n * RECORD}`;
    const res = await fetch(url);
    const body = await res.arrayBuffer();
    if (res.status !== 200 || Number(res.headers.get("x-tierd-records")) !== n) {
      throw new Error(`GET ${url}: ${res.status}, ${res.headers.get("x-tierd-records")} records`);
    }
    if (body.byteLength !== n * RECORD) throw new Error(`GET ${url}: ${body.byteLength} bytes`);
    offset = BigInt(res.headers.get("x-tierd-next-offset")!);
    requests++;
  }
  return requests;
}

/** The same range polled through the front, `COLD_COUNT` messages a poll. */
async function frontScan(s: Setup, agent: IggyAgent): Promise<number> {
  const client = await IggyTcpClient.connect(agent.frontAddress, LOGIN);
  try {
    const frames = walkFrames(s, 0n, s.firstLocal, COLD_COUNT);
    for (const { frame, count } of frames) {
      const a = await client.request(frame);
      if (a.status !== 0 || polledCount(a.payload) !== count) {
        throw new Error(`a cold poll answered status ${a.status}, not ${count} messages`);
      }
    }
    return frames.length;
  } finally {
    client.close();
  }
}

/** The front's answer (after its 16-byte head) and the API's body for one range agree. */
async function checkSameRecords(s: Setup, agent: IggyAgent): Promise<void> {
  const offset = s.firstLocal / 2n;
  const client = await IggyTcpClient.connect(agent.frontAddress, LOGIN);
  try {
    const a = await client.request(pollFrame(pollRequest(s, offset, COLD_COUNT)));
    const res = await fetch(
      `${agent.url}/v1/streams/${s.stream}/topics/${s.cold}/partitions/0/records?offset=` +
        `${offset}&max_bytes=${COLD_COUNT * RECORD}`,
    );
    const body = new Uint8Array(await res.arrayBuffer());
    if (!sameBytes(a.payload.subarray(16), body)) {
      throw new Error(`the front and the API answer offset ${offset} with different records`);
    }
  } finally {
    client.close();
  }
}

/** One scan of the evicted range on a freshly started agent with an empty cache. */
async function coldScan(
  s: Setup,
  path: "api" | "front",
  name: string,
  brokerPid: number | undefined,
): Promise<ColdScan> {
  const agent = await startIggyAgent({
    dir: s.dir,
    broker: s.broker,
    stream: s.stream,
    topic: s.cold,
    localRetention: LOCAL_RETENTION,
    name,
  });
  try {
    await waitSettled(agent, 200);
    const pids = { tierd: agent.pid, broker: brokerPid, client: Deno.pid };
    const before = await metrics(agent);
    const cpu0 = await cpuOf(pids);
    const t0 = performance.now();
    const requests = path === "api" ? await apiScan(s, agent) : await frontScan(s, agent);
    const seconds = (performance.now() - t0) / 1000;
    const cpu = cpuDelta(cpu0, await cpuOf(pids));
    await waitSettled(agent);
    const after = await metrics(agent);
    const d = (m: string, f = "") => metricSum(after, m, f) - metricSum(before, m, f);
    if (path === "front") await checkSameRecords(s, agent);
    const messages = Number(s.firstLocal);
    const readPathBytes = d("tierd_read_bytes_total");
    return {
      path,
      messages,
      seconds: round(seconds, 3),
      mbPerSecond: round(messages * RECORD / 1e6 / seconds, 1),
      requests,
      storeGets: d("tierd_store_requests_total", 'op="get"'),
      cacheMisses: d("tierd_cache_misses_total"),
      readPathBytes,
      readPathAmplification: round(readPathBytes / (messages * RECORD), 2),
      collections: d("tierd_memory_collections_total"),
      cpu,
    };
  } finally {
    await agent.stop();
  }
}

async function measureCold(
  s: Setup,
  rounds: number,
  direct1000: number,
  brokerPid: number | undefined,
): Promise<void> {
  const runs: Record<"api" | "front", ColdScan[]> = { api: [], front: [] };
  for (let r = 0; r < rounds; r++) {
    const paths = r % 2 === 0 ? ["api", "front"] as const : ["front", "api"] as const;
    for (const p of paths) runs[p].push(await coldScan(s, p, `cold-${p}-${r}`, brokerPid));
  }
  const med = (p: "api" | "front") => round(median(runs[p].map((x) => x.mbPerSecond)), 1);
  const amp = (p: "api" | "front") => median(runs[p].map((x) => x.readPathAmplification));
  const cpu = (p: "api" | "front") => round(median(runs[p].map((x) => x.cpu.tierd ?? NaN)), 2);
  const ratio = round(med("front") / med("api"), 3);
  const mb = round(Number(s.firstLocal) * RECORD / 1e6, 1);
  progress(
    BENCH,
    `cold: API ${med("api")} MB/s, front ${med("front")} MB/s: ${ratio} (tierd CPU s per scan: ` +
      `API ${cpu("api")}, front ${cpu("front")}; read-path bytes per byte answered: API ` +
      `${amp("api")}, front ${amp("front")}; collections asked of the runtime per scan: API ` +
      `${runs.api.map((x) => x.collections)}, front ${runs.front.map((x) => x.collections)})`,
  );
  const method = `The evicted range [0, ${s.firstLocal}) of the tiered topic (${mb} MB of ` +
    `${RECORD}-byte records in ${s.tiering.remote} evicted ${SEGMENT} segments, only in the fs ` +
    `store) read from offset 0 to its end, one request at a time, ${COLD_COUNT} messages per ` +
    `request: through the front, PollMessages by offset (count ${COLD_COUNT}, one logged-in ` +
    `connection); through tierd's HTTP API, raw GET …/records?offset=…&max_bytes=` +
    `${COLD_COUNT * RECORD} (exactly ${COLD_COUNT} records), each from the previous answer's ` +
    `x-tierd-next-offset, no reader header. Both cold: every scan runs on a freshly started ` +
    `tierd (the compiled binary, the same state directory) whose cache directory is new and ` +
    `empty, after its start-up work settled (the fs store's files are in the OS page cache for ` +
    `both). ${rounds} scans per path, alternating which goes first. MB/s counts record bytes ` +
    `(the same for both paths); the front's answer is checked equal to the API's records for a ` +
    `sample range after each front scan.`;
  const peers = {
    "tierd HTTP API, raw": { mb_per_s: med("api"), tierd_cpu_s_per_scan: cpu("api") },
    "tierd binary front": { mb_per_s: med("front"), tierd_cpu_s_per_scan: cpu("front") },
    "the broker answering polls of 1000 of its own (local) messages, direct": {
      mb_per_s: direct1000,
    },
  };
  const notes = `front ${med("front")} MB/s, API ${med("api")} MB/s (tierd CPU per scan ` +
    `${cpu("front")} s vs ${cpu("api")} s; read-path bytes per answered byte ${amp("front")} vs ` +
    `${amp("api")}); the broker polling its own local data ${COLD_COUNT} a poll: ` +
    `${direct1000} MB/s`;
  recordResult("iggy_tcp_cold_poll_ratio_vs_api", ratio, NO_GOAL, {
    method: method + ` The value is the median MB/s through the front ÷ the median over the API.`,
    peers,
    runs,
    notes,
  });
  recordResult("iggy_tcp_cold_poll_mb_s", med("front"), NO_GOAL, {
    method: method + ` The value is the median MB/s through the front.`,
    peers,
    notes,
  });
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const KEYS_AND_TARGETS: [string, string][] = [
  ["iggy_tcp_produce_ratio", "≥ 0.9"],
  ["iggy_tcp_produce_ratio_4conn", "≥ 0.9"],
  ["iggy_tcp_local_poll_ratio", "≥ 0.9"],
  ["iggy_tcp_ping_added_p50_us", NO_GOAL],
  ["iggy_tcp_ping_added_p99_us", NO_GOAL],
  ["iggy_tcp_poll1_added_p50_us", NO_GOAL],
  ["iggy_tcp_poll1_added_p99_us", NO_GOAL],
  ["iggy_tcp_cold_poll_mb_s", NO_GOAL],
  ["iggy_tcp_cold_poll_ratio_vs_api", NO_GOAL],
  ["iggy_json_poll_peak_rss_mib_24", "≤ 768"],
];

/**
 * Runs every measurement against a fresh Iggy 0.8.0 broker and records the figures; without the
 * servers (shared/iggy), records them as not measured.
 * @throws {Error} when a step fails (the broker, relay and agents are stopped first)
 */
export async function runIggyTcpBench(o: IggyTcpBenchOptions = {}): Promise<void> {
  const rounds = o.rounds ?? 3;
  const found = await findIggy();
  if (!found.ok) {
    for (const [key, target] of KEYS_AND_TARGETS) recordNotMeasured(key, target, found.reason);
    progress(BENCH, `not measured: ${found.reason}`);
    return;
  }
  const busy = await waitForQuiet(30_000);
  progress(BENCH, `machine ${busy.toFixed(0)}% busy before the run`);
  const broker = await startIggy(found.binaries["0.8.0"], {
    editConfig: (text) => {
      const edited = text.replace(
        /(\[system\.segment\][^[]*?)size = "1 MiB"/,
        `$1size = "${SEGMENT}"`,
      );
      if (edited === text) throw new Error("the 0.8.0 config has no [system.segment] size 1 MiB");
      return edited;
    },
  });
  const dir = await Deno.makeTempDir({ prefix: "tierd-bench-iggy-tcp-" });
  let agent: IggyAgent | undefined;
  let relay: DelayProxy | undefined;
  try {
    const prepared = await prepare(broker, dir);
    agent = prepared.agent;
    const s = prepared.setup;
    relay = await startDelayProxy(`http://${broker.tcpAddress}`, 0);
    const brokerPid = await pidInDir(broker.dir);
    const paths: Paths = {
      address: {
        direct: broker.tcpAddress,
        relay: relay.endpoint.replace(/^http:\/\//, ""),
        front: agent.frontAddress,
      },
      pids: {
        tierd: agent.pid,
        broker: brokerPid,
        relay: await pidWithArgs(["--target", broker.tcpAddress]),
        client: Deno.pid,
      },
      agent,
    };
    await waitSettled(agent, 200);
    await measureProduce(s, paths, rounds);
    const direct1000 = await measureLocalPoll(s, paths, rounds);
    await measureLatency(s, paths);
    await measureJsonPollMemory(s, agent);
    await agent.stop();
    agent = undefined;
    await relay.stop();
    relay = undefined;
    await measureCold(s, 2, direct1000, brokerPid);
  } catch (err) {
    if (agent) console.error(`tierd's log (tail):\n${agent.logTail().slice(-4000)}`);
    console.error(`Iggy 0.8.0's log (tail):\n${broker.log().slice(-4000)}`);
    throw err;
  } finally {
    await agent?.stop().catch(() => {});
    await relay?.stop().catch(() => {});
    await broker.cleanup();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
