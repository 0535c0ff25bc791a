// Builds partitions in known tiering states for read tests: generated Iggy segments, some copied
// to a SimStore by the real tier worker, more appended afterwards (local only), and a prefix of
// the copied ones evicted — with an oracle of every record read from the files beforehand.
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SimStore } from "../../providers/sim/store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import type { Config } from "../../src/config/schema.ts";
import { codecFor } from "../../src/format/codecs.ts";
import { appendMessages, generatePartition, partitionDir } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { silentLogger } from "../../src/log.ts";
import { listSegments } from "../../src/partition/segments.ts";
import { createReadContext, type ReadContextOptions } from "../../src/read/context.ts";
import type { ReadContext } from "../../src/read/context.ts";
import { describeProblem } from "../../src/tier/problem.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import { testConfig } from "../_config.ts";

/** One record of the partition, as the files held it before any eviction. */
export interface OracleRecord {
  firstOffset: bigint;
  lastOffset: bigint;
  timestamp: bigint;
  bytes: Uint8Array;
  /** Start offset of its segment. */
  segment: bigint;
  /** Its segment's local files were deleted (only the store has it). */
  evicted: boolean;
}

export interface ScenarioOptions<S extends ObjectStore = SimStore> {
  /** Opens the store the tier worker copies to. @default a new SimStore */
  store?: (config: Config) => S;
  format: FormatName;
  /** What the config says: the format, or "auto". */
  configFormat?: FormatName | "auto";
  /** Messages written before the tier pass. */
  before: number;
  /** Messages appended after it (never copied). */
  after: number;
  segmentSize: number;
  payloadSize: number;
  messagesPerBatch?: number;
  /** How many of the copied segments to evict (clamped to what was copied). */
  evict: number;
  seed?: number;
  partition?: number;
}

export interface Scenario<S extends ObjectStore = SimStore> {
  dir: string;
  config: Config;
  store: S;
  records: OracleRecord[];
  /** Start offsets of the evicted segments. */
  evicted: bigint[];
  /** Start offsets of the segments copied to the store. */
  copied: bigint[];
  ids: { stream: number; topic: number; partition: number };
  context(o?: Partial<ReadContextOptions>): ReadContext;
  cleanup(): Promise<void>;
}

/**
 * A temporary directory on a memory filesystem where there is one: the generator and the tier
 * worker fsync every file, which costs milliseconds each on a disk and would make a property
 * test of a hundred partitions crawl.
 */
async function scratchDir(): Promise<{ path: string; cleanup(): Promise<void> }> {
  const base = await stat("/dev/shm").then((s) => s.isDirectory(), () => false)
    ? "/dev/shm"
    : tmpdir();
  const path = await mkdtemp(join(base, "tierd-read-"));
  return { path, cleanup: () => rm(path, { recursive: true, force: true }) };
}

/** Builds a scenario; see the module comment. */
export async function buildScenario<S extends ObjectStore = SimStore>(
  o: ScenarioOptions<S>,
): Promise<Scenario<S>> {
  await initHashes();
  const tmp = await scratchDir();
  try {
    const config = testConfig({ dir: tmp.path, format: o.configFormat ?? o.format });
    const ids = { stream: 0, topic: 0, partition: o.partition ?? 0 };
    const gen = {
      format: o.format,
      dataDir: config.agent.data_dir,
      ...ids,
      segmentSize: o.segmentSize,
      payloadSize: o.payloadSize,
      messagesPerBatch: o.messagesPerBatch,
      seed: o.seed ?? 1,
    };
    await generatePartition({ ...gen, messages: o.before });
    const store = o.store?.(config) ?? (new SimStore() as ObjectStore as S);
    const worker = new TierWorker({ config, store, prefix: "iggy", logger: silentLogger });
    const report = await worker.pass();
    await worker.close();
    if (report.problems.length > 0) {
      throw new Error(`tier pass failed: ${describeProblem(report.problems[0])}`);
    }
    if (o.after > 0) await appendMessages({ ...gen, messages: o.after });

    const dir = partitionDir(config.agent.data_dir, ids);
    const segments = await listSegments(dir, { now: Date.now(), quiescenceMs: 0 });
    const copied = segments.slice(0, report.copied).map((s) => s.start);
    const evicted = copied.slice(0, Math.min(o.evict, copied.length));
    const codec = codecFor(o.format);
    const records: OracleRecord[] = [];
    for (const s of segments) {
      const log = new Uint8Array(await readFile(s.logPath));
      for (const r of codec.walk(log, { file: s.logPath, startOffset: s.start })) {
        records.push({
          firstOffset: r.firstOffset,
          lastOffset: r.lastOffset,
          timestamp: r.timestamp,
          bytes: log.slice(r.position, r.position + r.size),
          segment: s.start,
          evicted: evicted.includes(s.start),
        });
      }
    }
    for (const s of segments.filter((s) => evicted.includes(s.start))) {
      await rm(s.logPath);
      await rm(s.indexPath, { force: true });
    }
    return {
      dir: tmp.path,
      config,
      store,
      records,
      evicted,
      copied,
      ids,
      context: (extra = {}) =>
        createReadContext({ config, store, prefix: "iggy", fetchTimeoutMs: 5_000, ...extra }),
      cleanup: tmp.cleanup,
    };
  } catch (err) {
    await tmp.cleanup();
    throw err;
  }
}

