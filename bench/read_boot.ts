// `boot_seconds_100k_segments` and `rss_bytes_per_segment`: how long the agent takes to boot on
// a state directory whose journals describe 100,000 remote (copied and evicted) segments —
// 100 partitions × 1000 segments, each with its journal records (copy started, copy finished,
// evicted) and its `.remote` marker, written with tierd's own encoders (src/state/journal.ts,
// src/state/marker.ts) — and how much memory each segment costs once loaded.
//   - boot: the compiled binary, `tierd run`, from spawn until `/readyz` answers 200 (journals
//     replayed, markers reconciled, every partition open); median of 3 boots after a clean stop
//     (the clean-stop record lets boot skip reading the markers; the first pass reads them),
//     and, apart, of 3 boots with no record (as after a crash: every marker read before ready);
//   - RSS: VmRSS of that process once ready and settled (boot's garbage given back), minus the
//     same for a boot over the same 100 partitions with empty journals, ÷ 100,000.
// The in-process replay alone (TierWorker.open of every partition, in this Deno process)
// is in the details.
import { mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { concatBytes } from "../src/base/bytes.ts";
import { freePort } from "../test/fixtures/_server.ts";
import { SimStore } from "../providers/sim/store.ts";
import { parseConfig } from "../src/config/load.ts";
import { initHashes } from "../src/hash.ts";
import { silentLogger } from "../src/log.ts";
import { partitionRelPath, segmentStem } from "../src/layout/partition.ts";
import { decodeRecords, encodeRecord } from "../src/state/journal.ts";
import { fold } from "../src/state/segment_state.ts";
import { scanMarkers } from "../src/state/marker_dir.ts";
import { TierWorker } from "../src/tier/tier_worker.ts";
import type { JournalEvent } from "../src/state/events.ts";
import { encodeMarker } from "../src/state/marker.ts";
import { discoverPartitions } from "../src/partition/discover.ts";
import { NO_GOAL, recordResult } from "./_results.ts";
import { CLEAN_STOP_FILE } from "../src/state/clean_stop.ts";
import { WORK_DIR } from "./_segments.ts";
import { median, progress, round } from "./_stats.ts";
import { startTierdRun, tierdBinary, waitForQuiet } from "./_proc.ts";
import { type BenchStore, openBenchStore } from "./_store.ts";

const PARTITIONS = 100;
const PER_PARTITION = 1000;
const SEGMENTS = PARTITIONS * PER_PARTITION;
/** Offsets per segment. */
const SPAN = 1_000_000n;
const SEGMENT_BYTES = 1 << 30;
const BOOTS = 3;
const STREAM = 1;
const TOPIC = 1;

interface StateTree {
  root: string;
  dataDir: string;
  stateDir: string;
  journalBytes: number;
  markerFiles: number;
}

/** Writes broker partition directories (an empty active segment each) and tierd's state. */
async function buildState(root: string, perPartition: number): Promise<StateTree> {
  await initHashes();
  const dataDir = join(root, "broker");
  const stateDir = join(root, "state");
  let journalBytes = 0;
  let markerFiles = 0;
  const at = Date.now() - 86_400_000;
  for (let p = 0; p < PARTITIONS; p++) {
    const id = { stream: STREAM, topic: TOPIC, partition: p };
    const dir = join(dataDir, partitionRelPath(id));
    await mkdir(dir, { recursive: true });
    const active = segmentStem(BigInt(perPartition) * SPAN);
    await writeFile(join(dir, `${active}.log`), new Uint8Array(0));
    await writeFile(join(dir, `${active}.index`), new Uint8Array(0));
    const st = await stat(dir);
    const sdir = join(stateDir, partitionRelPath(id));
    await mkdir(sdir, { recursive: true });
    if (perPartition === 0) continue;
    const incarnation = BigInt(p + 1) * 0x9e3779b97f4an;
    const events: JournalEvent[] = [{
      type: "incarnation",
      incarnation,
      device: st.dev,
      inode: st.ino,
      at,
    }];
    for (let i = 0; i < perPartition; i++) {
      const segment = BigInt(i) * SPAN;
      const endOffset = segment + SPAN - 1n;
      const ts = 1_750_000_000_000_000n + BigInt(i) * 60_000_000n;
      const checksum = BigInt(p) << 32n | BigInt(i);
      events.push(
        { type: "copy_started", segment, generation: 0n, at },
        {
          type: "copy_finished",
          segment,
          generation: 0n,
          endOffset,
          size: SEGMENT_BYTES,
          indexSize: 24 * 32_768,
          startTimestamp: ts,
          endTimestamp: ts + 59_000_000n,
          maxTimestamp: ts + 59_000_000n,
          checksum,
          at,
        },
        { type: "evicted", segment, generation: 0n, at },
      );
      await writeFile(
        join(sdir, `${segmentStem(segment)}.remote`),
        encodeMarker({
          flags: 0,
          startOffset: segment,
          endOffset,
          size: BigInt(SEGMENT_BYTES),
          indexSize: 24n * 32_768n,
          startTimestamp: ts,
          endTimestamp: ts + 59_000_000n,
          maxTimestamp: ts + 59_000_000n,
          incarnation,
          generation: 0n,
          logChecksum: checksum,
        }),
      );
      markerFiles++;
    }
    events.push({
      type: "floor",
      generation: 0n,
      tieredUpTo: BigInt(perPartition) * SPAN - 1n,
      at,
    });
    const bytes = concatBytes(events.map(encodeRecord));
    await writeFile(join(sdir, "journal"), bytes);
    journalBytes += bytes.length;
  }
  return { root, dataDir, stateDir, journalBytes, markerFiles };
}

function configText(tree: StateTree, store: BenchStore, port: number): string {
  return [
    "[agent]",
    `data_dir = ${JSON.stringify(tree.dataDir)}`,
    `state_dir = ${JSON.stringify(tree.stateDir)}`,
    `listen = "127.0.0.1:${port}"`,
    'cluster_id = "bench"',
    'format = "iggy-0.9"',
    'log_level = "warn"',
    "",
    "[tiered_storage]",
    "enabled = true",
    'backend = "s3"',
    "",
    "[tiered_storage.s3]",
    `bucket = ${JSON.stringify(store.bucket)}`,
    `region = ${JSON.stringify(store.region)}`,
    `endpoint = ${JSON.stringify(store.endpoint)}`,
    'url_style = "path"',
    // A key space per state tree: the bucket has one owner per key space, and the full and the
    // empty tree are two agents (two state dirs), so one would refuse to boot in the other's.
    `prefix = "bench-boot-${basename(tree.root)}"`,
    "",
    "[tiered_storage.cache]",
    `path = ${JSON.stringify(join(tree.root, "cache"))}`,
    "",
    "[[topic]]",
    `stream = ${STREAM}`,
    `topic = ${TOPIC}`,
    'local_retention_size = "1 GiB"',
    "",
  ].join("\n");
}

async function vmRssKiB(pid: number): Promise<number> {
  const text = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(text)?.[1] ?? NaN);
}

