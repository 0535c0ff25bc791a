// Shared by the recovery tests (issue 10): a partition of generated Iggy segments tiered to a
// store (fs or MinIO) and evicted down to its last sealed segment and the active one, the bytes
// of every `.log` the generator wrote, a fresh agent booted on whatever is left — an in-process
// `TierWorker` behind `createApp`, or the real `tierd run` — and the checks every damage row
// ends with: every offset read back byte-identical through the HTTP API, following
// `x-tierd-next-offset` from 0 to the end, and no range reported lost.
import { concatBytes as concat } from "../../src/base/bytes.ts";
import assert from "node:assert/strict";
import { readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Hono } from "hono";
import { FsStore } from "../../providers/fs/store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import type { Config } from "../../src/config/schema.ts";
import { parseConfig } from "../../src/config/load.ts";
import { generatePartition, partitionDir } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { createApp } from "../../src/http/app.ts";
import type { PartitionJson } from "../../src/http/app.ts";
import { type PartitionId, partitionLabel } from "../../src/layout/partition.ts";
import { journalPath, partitionStateDir } from "../../src/layout/state_paths.ts";
import { tierObserver } from "../../src/metrics/observers.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics } from "../../src/metrics/tierd.ts";
import { createReadContext } from "../../src/read/context.ts";
import { decodeRecords } from "../../src/state/journal.ts";
import { fold, type PartitionState, segmentsOf } from "../../src/state/segment_state.ts";
import { type PassReport, TierWorker } from "../../src/tier/tier_worker.ts";
import { capturingLogger, type LogLine, scratchDir } from "../_model/tier_harness.ts";
import { tempDir } from "../_util.ts";
import { type AgentProcess, freePort, minioStore, s3Env, spawnTierd } from "../fixtures/_agent.ts";
import type { MinioServer } from "../fixtures/minio.ts";

export const KiB = 1024;

/** Where the partition's objects go. */
export type StoreKind = { kind: "fs" } | { kind: "minio"; minio: MinioServer };

/** What a rig is built from. */
export interface RecoveryRigOptions {
  format: FormatName;
  store: StoreKind;
  id?: PartitionId;
  /** @default 1200 */
  messages?: number;
  /** @default 16 KiB */
  segmentSize?: number;
  /** @default 100 */
  payloadSize?: number;
  /** @default 1 */
  seed?: number;
  /** More TOML (e.g. `[tiered_storage.housekeeping]`). */
  extra?: string;
  /** The MinIO bucket's key prefix per rig (a rig per row shares one MinIO). @default "iggy" */
  prefix?: string;
  /**
   * On the system temp dir's disk rather than a memory filesystem: where a deleted
   * directory's inode goes to the next one made (ext4), as on a broker's host. @default false
   */
  onDisk?: boolean;
}

/** A tiered partition on a temp dir, and how to boot agents on it. */
export interface RecoveryRig {
  root: string;
  id: PartitionId;
  format: FormatName;
  config: Config;
  /** The config file (for `tierd run`). */
  configPath: string;
  /** The environment `tierd` processes need (the S3 keys). */
  env: Record<string, string>;
  store: ObjectStore;
  prefix: string;
  /** The broker's partition directory. */
  dir: string;
  /** The partition's state directory (journal, markers, index copies). */
  stateDir: string;
  journal: string;
  /** Every `.log` the generator wrote, by start offset, in offset order. */
  logs: Map<bigint, Uint8Array>;
  /** All of them, concatenated: what a read from 0 to the end returns. */
  chain(): Uint8Array;
  /** Start offsets of the segments evicted by the setup. */
  evicted: bigint[];
  /** Generates the partition and tiers it (copy, evict). */
  cleanup(): Promise<void>;
}