/** Start offsets of the partition's local `.log` files, ascending. */
export async function localStarts(s: Scenario<ObjectStore>): Promise<bigint[]> {
  const dir = partitionDir(s.config.agent.data_dir, s.ids);
  return (await readdir(dir)).filter((n) => n.endsWith(".log")).map((n) => BigInt(n.slice(0, 20)))
    .sort((a, b) => (a < b ? -1 : 1));
}

/** Deletes a segment's broker files, as the broker's retention would. */
export async function removeSegment(s: Scenario<ObjectStore>, start: bigint): Promise<void> {
  const stem = join(
    partitionDir(s.config.agent.data_dir, s.ids),
    start.toString().padStart(20, "0"),
  );
  await rm(`${stem}.log`);
  await rm(`${stem}.index`, { force: true });
}

/**
 * The broker's retention deletes the first local segment before it was copied, and a tier pass
 * records it as `lost_before_upload` (call after evicting every copied segment).
 *
 * @returns the lost offsets, inclusive
 */
export async function loseFirstLocalSegment(
  s: Scenario<ObjectStore>,
): Promise<{ from: bigint; to: bigint }> {
  const lost = (await localStarts(s))[0];
  const to = s.records.filter((r) => r.segment === lost).at(-1)!.lastOffset;
  await removeSegment(s, lost);
  const worker = new TierWorker({
    config: s.config,
    store: s.store,
    prefix: "iggy",
    logger: silentLogger,
  });
  const report = await worker.pass();
  await worker.close();
  if (report.lost !== 1) {
    throw new Error(`expected one lost segment, the pass recorded ${report.lost}`);
  }
  return { from: lost, to };
}

/** What a read starting at `start` with `maxBytes` must return, or undefined for "past the end". */
export function expectedRead(
  records: OracleRecord[],
  start: { offset: bigint } | { timestamp: bigint },
  maxBytes: number,
):
  | { bytes: Uint8Array; firstOffset: bigint; nextOffset: bigint; source: string }
  | undefined {
  const i = "offset" in start
    ? records.findIndex((r) => r.lastOffset >= start.offset)
    : records.findIndex((r) => r.timestamp >= start.timestamp);
  if (i < 0) return undefined;
  const taken: OracleRecord[] = [];
  let size = 0;
  for (let j = i; j < records.length; j++) {
    const r = records[j];
    if (taken.length > 0 && size + r.bytes.length > maxBytes) break;
    taken.push(r);
    size += r.bytes.length;
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const r of taken) {
    bytes.set(r.bytes, at);
    at += r.bytes.length;
  }
  const remote = taken.some((r) => r.evicted);
  const local = taken.some((r) => !r.evicted);
  return {
    bytes,
    firstOffset: taken[0].firstOffset,
    nextOffset: taken[taken.length - 1].lastOffset + 1n,
    source: remote && local ? "mixed" : remote ? "remote" : "local",
  };
}
