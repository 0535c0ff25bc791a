// One owner per key space (issue 22), through the real `tierd` CLI, against MinIO and the fs
// store. Every host is a temp dir of its own (broker data dir with a generated Iggy partition,
// state dir, cache), all of them on this machine, so every host has this machine's name.
//
// - Two brokers, default configs, one bucket: both partitions have the same stream/topic/
//   partition ids, `cluster_id` is left at its default, the prefix is the same. Host A's
//   `tierd run` tiers and evicts; host B's `tierd run` is refused (exit 2) with one line naming
//   A's agent, its host and when it last wrote. Then objects of another incarnation — what an
//   older deployment sharing the key space left (a third host's `run --once` under another
//   `cluster_id`, its objects and manifests copied into A's key space with the test's own
//   client) — lie under A's partition root, and A runs on through three sweep intervals (the
//   sweep sped up): every key of the bucket is still there, and every offset A evicted reads
//   back byte-identical through A's HTTP API. (A retired nothing, so its sweep had nothing to
//   do.) Then A's topic is deleted and recreated, A retires its own incarnation, and the sweep
//   runs over the partition root: it deletes that incarnation and its manifest, nothing else.
// - `tierd run --take-over`: a host whose state dir was wiped is refused ("That is this host's
//   name"); `run --once --take-over` then owns the key space (the record names the new agent,
//   the old one under `previous`) and the agent serves every offset again.
// - A config naming another `cluster_id` than the state dir's `agent.json`: exit 2 naming both
//   key spaces, nothing written under the new one.
// - Takeover end to end (MinIO): A runs and keeps uploading while the test appends messages;
//   host B (empty broker and state dirs) runs `tierd restore`, which takes the key space over;
//   A's next upload is refused, A logs that it stops writing and exits 2 naming B's agent; no
//   object is gone, B's `tierd run` serves every restored offset byte-identical, and A wrote
//   nothing after the takeover but the one write its last check (answered before the takeover)
//   had already cleared. A's and B's requests pass through taps in front of MinIO, so the order
//   of A's writes and B's takeover is seen as MinIO saw it. (The first version of the lease
//   re-read the record before a write only when its last read was 2 s old: A went on uploading
//   for ~2 s, and a restore listing the partition meanwhile reported the half-uploaded segment
//   as a hole. Now every write reads the record, and half a pair at the end of the chain is an
//   unfinished copy, not a hole.)
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { FsStore } from "../../providers/fs/store.ts";
import { type ObjectStore } from "../../providers/types.ts";
import type { Config } from "../../src/config/schema.ts";
import { parseConfig } from "../../src/config/load.ts";
import { appendMessages, partitionDir } from "../../src/format/generate.ts";
import { initHashes } from "../../src/hash.ts";
import { ownerKey, parseSegmentKey, partitionRoot } from "../../src/layout/object_keys.ts";
import type { PartitionId } from "../../src/layout/partition.ts";
import { decodeOwnerRecord, type OwnerRecord } from "../../src/ownership/owner_record.ts";
import { segmentsOf } from "../../src/state/segment_state.ts";
import { durableState, scratchDir } from "../_model/tier_harness.ts";
import {
  freePort,
  minioAvailable,
  minioStore,
  runTierd,
  s3Env,
  startMinioReady,
} from "../fixtures/_agent.ts";
import type { MinioServer } from "../fixtures/minio.ts";
import { type S3Tap, startS3Tap, type TapEvent } from "./_s3_tap.ts";
import {
  concat,
  equalBytes,
  KiB,
  logged,
  readEverything,
  runAgentOn,
  type RunningAgent,
} from "./_recovery.ts";

const ID: PartitionId = { stream: 3, topic: 1, partition: 0 };
const FORMAT = "iggy-0.9";
const SEGMENT_SIZE = 16 * KiB;
/** The sweep, sped up: `orphan_sweep_interval` and `orphan_grace`. */
const SWEEP_MS = 1000;
const GRACE_MS = 500;
const FAST_HOUSEKEEPING = `
[tiered_storage.housekeeping]
interval = "1 s"
orphan_sweep_interval = "${SWEEP_MS} ms"
orphan_grace = "${GRACE_MS} ms"
manifest_upload_interval = "1 s"
verify_interval = "2 s"
`;
const FENCED = "key space taken over by another agent: this agent stops writing";