/** The TOML of a recovery rig: the topic evicts down to one or two segments. */
export function recoveryConfigText(
  root: string,
  o: { store: StoreKind; prefix: string; id: PartitionId; segmentSize: number; extra?: string },
): string {
  const storeText = o.store.kind === "fs"
    ? `backend = "fs"\n\n[tiered_storage.fs]\npath = "${root}/store"\nprefix = "${o.prefix}"\n`
    : `backend = "s3"\n\n[tiered_storage.s3]\nbucket = "${o.store.minio.bucket}"\n` +
      `region = "${o.store.minio.region}"\nendpoint = "${o.store.minio.endpoint}"\n` +
      `url_style = "path"\nprefix = "${o.prefix}"\n`;
  return `
[agent]
data_dir = "${root}/broker"
state_dir = "${root}/state"
listen = "127.0.0.1:${freePort()}"
seal_quiescence = "0 s"
log_level = "info"
evict_via = "unlink"

[tiered_storage]
enabled = true
part_size = "5 MiB"
segment_upload_timeout = "20 s"
upload_loop_backoff_max = "200 ms"
${storeText}
[tiered_storage.cache]
path = "${root}/cache"

[[topic]]
stream = ${o.id.stream}
topic = ${o.id.topic}
local_retention_size = "${o.segmentSize * 2} B"
${o.extra ?? ""}
`;
}

/** The store a config names, as the tests open it (MinIO through tierd's own S3 client). */
export function storeOf(o: StoreKind, root: string): ObjectStore {
  return o.kind === "fs" ? new FsStore({ root: join(root, "store") }) : minioStore(o.minio);
}

/**
 * Generates a partition, tiers it with one in-process pass (every sealed segment copied, all
 * but the last sealed one evicted), and checks that is what happened.
 */
export async function recoveryRig(o: RecoveryRigOptions): Promise<RecoveryRig> {
  await initHashes();
  // A memory filesystem where there is one: every step fsyncs, which proves nothing here.
  const tmp = o.onDisk ? await tempDir("tierd-recov") : await scratchDir("tierd-recov");
  const root = tmp.path;
  const id = o.id ?? { stream: 3, topic: 1, partition: 0 };
  const segmentSize = o.segmentSize ?? 16 * KiB;
  const prefix = o.prefix ?? "iggy";
  const text = recoveryConfigText(root, {
    store: o.store,
    prefix,
    id,
    segmentSize,
    extra: o.extra,
  });
  const configPath = join(root, "tierd.toml");
  await writeFile(configPath, text);
  const env = o.store.kind === "minio" ? s3Env(o.store.minio) : {};
  const config = parseConfig(text, configPath, env);
  await generatePartition({
    format: o.format,
    dataDir: config.agent.data_dir,
    ...id,
    messages: o.messages ?? 1200,
    segmentSize,
    payloadSize: o.payloadSize ?? 100,
    seed: o.seed ?? 1,
  });
  const dir = partitionDir(config.agent.data_dir, id);
  const logs = await readLogs(dir);
  const store = storeOf(o.store, root);
  const stateDir = partitionStateDir(config.agent.state_dir, id);
  const rig: RecoveryRig = {
    root,
    id,
    format: o.format,
    config,
    configPath,
    env,
    store,
    prefix,
    dir,
    stateDir,
    journal: journalPath(stateDir),
    logs,
    chain: () => concat([...logs.values()]),
    evicted: [],
    cleanup: async () => {
      await store.close?.();
      await tmp.cleanup();
    },
  };
  try {
    const { logger } = capturingLogger("warn");
    const worker = new TierWorker({ config, store, prefix, logger });
    const report = await worker.pass();
    await worker.close();
    assert.deepEqual(report.problems, [], "the setup pass failed");
    const state = await journalState(rig);
    const starts = [...logs.keys()];
    rig.evicted = segmentsOf(state).filter((r) => r.evicted).map((r) => r.start);
    // Mostly in the store: every sealed segment copied, all but the last sealed one evicted.
    assert.equal(report.copied, starts.length - 1, "every sealed segment copied");
    assert.ok(starts.length >= 5, `only ${starts.length} segments generated`);
    assert.ok(rig.evicted.length >= starts.length - 3, `only ${rig.evicted.length} evicted`);
    assert.deepEqual(rig.evicted, starts.slice(0, rig.evicted.length), "a prefix evicted");
    assert.deepEqual(await localStarts(rig), starts.slice(rig.evicted.length));
    return rig;
  } catch (err) {
    await rig.cleanup();
    throw err;
  }
}