/** The value of an unlabelled gauge in the agent's `/metrics`. */
async function gauge(port: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  if (!line) throw new Error(`/metrics has no ${name}`);
  return Number(line[1]);
}

/**
 * One boot of the binary: seconds to ready, then the RSS once ready. With `crash`, the
 * clean-stop record the last stop wrote is removed first, as a crash would have left none.
 * It waits until the first pass has read every marker boot trusted before it samples the
 * resident set, and so before it stops the agent (cleanly): the record that stop writes covers
 * every partition.
 */
async function bootOnce(tree: StateTree, store: BenchStore, options: { crash: boolean }) {
  await tierdBinary(); // built before the clock starts
  const port = freePort();
  const config = join(tree.root, "tierd.toml");
  await Deno.writeTextFile(config, configText(tree, store, port));
  await Deno.remove(join(tree.root, "cache"), { recursive: true }).catch(() => {});
  const record = join(tree.stateDir, CLEAN_STOP_FILE);
  if (options.crash) await Deno.remove(record).catch(() => {});
  const hadRecord = await stat(record).then(() => true, () => false);
  const t0 = performance.now();
  const run = await startTierdRun({
    config,
    name: "boot",
    env: { TIERD_S3_ACCESS_KEY: store.accessKey, TIERD_S3_SECRET_KEY: store.secretKey },
    ready: async () => {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`);
        await res.body?.cancel();
        return res.ok;
      } catch {
        return false; // not listening yet
      }
    },
    timeoutMs: 600_000,
    pollMs: 20,
  });
  const seconds = (performance.now() - t0) / 1000;
  try {
    // The markers boot trusted are read by the first pass, right after ready: the resident set
    // is sampled once they are all read (a minute at most), and once the agent has answered a
    // scrape and a partition listing, as Prometheus and an operator have it do (a scrape costs
    // the agent a fraction of a second of CPU here: the gauge is polled twice a second).
    const unreadAtReady = await gauge(port, "tierd_markers_unread");
    let unread = unreadAtReady;
    for (let i = 0; unread > 0 && i < 1200; i++) {
      await new Promise((r) => setTimeout(r, 500));
      unread = await gauge(port, "tierd_markers_unread");
    }
    if (unread > 0) throw new Error(`${unread} markers still unread a minute after ready`);
    const markersReadAfterSeconds = (performance.now() - t0) / 1000 - seconds;
    const parts = await (await fetch(`http://127.0.0.1:${port}/v1/partitions`)).json() as {
      segments: { remote: number };
    }[];
    const remote = parts.reduce((n, p) => n + p.segments.remote, 0);
    // The first seconds after ready hold boot's and the first pass's garbage that the runtime
    // has collected but not yet given back (Bun's allocator returns free pages over several
    // seconds, and a plateau of 3 s or more comes before the drop): sampled for 20 s at least,
    // and on until the resident set stops falling — no new low for 5 s, within 40 s — and taken
    // there.
    const rss: number[] = [];
    let low = Infinity;
    let lowAt = 0;
    for (let i = 0; i < 160 && (i < 80 || i - lowAt < 20); i++) {
      await new Promise((r) => setTimeout(r, 250));
      const now = await vmRssKiB(run.pid);
      rss.push(now);
      if (now < low) {
        low = now;
        lowAt = i;
      }
    }
    return {
      hadRecord,
      unreadAtReady,
      markersReadAfterSeconds: round(markersReadAfterSeconds, 2),
      seconds,
      rssBytes: median(rss.slice(-12)) * 1024,
      rssFirstBytes: median(rss.slice(0, 12)) * 1024,
      settledAfterSeconds: rss.length / 4,
      remote,
      warnings: run.logTail().trim(),
    };
  } finally {
    await run.stop();
  }
}

/**
 * In this (Deno) process: TierWorker.open (every partition opened) without a clean-stop record
 * (what the agent does at boot after a crash),
 * its parts one by one (reading and decoding the journals, folding the events, reading the
 * markers), and a TierWorker's first and second pass over the same state (SimStore).
 */
async function replayInProcess(tree: StateTree, store: BenchStore) {
  const config = parseConfig(configText(tree, store, 7070), join(tree.root, "tierd.toml"), {
    TIERD_S3_ACCESS_KEY: "x",
    TIERD_S3_SECRET_KEY: "y",
  });
  const env = { config, store: new SimStore(), prefix: "bench-boot", logger: silentLogger };
  await Deno.remove(join(tree.stateDir, CLEAN_STOP_FILE)).catch(() => {});
  let t0 = performance.now();
  const found = await discoverPartitions(tree.dataDir);
  const opening = new TierWorker(env);
  await opening.open();
  const openSeconds = (performance.now() - t0) / 1000;
  let segments = 0;
  for (const a of opening.partitions) {
    for (const m of a.state.segments.values()) segments += m.size;
  }
  await opening.close();
  const parts = { read_journal: 0, decode_records: 0, fold: 0, scan_markers: 0 };
  for (const part of found) {
    const sdir = join(tree.stateDir, partitionRelPath(part));
    let t = performance.now();
    const bytes = await readFile(join(sdir, "journal"));
    parts.read_journal += performance.now() - t;
    t = performance.now();
    const { events } = decodeRecords(bytes);
    parts.decode_records += performance.now() - t;
    t = performance.now();
    const state = fold(events);
    parts.fold += performance.now() - t;
    t = performance.now();
    await scanMarkers(sdir, state.incarnation!);
    parts.scan_markers += performance.now() - t;
  }
  const worker = new TierWorker(env);
  t0 = performance.now();
  await worker.pass();
  const firstPass = (performance.now() - t0) / 1000;
  t0 = performance.now();
  await worker.pass();
  const secondPass = (performance.now() - t0) / 1000;
  await worker.close();
  return {
    runtime: `Deno ${Deno.version.deno}`,
    partitions: found.length,
    segments,
    partition_agent_open_seconds: round(openSeconds, 3),
    parts_seconds: Object.fromEntries(
      Object.entries(parts).map(([k, v]) => [k, round(v / 1000, 3)]),
    ),
    tier_worker_first_pass_seconds: round(firstPass, 3),
    tier_worker_second_pass_seconds: round(secondPass, 3),
  };
}

/** Runs the benchmark and records its figures. @returns boot seconds */
export async function runReadBootBench(): Promise<number> {
  const store = await openBenchStore();
  const root = join(WORK_DIR, "runs", `read_boot-${Date.now().toString(36)}`);
  try {
    progress("read_boot", `writing ${PARTITIONS} partitions × ${PER_PARTITION} segments of state…`);
    const t0 = performance.now();
    const full = await buildState(join(root, "full"), PER_PARTITION);
    const empty = await buildState(join(root, "empty"), 0);
    progress(
      "read_boot",
      `state written in ${((performance.now() - t0) / 1000).toFixed(1)} s: ` +
        `${(full.journalBytes / 2 ** 20).toFixed(1)} MiB of journals, ${full.markerFiles} markers`,
    );
    type Boot = Awaited<ReturnType<typeof bootOnce>>;
    const boots: Boot[] = [];
    const crashBoots: Boot[] = [];
    const emptyBoots: Boot[] = [];
    const checkRemote = (b: Boot) => {
      if (b.remote !== SEGMENTS) {
        throw new Error(
          `booted with ${b.remote} remote segments, expected ${SEGMENTS}: ${b.warnings}`,
        );
      }
    };
    for (let i = 0; i < BOOTS; i++) {
      await waitForQuiet(20_000);
      // No record (as after a crash): every marker is read before ready. Its clean stop writes
      // the record the next boot takes.
      const c = await bootOnce(full, store, { crash: true });
      checkRemote(c);
      crashBoots.push(c);
      await waitForQuiet(20_000);
      const b = await bootOnce(full, store, { crash: false });
      checkRemote(b);
      if (!b.hadRecord || b.unreadAtReady === 0) {
        throw new Error(`boot ${i + 1} after a clean stop did not trust its record: ${b.warnings}`);
      }
      boots.push(b);
      const e = await bootOnce(empty, store, { crash: false });
      emptyBoots.push(e);
      progress(
        "read_boot",
        `boot ${i + 1}: ${b.seconds.toFixed(2)} s after a clean stop (${b.unreadAtReady} markers ` +
          `unread at ready, all read ${b.markersReadAfterSeconds} s after), ` +
          `${c.seconds.toFixed(2)} s as after a crash; RSS ${(b.rssBytes / 2 ** 20).toFixed(1)} ` +
          `MiB (empty journals: ${e.seconds.toFixed(2)} s, ${
            (e.rssBytes / 2 ** 20).toFixed(1)
          } MiB)` +
          (b.warnings ? `; log: ${b.warnings.slice(0, 300)}` : ""),
      );
    }
    const inProcess = await replayInProcess(full, store);
    progress("read_boot", `in-process replay: ${JSON.stringify(inProcess)}`);
    const bootSeconds = median(boots.map((b) => b.seconds));
    const crashSeconds = median(crashBoots.map((b) => b.seconds));
    const rssFull = median(boots.map((b) => b.rssBytes));
    const rssEmpty = median(emptyBoots.map((b) => b.rssBytes));
    const perSegment = (rssFull - rssEmpty) / SEGMENTS;
    const perSegmentFirst = (median(boots.map((b) => b.rssFirstBytes)) -
      median(emptyBoots.map((b) => b.rssFirstBytes))) / SEGMENTS;
    const layout = `${PARTITIONS} partitions × ${PER_PARTITION} segments (${SEGMENTS} remote ` +
      `segments: journal records copy_started, copy_finished, evicted per segment plus ` +
      `incarnation and floor per partition, ${(full.journalBytes / 2 ** 20).toFixed(1)} MiB of ` +
      `journals; one 128-byte .remote marker per segment; an empty active segment per ` +
      `partition directory; the kept .index copies are not written, boot does not read them)`;
    const common = {
      settings: {
        layout,
        store: store.describe,
        boots: BOOTS,
      },
      boots: boots.map((b) => ({
        seconds: round(b.seconds, 3),
        markers_unread_at_ready: b.unreadAtReady,
        markers_all_read_after_ready_s: b.markersReadAfterSeconds,
        rss_mib: round(b.rssBytes / 2 ** 20, 1),
        rss_first_3s_mib: round(b.rssFirstBytes / 2 ** 20, 1),
        rss_settled_after_s: b.settledAfterSeconds,
      })),
      boots_without_clean_stop_record: crashBoots.map((b) => ({
        seconds: round(b.seconds, 3),
        rss_mib: round(b.rssBytes / 2 ** 20, 1),
      })),
      empty_journal_boots: emptyBoots.map((b) => ({
        seconds: round(b.seconds, 3),
        rss_mib: round(b.rssBytes / 2 ** 20, 1),
        rss_first_3s_mib: round(b.rssFirstBytes / 2 ** 20, 1),
        rss_settled_after_s: b.settledAfterSeconds,
      })),
      in_process_replay: inProcess,
    };
    recordResult("boot_seconds_100k_segments", round(bootSeconds, 3), "≤ 3", {
      method: `The compiled binary runs \`tierd run\` on a state directory describing ` +
        `${layout}, written with tierd's own journal and marker encoders. Timed from spawn ` +
        `until GET /readyz answers 200 (polled every 20 ms): process start, store probe, ` +
        `journal replay and boot reconciliation of every partition (ready does not wait for ` +
        `the first pass). Each boot follows a clean stop of the same state: it takes the ` +
        `clean-stop record that stop wrote, so its markers are read by the first pass after ` +
        `ready (tierd_markers_unread must be above 0 at ready, and the stop waits until it is ` +
        `0). Then /v1/partitions must list all ${SEGMENTS} segments as remote. Median of ` +
        `${BOOTS} boots. Boots without the record (as after a crash: every marker read before ` +
        `ready) are boot_seconds_100k_segments_after_crash. TierWorker.open (every partition ` +
        `opened) in this (Deno) process is in the details.`,
      ...common,
      notes: `${bootSeconds.toFixed(2)} s to ready after a clean stop, ${
        crashSeconds.toFixed(2)
      } s without the record (empty journals: ${
        median(emptyBoots.map((b) => b.seconds)).toFixed(2)
      } s); in-process (Deno) TierWorker.open of all partitions ${inProcess.partition_agent_open_seconds} s, of which marker reads ${inProcess.parts_seconds.scan_markers} s`,
    });
    recordResult("boot_seconds_100k_segments_after_crash", round(crashSeconds, 3), NO_GOAL, {
      method: `As boot_seconds_100k_segments, on the same state, but with the clean-stop ` +
        `record removed before each boot, as a crash leaves none: every partition reads and ` +
        `checks all its markers before ready. Median of ${BOOTS} boots, each right before a ` +
        `boot_seconds_100k_segments boot.`,
      ...common,
      notes: `${crashSeconds.toFixed(2)} s to ready without a clean-stop record`,
    });
    recordResult("rss_bytes_per_segment", round(perSegment, 0), "≤ 512", {
      method: `VmRSS of the ready \`tierd run\` booted on ${layout}, once settled: sampled ` +
        `every 250 ms, from when the first pass has read the markers boot trusted and the agent ` +
        `has answered GET /metrics and GET /v1/partitions (what a scraped agent keeps), for 20 s ` +
        `at least and until it sets no new low for 5 s (at most 40 s), the median ` +
        `of those last 12 samples — boot's collected garbage is given back to the system over ` +
        `a few seconds, and it is not what a segment costs at rest. Minus the same for the same ` +
        `${PARTITIONS} partition directories with empty journals and no markers, ÷ ${SEGMENTS}. ` +
        `Median over the ${BOOTS} boots after a clean stop and the ${BOOTS} empty ones. The median of the first 3 s of ` +
        `sampling (the earlier method) is in the details and notes.`,
      ...common,
      rss_bytes_per_segment_first_3s: round(perSegmentFirst, 0),
      notes: `RSS ${(rssFull / 2 ** 20).toFixed(1)} MiB with ${SEGMENTS} segments vs ${
        (rssEmpty / 2 ** 20).toFixed(1)
      } MiB with none, settled; over the first 3 s of sampling ${
        round(perSegmentFirst, 0)
      } B per segment`,
    });
    return bootSeconds;
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
    await store.stop();
  }
}