/** Where the hosts' objects go: one bucket (or fs store directory) for all of them. */
type Bucket =
  | { kind: "fs"; path: string }
  | { kind: "minio"; minio: MinioServer; /** a tap's, in front of MinIO */ endpoint?: string };

/** A host: broker data dir, state dir and cache under `root`, and its config. */
interface Host {
  root: string;
  configPath: string;
  env: Record<string, string>;
  config: Config;
  /** The broker's partition directory. */
  dir: string;
  /** Every `.log` the generator wrote on this host, by start offset (as last written). */
  logs: Map<bigint, Uint8Array>;
}

interface HostOptions {
  prefix: string;
  /** Absent: no `cluster_id` line (the default). */
  clusterId?: string;
  logLevel?: string;
  extra?: string;
}

function configText(root: string, bucket: Bucket, o: HostOptions): string {
  const store = bucket.kind === "fs"
    ? `backend = "fs"\n\n[tiered_storage.fs]\npath = "${bucket.path}"\nprefix = "${o.prefix}"\n`
    : `backend = "s3"\n\n[tiered_storage.s3]\nbucket = "${bucket.minio.bucket}"\n` +
      `region = "${bucket.minio.region}"\n` +
      `endpoint = "${bucket.endpoint ?? bucket.minio.endpoint}"\n` +
      `url_style = "path"\nprefix = "${o.prefix}"\n`;
  return `
[agent]
data_dir = "${root}/broker"
state_dir = "${root}/state"
listen = "127.0.0.1:${freePort()}"
seal_quiescence = "0 s"
log_level = "${o.logLevel ?? "info"}"
evict_via = "unlink"
${o.clusterId === undefined ? "" : `cluster_id = "${o.clusterId}"\n`}
[tiered_storage]
enabled = true
part_size = "5 MiB"
segment_upload_timeout = "20 s"
upload_loop_backoff_max = "200 ms"
${store}
[tiered_storage.cache]
path = "${root}/cache"

[[topic]]
stream = ${ID.stream}
topic = ${ID.topic}
local_retention_size = "${SEGMENT_SIZE * 2} B"
${o.extra ?? ""}
`;
}

async function makeHost(root: string, bucket: Bucket, o: HostOptions): Promise<Host> {
  await mkdir(root, { recursive: true });
  const text = configText(root, bucket, o);
  const configPath = join(root, "tierd.toml");
  await writeFile(configPath, text);
  const env = bucket.kind === "minio" ? s3Env(bucket.minio) : {};
  const config = parseConfig(text, configPath, env);
  return {
    root,
    configPath,
    env,
    config,
    dir: partitionDir(config.agent.data_dir, ID),
    logs: new Map(),
  };
}

/** Writes `messages` more messages to the host's partition, as its broker would. */
async function produce(h: Host, messages: number, seed: number): Promise<void> {
  await appendMessages({
    format: FORMAT,
    dataDir: h.config.agent.data_dir,
    ...ID,
    messages,
    segmentSize: SEGMENT_SIZE,
    payloadSize: 100,
    seed,
    // Read at once: a sealed segment may be evicted by the agent right after.
    onSegment: (s) => h.logs.set(s.startOffset, Deno.readFileSync(s.logPath)),
  });
}

/** Every offset the host's broker ever held, as a read from 0 to the end returns them. */
function chainOf(h: Host, starts: readonly bigint[] = [...h.logs.keys()]): Uint8Array {
  return concat([...starts].sort((a, b) => (a < b ? -1 : 1)).map((s) => h.logs.get(s)!));
}

/** Start offsets of the segments still in the host's partition directory. */
async function localStarts(h: Host): Promise<bigint[]> {
  return (await readdir(h.dir)).filter((n) => n.endsWith(".log")).map((n) => BigInt(n.slice(0, 20)))
    .sort((a, b) => (a < b ? -1 : 1));
}

/** Segments the host's agent evicted (written by the generator, gone from the broker dir). */
async function evictedStarts(h: Host): Promise<bigint[]> {
  const local = new Set(await localStarts(h));
  return [...h.logs.keys()].filter((s) => !local.has(s));
}