/** Every `.log` in a partition directory, by start offset, oldest first. */
export async function readLogs(dir: string): Promise<Map<bigint, Uint8Array>> {
  const names = (await readdir(dir)).filter((n) => n.endsWith(".log")).sort();
  const out = new Map<bigint, Uint8Array>();
  for (const n of names) {
    out.set(BigInt(n.slice(0, 20)), new Uint8Array(await readFile(join(dir, n))));
  }
  return out;
}

/** Start offsets of the partition's local `.log` files. */
export async function localStarts(rig: RecoveryRig): Promise<bigint[]> {
  return [...(await readLogs(rig.dir)).keys()];
}

/** The parts one after another (the providers' `concatBytes`, by the name these tests use). */
export { concat };

/** The partition state the journal on disk folds to (valid prefix only). */
export async function journalState(rig: RecoveryRig): Promise<PartitionState> {
  await initHashes();
  return fold(decodeRecords(new Uint8Array(await readFile(rig.journal))).events);
}

/** The byte position of every record of the journal on disk. */
export async function journalPositions(rig: RecoveryRig): Promise<number[]> {
  await initHashes();
  return decodeRecords(new Uint8Array(await readFile(rig.journal))).positions;
}

/** Files in the partition's state directory named `journal.damaged-*`. */
export async function damagedJournals(rig: RecoveryRig): Promise<string[]> {
  return (await readdir(rig.stateDir)).filter((n) => n.startsWith("journal.damaged-"));
}

/** Something that answers the agent's HTTP API: an in-process app or a real `tierd run`. */
export type Api = (path: string) => Promise<Response>;

/** A fresh agent, booted in-process on the rig's directories, after its first pass. */
export interface BootedAgent {
  api: Api;
  app: Hono;
  worker: TierWorker;
  report: PassReport;
  lines: LogLine[];
  registry: Registry;
  close(): Promise<void>;
}

/** Boots a fresh in-process agent (worker, read path and HTTP app) and runs its first pass. */
export function bootAgent(rig: RecoveryRig): Promise<BootedAgent> {
  return bootAgentOn(rig);
}

/** {@link bootAgent} on any host: a config, its store and key prefix. */
export async function bootAgentOn(
  host: { config: Config; store: ObjectStore; prefix: string },
): Promise<BootedAgent> {
  const registry = new Registry();
  const metrics = createTierdMetrics(registry);
  const { logger, lines } = capturingLogger("info");
  const worker = new TierWorker({
    config: host.config,
    store: host.store,
    prefix: host.prefix,
    logger,
    observer: tierObserver(metrics),
  });
  const report = await worker.pass();
  const read = createReadContext({
    config: host.config,
    store: host.store,
    prefix: host.prefix,
    states: worker,
    metrics,
    logger,
  });
  const app = createApp({ read, registry, metrics, ready: () => true, apiToken: "" });
  return {
    api: (path) => Promise.resolve(app.request(path)),
    app,
    worker,
    report,
    lines,
    registry,
    close: () => worker.close(),
  };
}

/** The `/v1/partitions` entry of the rig's partition. */
export async function partitionEntry(api: Api, id: PartitionId): Promise<PartitionJson> {
  const res = await api("/v1/partitions");
  assert.equal(res.status, 200);
  const all = await res.json() as PartitionJson[];
  const p = all.find((x) =>
    x.stream === id.stream && x.topic === id.topic && x.partition === id.partition
  );
  assert.ok(p, `partition ${partitionLabel(id)} not in /v1/partitions: ${JSON.stringify(all)}`);
  return p;
}

/**
 * Reads the whole partition through the records route, from offset 0, following
 * `x-tierd-next-offset` until `offset_past_end`; every answer must be a 200 without
 * `x-tierd-gap` that starts exactly where it was asked to.
 * @returns the concatenated bytes and the sources the answers named
 */