/** The `agent_id` of the host's `{state_dir}/agent.json`. */
async function agentIdOf(h: Host): Promise<string> {
  const j = JSON.parse(await readFile(join(h.config.agent.state_dir, "agent.json"), "utf8"));
  assert.match(j.agent_id, /^[0-9a-f]{32}$/);
  return j.agent_id;
}

async function ownerOf(store: ObjectStore, prefix: string, clusterId = "local") {
  const key = ownerKey({ prefix, clusterId });
  return decodeOwnerRecord(key, (await store.get(key)).bytes);
}

async function keysOf(store: ObjectStore, prefix = ""): Promise<string[]> {
  return (await listBounded(store, prefix)).map((o) => o.key).sort();
}

/** Polls `done` every 100 ms until it holds; fails naming `what` after `timeoutMs`. */
async function until(
  what: string,
  done: () => Promise<boolean> | boolean,
  timeoutMs = 30_000,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The incarnation directories (`{inc}-{gen}/`) with objects under the partition's root. */
async function incarnationDirs(store: ObjectStore, prefix: string, clusterId = "local") {
  const root = partitionRoot({ ...ID, prefix, clusterId });
  const dirs = new Map<string, string[]>();
  for (const key of await keysOf(store, root)) {
    const p = parseSegmentKey(root, key);
    if (!p) continue;
    const dir = key.slice(root.length).split("/")[0];
    dirs.set(dir, [...(dirs.get(dir) ?? []), key]);
  }
  return { root, dirs };
}

/**
 * Waits until the host's agent has copied every sealed segment (`.log` and `.index`) and
 * evicted all but the last few, its objects under the one incarnation directory not in `others`.
 * @returns the incarnation directory (`{inc}-0`) its objects are under
 */
async function untilTiered(
  h: Host,
  store: ObjectStore,
  prefix: string,
  others: ReadonlySet<string> = new Set(),
): Promise<string> {
  let dir = "";
  await until("every sealed segment copied and the older ones evicted", async () => {
    const sealed = [...h.logs.keys()].slice(0, -1);
    const { root, dirs } = await incarnationDirs(store, prefix);
    for (const d of others) dirs.delete(d);
    if (dirs.size !== 1) return false;
    const [[d, keys]] = [...dirs];
    dir = d;
    const have = new Set(keys);
    const copied = sealed.every((s) =>
      have.has(`${root}${d}/${String(s).padStart(20, "0")}.log`) &&
      have.has(`${root}${d}/${String(s).padStart(20, "0")}.index`)
    );
    return copied && (await evictedStarts(h)).length >= sealed.length - 2;
  });
  return dir;
}

/** Lines of text (not JSON log lines) of a stderr. */
function textLines(stderr: string): string[] {
  return stderr.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("{"));
}

/** Asserts `line` is the refusal naming `owner` (its id, this host, when it last wrote). */
function assertNamesOwner(line: string, owner: OwnerRecord, keySpace: string): void {
  assert.ok(line.startsWith("tierd: "), line);
  assert.ok(line.includes(`key space ${keySpace} `), `the key space is not named: ${line}`);
  assert.ok(
    line.includes(`agent ${owner.agentId} on host ${hostname()}`),
    `the owner and its host are not named: ${line}`,
  );
  const wrote = /last wrote (\S+?)\.(?:\s|$)/.exec(line);
  assert.ok(wrote, `no "last wrote" in: ${line}`);
  assert.equal(wrote[1], new Date(owner.lastWrite).toISOString(), line);
}

/** Runs `tierd run`, reads every offset through its HTTP API, and stops it. */
async function assertServes(h: Host, expected: Uint8Array, label: string): Promise<void> {
  const agent = await runAgentOn(h);
  try {
    const { bytes, sources } = await readEverything(agent.api, ID);
    assert.equal(bytes.length, expected.length, `${label}: bytes read from offset 0 to the end`);
    assert.ok(equalBytes(bytes, expected), `${label}: other bytes served`);
    assert.ok(sources.has("remote"), `${label}: nothing read from the store (${[...sources]})`);
  } finally {
    await agent.stop();
  }
}

/**
 * Two hosts, default configs, one key space: the second is refused; another incarnation is
 * planted under the partition's root; the owner runs three sweep intervals: 0 objects lost,
 * every evicted offset still readable.
 */
async function twoBrokers(tmp: string, bucket: Bucket, store: ObjectStore): Promise<void> {
  const prefix = "shared";
  const a = await makeHost(join(tmp, "two-a"), bucket, {
    prefix,
    logLevel: "debug",
    extra: FAST_HOUSEKEEPING,
  });
  const b = await makeHost(join(tmp, "two-b"), bucket, { prefix, extra: FAST_HOUSEKEEPING });
  await produce(a, 1200, 1);
  await produce(b, 1200, 2);
  const agentA = await runAgentOn(a);
  let stopped = false;
  try {
    const dirA = await untilTiered(a, store, prefix);
    const idA = await agentIdOf(a);
    const owner = await ownerOf(store, prefix);
    assert.equal(owner.agentId, idA, "A owns the key space");
    assert.equal(owner.host, hostname());
    assert.equal(owner.clusterId, "local");

    // B: refused at start, with one line naming A, its host and when it last wrote.
    const refused = await runTierd(["run", "--config", b.configPath], b.env);
    assert.equal(refused.code, 2, refused.stderr);
    const lines = textLines(refused.stderr);
    const naming = lines.filter((l) => l.includes(idA));
    assert.equal(naming.length, 1, `one line names A's agent:\n${refused.stderr}`);
    assert.ok(naming[0].includes("belongs to another agent"), naming[0]);
    assertNamesOwner(naming[0], await ownerOf(store, prefix), `${prefix}/local/`);
    assert.notEqual(await agentIdOf(b), idA);
    assert.equal((await ownerOf(store, prefix)).agentId, idA, "B did not take the record");
    assert.deepEqual(
      [...(await incarnationDirs(store, prefix)).dirs.keys()],
      [dirA],
      "B wrote no incarnation of its own",
    );

    // An older deployment that shared the key space: a third host's incarnation (run under
    // another cluster_id), its objects and manifest copied into A's key space.
    const old = await makeHost(join(tmp, "two-old"), bucket, { prefix, clusterId: "older" });
    await produce(old, 800, 3);
    const once = await runTierd(["run", "--once", "--config", old.configPath], old.env);
    assert.equal(once.code, 0, once.stderr);
    const oldKeys = (await keysOf(store, `${prefix}/older/`)).filter((k) =>
      !k.endsWith("/owner.json")
    );
    assert.ok(oldKeys.some((k) => k.includes("/meta/")), `no manifest: ${oldKeys}`);
    const planted: string[] = [];
    for (const key of oldKeys) {
      const to = `${prefix}/local/${key.slice(`${prefix}/older/`.length)}`;
      await store.put(to, (await store.get(key)).bytes);
      planted.push(to);
    }
    const dirs = (await incarnationDirs(store, prefix)).dirs;
    assert.equal(dirs.size, 2, `A's incarnation and the planted one: ${[...dirs.keys()]}`);
    const plantedDir = [...dirs.keys()].find((d) => d !== dirA)!;
    assert.ok(planted.length >= 2 * (old.logs.size - 1));

    // Three sweep intervals (and the grace) of A's running, counted on its own log lines.
    const before = await keysOf(store);
    const plantedAt = Date.now();
    const from = agentA.process.lines.length;
    await agentA.process.waitFor(
      (l) =>
        l.msg === "housekeeping run finished" &&
        Date.parse(l.ts) >= plantedAt + 3 * SWEEP_MS + GRACE_MS,
      30_000,
      from,
    );
    const after = new Set(await keysOf(store));
    const lost = before.filter((k) => !after.has(k));
    assert.deepEqual(lost, [], `${lost.length} of ${before.length} objects lost`);
    assert.deepEqual(
      logged(agentA.process.lines, "info", /swept/),
      [],
      "A swept nothing: it retired nothing",
    );
    assert.deepEqual(
      agentA.process.lines.filter((l) => l.level === "error"),
      [],
      "A logged no error",
    );

    // Every offset A evicted reads back byte-identical, from the store.
    const evicted = await evictedStarts(a);
    assert.ok(evicted.length >= a.logs.size - 3, `only ${evicted.length} segments evicted`);
    const { bytes, sources } = await readEverything(agentA.api, ID);
    const want = chainOf(a);
    assert.equal(bytes.length, want.length, "bytes read from offset 0 to the end");
    assert.ok(equalBytes(bytes, want), "A serves other bytes than its broker wrote");
    assert.ok(sources.has("remote"), `nothing read from the store (${[...sources]})`);

    // Until now the sweep had nothing to do: A retired nothing. Now A retires its own
    // incarnation (the topic deleted and recreated), so the sweep runs over this partition's
    // root, planted incarnation and all: it deletes A's retired incarnation and its manifest
    // (now a tombstone), and nothing else.
    const { root } = await incarnationDirs(store, prefix);
    const retiredManifest = `${prefix}/local/meta/${ID.stream}/${ID.topic}/${ID.partition}/` +
      `${dirA}/manifest.json`;
    const beforeRetire = await keysOf(store);
    assert.ok(beforeRetire.includes(retiredManifest), `no manifest ${retiredManifest}`);
    await rm(a.dir, { recursive: true });
    a.logs.clear();
    await produce(a, 600, 7);
    const swept = await agentA.process.waitFor(
      (l) => l.msg === "retired incarnation/generation swept from the bucket",
      30_000,
    );
    assert.equal(swept.prefix, `${root}${dirA}/`, "the sweep deleted A's retired incarnation");
    const dirA2 = await untilTiered(a, store, prefix, new Set([plantedDir]));
    assert.notEqual(dirA2, dirA, "a new incarnation");
    const left = new Set(await keysOf(store));
    assert.deepEqual(
      beforeRetire.filter((k) => !left.has(k)),
      beforeRetire.filter((k) => k.startsWith(`${root}${dirA}/`) || k === retiredManifest),
      "the sweep deleted exactly what A retired",
    );
    assert.deepEqual(planted.filter((k) => !left.has(k)), [], "planted objects swept");
    // Every sweep was of an incarnation or generation of A's own, each swept once, A's retired
    // one among them; never the planted one.
    const sweeps = logged(agentA.process.lines, "info", /swept/).map((l) => `${l.prefix}`);
    const sweepLines = agentA.process.lines.filter((l) => l.level !== "debug").slice(-40)
      .map((l) => JSON.stringify(l)).join("\n");
    assert.ok(sweeps.includes(`${root}${dirA}/`), `A's retired incarnation:\n${sweepLines}`);
    assert.equal(new Set(sweeps).size, sweeps.length, `swept twice:\n${sweepLines}`);
    assert.ok(!sweeps.includes(`${root}${plantedDir}/`), `the planted one swept:\n${sweepLines}`);
    const again = await readEverything(agentA.api, ID);
    assert.ok(equalBytes(again.bytes, chainOf(a)), "the new incarnation reads back");
    const status = await agentA.stop();
    stopped = true;
    assert.equal(status.code, 0, agentA.process.output().slice(-3000));
  } finally {
    if (!stopped) await agentA.stop();
  }
}