export async function readEverything(
  api: Api,
  id: PartitionId,
  maxBytes = 24 * KiB,
): Promise<{ bytes: Uint8Array; sources: Set<string>; reads: number }> {
  const parts: Uint8Array[] = [];
  const sources = new Set<string>();
  let offset = 0n;
  for (let reads = 0;; reads++) {
    const path = `/v1/streams/${id.stream}/topics/${id.topic}/partitions/${id.partition}` +
      `/records?offset=${offset}&max_bytes=${maxBytes}`;
    const res = await api(path);
    if (res.status === 404) {
      const body = await res.json();
      assert.equal(body.error, "offset_past_end", `offset ${offset}: ${JSON.stringify(body)}`);
      return { bytes: concat(parts), sources, reads };
    }
    const bytes = new Uint8Array(await res.arrayBuffer());
    assert.equal(
      res.status,
      200,
      `offset ${offset}: ${res.status} ${new TextDecoder().decode(bytes)}`,
    );
    assert.equal(res.headers.get("x-tierd-gap"), null, `offset ${offset} reports a gap`);
    assert.equal(res.headers.get("x-tierd-first-offset"), String(offset));
    sources.add(res.headers.get("x-tierd-source")!);
    parts.push(bytes);
    const next = BigInt(res.headers.get("x-tierd-next-offset")!);
    assert.ok(next > offset, `no progress at offset ${offset}`);
    offset = next;
  }
}

/**
 * The checks every damage row ends with: every offset the generator wrote reads back
 * byte-identical, remote bytes included; no range lost (no gap, no LOST_BEFORE_UPLOAD record, the
 * lost counter at 0 when the agent's metrics are at hand).
 */
export async function assertEverythingReadable(
  rig: RecoveryRig,
  api: Api,
  expected: Uint8Array = rig.chain(),
): Promise<void> {
  const { bytes, sources } = await readEverything(api, rig.id);
  assert.equal(bytes.length, expected.length, "bytes read from offset 0 to the end");
  assert.ok(equalBytes(bytes, expected), "the bytes read differ from the generated .log files");
  assert.ok(sources.has("remote"), `nothing was read from the store (${[...sources]})`);
  const state = await journalState(rig);
  const lost = segmentsOf(state).filter((r) => r.state === "LOST_BEFORE_UPLOAD");
  assert.deepEqual(lost.map((r) => r.start), [], "ranges recorded lost_before_upload");
  const metrics = await (await api("/metrics")).text();
  assert.match(metrics, /^tierd_segments_lost_before_upload_total 0$/m);
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Log lines at `level` whose message matches. */
export function logged(lines: readonly LogLine[], level: string, msg: RegExp): LogLine[] {
  return lines.filter((l) => l.level === level && msg.test(l.msg));
}

/** Flips one byte of a file (XOR 0xff). */
export async function flipByte(path: string, at: number): Promise<void> {
  const bytes = new Uint8Array(await readFile(path));
  assert.ok(at < bytes.length, `byte ${at} is past the end of ${path} (${bytes.length} bytes)`);
  bytes[at] ^= 0xff;
  await writeFile(path, bytes);
}

/** Replaces a file by an (empty) directory of the same name. */
export async function replaceByDirectory(path: string): Promise<void> {
  await rm(path);
  await Deno.mkdir(path);
}

/** The real agent, `tierd run`, on the rig's config, once it says it is ready. */
export interface RunningAgent {
  api: Api;
  process: AgentProcess;
  /** SIGTERM, then the exit status. */
  stop(): Promise<Deno.CommandStatus>;
}

/** Starts `tierd run` on the rig and waits for its first pass ("ready"). */
export function runAgent(rig: RecoveryRig, timeoutMs = 30_000): Promise<RunningAgent> {
  return runAgentOn(rig, timeoutMs);
}

/** {@link runAgent} on any host: its config file, environment and parsed config. */
export async function runAgentOn(
  rig: { configPath: string; env: Record<string, string>; config: Config },
  timeoutMs = 30_000,
): Promise<RunningAgent> {
  const process = spawnTierd(["run", "--config", rig.configPath], rig.env);
  try {
    await process.waitFor((l) => l.msg.startsWith("ready"), timeoutMs);
  } catch (err) {
    process.kill("SIGKILL");
    await process.status;
    throw err;
  }
  const base = `http://${rig.config.agent.listen}`;
  return {
    api: (path) => fetch(base + path),
    process,
    async stop() {
      process.kill("SIGTERM");
      return await process.status;
    },
  };
}