/**
 * A host whose state dir was wiped: refused ("That is this host's name"), then
 * `run --once --take-over` owns the key space again, the old agent under `previous`.
 */
async function takeOverFlag(tmp: string, bucket: Bucket, store: ObjectStore): Promise<void> {
  const prefix = "take-over-flag";
  const h = await makeHost(join(tmp, "flag"), bucket, { prefix });
  await produce(h, 1200, 4);
  const first = await runTierd(["run", "--once", "--config", h.configPath], h.env);
  assert.equal(first.code, 0, first.stderr);
  const oldId = await agentIdOf(h);
  const evicted = await evictedStarts(h);
  assert.ok(evicted.length >= h.logs.size - 3, `only ${evicted.length} segments evicted`);
  const owner = await ownerOf(store, prefix);
  assert.equal(owner.agentId, oldId);

  // The state dir is lost (agent.json with it): this host is a stranger to its key space now.
  await rm(h.config.agent.state_dir, { recursive: true });
  const refused = await runTierd(["run", "--config", h.configPath], h.env);
  assert.equal(refused.code, 2, refused.stderr);
  const naming = textLines(refused.stderr).filter((l) => l.includes(oldId));
  assert.equal(naming.length, 1, `one line names the owner:\n${refused.stderr}`);
  assert.ok(naming[0].includes("That is this host's name"), naming[0]);
  assertNamesOwner(naming[0], owner, `${prefix}/local/`);
  assert.equal((await ownerOf(store, prefix)).agentId, oldId, "the refused agent took nothing");

  const taken = await runTierd(["run", "--once", "--take-over", "--config", h.configPath], h.env);
  assert.equal(taken.code, 0, taken.stderr);
  const newId = await agentIdOf(h);
  assert.notEqual(newId, oldId);
  const now = await ownerOf(store, prefix);
  assert.equal(now.agentId, newId, "the record names the new agent");
  assert.equal(now.host, hostname());
  assert.deepEqual(
    now.previous.map((p) => ({ agentId: p.agentId, host: p.host })),
    [{ agentId: oldId, host: hostname() }],
    "the old agent under previous",
  );
  // The new agent serves every offset, the old agent's copies included.
  await assertServes(h, chainOf(h), "after --take-over");
}

/** A config naming another cluster_id than agent.json: exit 2 naming both key spaces. */
async function keySpaceMismatch(tmp: string, bucket: Bucket, store: ObjectStore): Promise<void> {
  const prefix = "mismatch";
  const h = await makeHost(join(tmp, "mismatch"), bucket, { prefix });
  await produce(h, 400, 5);
  const first = await runTierd(["run", "--once", "--config", h.configPath], h.env);
  assert.equal(first.code, 0, first.stderr);
  const j = JSON.parse(await readFile(join(h.config.agent.state_dir, "agent.json"), "utf8"));
  assert.deepEqual(j.key_space, { prefix, cluster_id: "local" });
  // The operator "fixes" the shared default afterwards, on a host that already tiered.
  await writeFile(h.configPath, configText(h.root, bucket, { prefix, clusterId: "renamed" }));
  const before = await keysOf(store);
  for (const args of [["run"], ["run", "--once"]]) {
    const r = await runTierd([...args, "--config", h.configPath], h.env);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    const line = textLines(r.stderr).find((l) => l.includes(`${prefix}/renamed/`));
    assert.ok(line, `the configured key space is not named:\n${r.stderr}`);
    assert.ok(line.includes(`${prefix}/local/`), `the state dir's key space is not named: ${line}`);
    assert.deepEqual(await keysOf(store, `${prefix}/renamed/`), [], "nothing written there");
  }
  assert.deepEqual(await keysOf(store), before, "the bucket unchanged");
}

/** A request seen at a tap, in the order the test saw them all. */
interface Seen extends TapEvent {
  who: "A" | "B";
  /** ms (performance.now()) when the tap saw it. */
  at: number;
}

const WRITES = new Set([
  "PutObject",
  "CreateMultipartUpload",
  "CompleteMultipartUpload",
  "DeleteObjects",
  "AbortMultipartUpload",
]);

/**
 * Takeover end to end: A runs and keeps uploading; B restores and takes the key space over; A's
 * next upload is refused and A stops (exit 2); nothing lost; B serves what was restored.
 */
async function takeoverEndToEnd(
  tmp: string,
  minio: MinioServer,
  store: ObjectStore,
  taps: { a: S3Tap; b: S3Tap },
): Promise<void> {
  const prefix = "takeover";
  const through = (tap: S3Tap): Bucket => ({ kind: "minio", minio, endpoint: tap.endpoint });
  const a = await makeHost(join(tmp, "takeover-a"), through(taps.a), { prefix });
  const b = await makeHost(join(tmp, "takeover-b"), through(taps.b), { prefix });
  await produce(a, 1200, 6);
  const seen: Seen[] = [];
  taps.a.on((e) => void seen.push({ ...e, who: "A", at: performance.now() }));
  taps.b.on((e) => void seen.push({ ...e, who: "B", at: performance.now() }));
  let agentA: RunningAgent | undefined = await runAgentOn(a);
  let agentB: RunningAgent | undefined;
  let appending = true;
  let appender: Promise<void> = Promise.resolve();
  try {
    const dirA = await untilTiered(a, store, prefix);
    const idA = await agentIdOf(a);
    // The broker goes on receiving messages: A keeps sealing and uploading segments. (The pause
    // is the producer's pace, not a wait for anything.)
    appender = (async () => {
      while (appending) {
        await produce(a, 40, 6);
        await new Promise((r) => setTimeout(r, 40));
      }
    })();
    const uploads = () =>
      seen.filter((e) =>
        e.who === "A" && e.op === "PutObject" && e.key.endsWith(".log") && e.phase === "response"
      ).length;
    const uploadsBefore = uploads();
    await until("A uploading what the producer seals", () => uploads() >= uploadsBefore + 3);

    // B, a fresh host, restores the key space: it takes it over.
    const before = await keysOf(store);
    const restored = await runTierd(["restore", "--config", b.configPath], b.env);
    const atTakeover = await keysOf(store);
    const idB = await agentIdOf(b);
    assert.match(
      restored.stderr,
      new RegExp(`took over key space ${prefix}/local/ from agent ${idA} on host `),
    );
    const owner = await ownerOf(store, prefix);
    assert.equal(owner.agentId, idB, "the record names B");
    assert.deepEqual(owner.previous.map((p) => p.agentId), [idA], "A under previous");

    // A's next upload is refused: A says so and stops with exit 2, naming B's agent.
    const fenced = await agentA.process.waitFor((l) => l.msg === FENCED, 30_000);
    assert.equal(fenced.level, "error");
    assert.equal(fenced.owner, idB);
    const status = await agentA.process.status;
    const outputA = agentA.process.output();
    agentA = undefined;
    appending = false;
    await appender;
    assert.equal(status.code, 2, outputA.slice(-3000));
    const last = textLines(outputA).filter((l) => l.startsWith("tierd: "));
    assert.equal(last.length, 1, `one line says why A stopped:\n${outputA.slice(-3000)}`);
    assert.ok(
      last[0].includes(`was taken over by agent ${idB} on host ${hostname()}`),
      last[0],
    );

    // Nothing A wrote is gone.
    const after = await keysOf(store);
    const kept = new Set(after);
    const lost = [...new Set([...before, ...atTakeover])].filter((k) => !kept.has(k));
    assert.deepEqual(lost, [], "objects gone after the takeover");

    // The restore itself ended well (checked after A's side, which does not depend on it).
    assert.equal(restored.code, 0, `restore:\n${restored.stderr}`);

    // B serves every offset it restored, byte-identical to what A's broker wrote.
    const state = await durableState(b.config.agent.state_dir, ID);
    const starts = segmentsOf(state).filter((r) => r.state === "COPY_SEGMENT_FINISHED")
      .map((r) => r.start);
    const all = [...a.logs.keys()];
    assert.ok(starts.length > 0, "B restored no segment");
    assert.deepEqual(starts, all.slice(0, starts.length), "restored: a prefix from offset 0");
    const listedBefore = before.filter((k) => k.includes(`/${dirA}/`) && k.endsWith(".log"));
    assert.ok(
      starts.length >= listedBefore.length,
      `restored ${starts.length} segments, ${listedBefore.length} were in the bucket before`,
    );
    await mkdir(join(b.config.agent.data_dir, "streams"), { recursive: true });
    agentB = await runAgentOn(b);
    const { bytes, sources } = await readEverything(agentB.api, ID);
    const want = chainOf(a, starts);
    assert.equal(bytes.length, want.length, "B: bytes read from offset 0 to the end");
    assert.ok(equalBytes(bytes, want), "B serves other bytes than A's broker wrote");
    assert.ok(sources.has("remote"));

    // A wrote nothing after the takeover: no request that writes reached MinIO from A once B's
    // conditional replace of the record was answered, and no segment object appeared after the
    // restore exited. (Checked last so that a failure here still ran every check above.)
    const ownerJson = ownerKey({ prefix, clusterId: "local" });
    const taken = seen.findIndex((e) =>
      e.who === "B" && e.op === "PutObject" && e.key === ownerJson && e.phase === "response" &&
      e.status === 200
    );
    assert.ok(taken >= 0, "B's takeover was not seen at its tap");
    const since = (e: Seen) => `+${(e.at - seen[taken].at).toFixed(0)} ms`;
    const fencedAt = seen.findIndex((e, i) =>
      i > taken && e.who === "A" && e.op === "GetObject" && e.key === ownerJson &&
      e.phase === "response"
    );
    assert.ok(fencedAt > taken, "A never read the owner record after the takeover");
    // What the lease promises at the least: once A has read the record B wrote, not one write.
    const afterRead = seen.slice(fencedAt).filter((e) =>
      e.who === "A" && e.phase === "request" && WRITES.has(e.op)
    );
    assert.deepEqual(
      afterRead.map((e) => `${since(e)} ${e.op} ${e.key}`),
      [],
      `A wrote after its read of the record at ${since(seen[fencedAt])}`,
    );
    // Every write reads the record first, so between the takeover and A's first read of the new
    // record A may send at most the one write its last read (answered before the takeover)
    // cleared: a check and its write are not one request, and no store makes them one.
    const late = seen.slice(taken, fencedAt).filter((e) =>
      e.who === "A" && e.phase === "request" && WRITES.has(e.op)
    );
    assert.ok(
      late.length <= 1,
      `A went on writing after B took the key space over (B's record answered at +0 ms): ${
        late.map((e) => `${since(e)} ${e.op} ${e.key}`).join(", ")
      }; it read the record at ${since(seen[fencedAt])}`,
    );
    for (const w of late) {
      const i = seen.indexOf(w);
      const cleared = seen.slice(0, i).findLast((e) =>
        e.who === "A" && e.phase === "response" && e.op === "GetObject" && e.key === ownerJson
      );
      assert.ok(
        cleared && seen.indexOf(cleared) < taken,
        `A's write ${w.op} ${w.key} at ${since(w)} was not cleared by a read before the takeover`,
      );
    }
    const segmentWrites = after.filter((k) => !atTakeover.includes(k) && /\.(log|index)$/.test(k));
    assert.deepEqual(segmentWrites, [], "segment objects appeared after the restore exited");
  } finally {
    appending = false;
    await appender.catch(() => {});
    if (agentA) await agentA.stop();
    if (agentB) await agentB.stop();
    taps.a.on(undefined);
    taps.b.on(undefined);
  }
}

Deno.test("ownership with the fs store: two brokers on one key space, --take-over, a renamed cluster_id", async (t) => {
  await initHashes();
  const tmp = await scratchDir("tierd-owner-fs");
  const bucket: Bucket = { kind: "fs", path: join(tmp.path, "store") };
  const store = new FsStore({ root: bucket.path });
  try {
    await t.step(
      "two brokers, default configs: the second refused, 0 objects lost",
      () => twoBrokers(tmp.path, bucket, store),
    );
    await t.step(
      "a wiped state dir: refused, then run --once --take-over",
      () => takeOverFlag(tmp.path, bucket, store),
    );
    await t.step(
      "a config naming another cluster_id than agent.json: exit 2",
      () => keySpaceMismatch(tmp.path, bucket, store),
    );
  } finally {
    await store.close?.();
    await tmp.cleanup();
  }
});

if (await minioAvailable("ownership tests against MinIO")) {
  Deno.test("ownership against MinIO: two brokers on one key space, takeover end to end, --take-over, a renamed cluster_id", async (t) => {
    await initHashes();
    const minio = (await startMinioReady())!;
    const tapA = await startS3Tap(minio.endpoint);
    const tapB = await startS3Tap(minio.endpoint);
    const store = minioStore(minio);
    const tmp = await scratchDir("tierd-owner-minio");
    const bucket: Bucket = { kind: "minio", minio };
    try {
      await t.step(
        "two brokers, default configs: the second refused, 0 objects lost",
        () => twoBrokers(tmp.path, bucket, store),
      );
      await t.step(
        "takeover end to end: B restores, A is fenced and stops, nothing lost",
        () => takeoverEndToEnd(tmp.path, minio, store, { a: tapA, b: tapB }),
      );
      await t.step(
        "a wiped state dir: refused, then run --once --take-over",
        () => takeOverFlag(tmp.path, bucket, store),
      );
      await t.step(
        "a config naming another cluster_id than agent.json: exit 2",
        () => keySpaceMismatch(tmp.path, bucket, store),
      );
    } finally {
      await store.close?.();
      await tapA.close();
      await tapB.close();
      await minio.stop();
      await tmp.cleanup();
    }
  });
}
