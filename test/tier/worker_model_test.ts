// Model-based property test of the tier worker against the simulated store
// with seeded faults. The broker appends and deletes segments, consumers store offsets, the
// store fails, throttles and goes away, the agent restarts or dies mid-request, and passes run
// under random retention settings. After every step the safety invariants are checked against
// an oracle of every sealed segment's bytes; at the end the store heals and the worker must
// reach a clean, fully tiered state.
import assert from "node:assert/strict";
import { readdir, readFile, rm, utimes } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { SimStore } from "../../providers/sim/store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { seededRandom } from "../../src/base/rng.ts";
import type { Config } from "../../src/config/schema.ts";
import { appendMessages, partitionDir } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { type Logger, silentLogger } from "../../src/log.ts";
import { type PartitionId, segmentStem } from "../../src/layout/partition.ts";
import { readMarker } from "../../src/state/marker.ts";
import {
  getSegment,
  type PartitionState,
  type SegmentRecord,
  segmentsOf,
} from "../../src/state/segment_state.ts";
import { segmentKeys } from "../../src/layout/object_keys.ts";
import { markerPaths, partitionStateDir } from "../../src/layout/state_paths.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import {
  capturingLogger,
  durableState,
  FreezingStore,
  type RecordedObserver,
  recordingObserver,
  scratchDir,
  writeConsumerOffset,
} from "../_model/tier_harness.ts";
import { testConfig } from "../_config.ts";
import { aheadClock, FakeClock } from "../_fake_clock.ts";

await initHashes();

const NUM_RUNS = Number(Deno.env.get("TIERD_MODEL_RUNS") ?? 200);
const PREFIX = "iggy";

/** A sealed segment as the broker wrote it: immutable from the moment it had a successor. */
interface SealedSegment {
  start: bigint;
  end: bigint;
  log: Uint8Array;
  index: Uint8Array;
}

/** What the test knows of one partition, independent of the agent. */
interface PartitionModel {
  id: PartitionId;
  dir: string;
  stateDir: string;
  segmentSize: number;
  payloadSize: number;
  sealed: Map<bigint, SealedSegment>;
  active: bigint;
  /** Last offset written, -1n while empty. */
  lastOffset: bigint;
  /** Deleted by the broker's own retention. */
  brokerDeleted: Set<bigint>;
  /** Deleted by the broker before tierd held a verified copy: must become lost_before_upload. */
  lost: Set<bigint>;
  /** Consumer and group offset files by `kind/id`. */
  consumers: Map<string, { offset: bigint; bad: boolean }>;
  maxFloor: bigint;
  incarnation?: bigint;
}

/** The system under test plus the model: commands act on it and the checks read it. */
interface World {
  config: Config;
  format: FormatName;
  clock: FakeClock;
  sim: SimStore;
  store: FreezingStore;
  worker: TierWorker;
  observer: RecordedObserver;
  logger: Logger;
  rng: () => number;
  parts: PartitionModel[];
  /** Fault rates in force (errors are expected in a pass only when some are). */
  faulty: boolean;
  /** The in-memory agents may lag the journal after a crash until the next pass. */
  crashed: boolean;
}

interface Snapshot {
  keys: Set<string>;
  states: PartitionState[];
}

const stats = {
  runs: 0,
  steps: 0,
  passes: 0,
  crashes: 0,
  crashedCopies: 0,
  crashedDeletes: 0,
  evicted: 0,
  lost: 0,
  remoteDeleted: 0,
};

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function newWorker(w: World): void {
  w.store = new FreezingStore(w.sim);
  w.worker = new TierWorker({
    config: w.config,
    store: w.store,
    prefix: PREFIX,
    logger: w.logger,
    clock: w.clock,
    observer: w.observer,
    rng: w.rng, // real jitter: backoff plays out on the fake clock
  });
}

function keysOf(w: World, p: PartitionModel, start: bigint) {
  return segmentKeys({
    ...p.id,
    prefix: PREFIX,
    clusterId: w.config.agent.cluster_id,
    incarnation: p.incarnation ?? 0n,
    generation: 0n,
  }, start);
}

/** The lowest valid stored offset, and whether any offset file is unreadable. */
function barrierOf(p: PartitionModel): { lowest?: bigint; bad: boolean } {
  let lowest: bigint | undefined;
  let bad = false;
  for (const c of p.consumers.values()) {
    if (c.bad) bad = true;
    else if (lowest === undefined || c.offset < lowest) lowest = c.offset;
  }
  return { lowest, bad };
}

/** True when a copy was verified at some point (finished, or deleted later by retention). */
function wasCopied(r: SegmentRecord | undefined): boolean {
  return r?.meta !== undefined &&
    (r.state === "COPY_SEGMENT_FINISHED" || r.deleteCause === "retention");
}

async function localFiles(dir: string): Promise<{ logs: Set<bigint>; indexes: Set<bigint> }> {
  const logs = new Set<bigint>();
  const indexes = new Set<bigint>();
  for (const name of await readdir(dir)) {
    const m = /^(\d{20})\.(log|index)$/.exec(name);
    if (m) (m[2] === "log" ? logs : indexes).add(BigInt(m[1]));
  }
  return { logs, indexes };
}

async function snapshot(w: World): Promise<Snapshot> {
  return {
    keys: new Set(w.sim.objects.keys()),
    states: await Promise.all(w.parts.map((p) => durableState(w.config.agent.state_dir, p.id))),
  };
}

/**
 * The invariants (docs/architecture.md, "Invariants") after one step; `before` is the state
 * before it.
 */
async function checkInvariants(w: World, before: Snapshot, step: string): Promise<void> {
  const where = (p: PartitionModel, what: string) =>
    `after ${step}, partition ${p.id.partition}: ${what}`;
  for (const [i, p] of w.parts.entries()) {
    const state = await durableState(w.config.agent.state_dir, p.id);
    const prev = before.states[i];
    // One incarnation and one generation: nothing here recreates or purges the partition.
    if (state.incarnation !== undefined) {
      p.incarnation ??= state.incarnation;
      assert.equal(state.incarnation, p.incarnation, where(p, "incarnation changed"));
    }
    assert.equal(state.generation, 0n, where(p, "spurious new generation"));
    // (b) the floor is monotone within the generation.
    assert.ok(
      state.floor >= p.maxFloor,
      where(p, `floor moved back ${p.maxFloor} -> ${state.floor}`),
    );
    p.maxFloor = state.floor;
    const agent = w.worker.partitions.find((a) => a.id.partition === p.id.partition);
    if (agent && !w.crashed) {
      // Records are durable before they take effect, so memory and journal agree between steps.
      assert.deepEqual(
        summary(agent.state),
        summary(state),
        where(p, "memory differs from journal"),
      );
    }

    const sealed = [...p.sealed.values()].sort((a, b) => (a.start < b.start ? -1 : 1));
    const { logs, indexes } = await localFiles(p.dir);
    // (e) local segments are a contiguous suffix of the chain; the active one is always there.
    const chain = [...sealed.map((s) => s.start), p.active];
    assert.ok(logs.has(p.active), where(p, `active segment ${p.active} is gone`));
    for (const s of logs) assert.ok(chain.includes(s), where(p, `unknown segment ${s}`));
    const firstPresent = chain.findIndex((s) => logs.has(s));
    for (const s of chain.slice(firstPresent)) {
      assert.ok(logs.has(s), where(p, `segment ${s} missing in the middle of the local chain`));
    }
    for (const s of indexes) {
      assert.ok(logs.has(s), where(p, `.index of segment ${s} left without its .log`));
    }
    // (c) the floor is a segment end, and below it the remote chain has no unrecorded hole.
    assert.ok(
      state.floor === -1n || sealed.some((s) => s.end === state.floor),
      where(p, `floor ${state.floor} is not a segment end`),
    );
    let remoteSeen = false;
    for (const s of sealed) {
      const rec = getSegment(state, 0n, s.start);
      const keys = keysOf(w, p, s.start);
      const logObj = w.sim.objects.get(keys.log);
      const indexObj = w.sim.objects.get(keys.index);
      // Whatever is under a segment's keys is that segment, byte for byte.
      if (logObj) {
        assert.ok(bytesEqual(logObj.bytes, s.log), where(p, `${keys.log} holds other bytes`));
      }
      if (indexObj) {
        assert.ok(bytesEqual(indexObj.bytes, s.index), where(p, `${keys.index} holds other bytes`));
      }
      const inStore = logObj !== undefined && indexObj !== undefined;
      const retentionDeleted = rec?.deleteCause === "retention";
      const local = logs.has(s.start);
      const lost = p.lost.has(s.start);
      if (rec?.state === "COPY_SEGMENT_FINISHED") {
        assert.ok(
          inStore,
          where(p, `segment ${s.start} is COPY_SEGMENT_FINISHED but not in the store`),
        );
      }
      // (a) every offset stays readable somewhere, unless the broker or total retention dropped it.
      assert.ok(
        local || inStore || retentionDeleted || lost,
        where(p, `offsets ${s.start}..${s.end} are neither local nor in the store (${rec?.state})`),
      );
      if (!local && !p.brokerDeleted.has(s.start)) {
        // tierd removed it: only with a verified copy under the floor, marker first.
        assert.ok(wasCopied(rec), where(p, `segment ${s.start} evicted without a verified copy`));
        assert.ok(s.end <= state.floor, where(p, `segment ${s.start} evicted above the floor`));
        if (rec!.state === "COPY_SEGMENT_FINISHED") await checkMarker(p, s, rec!, true);
      }
      if (rec?.evicted) {
        assert.ok(!local, where(p, `segment ${s.start} recorded evicted but still local`));
        if (rec.state === "COPY_SEGMENT_FINISHED") {
          await checkMarker(p, s, rec, !p.brokerDeleted.has(s.start));
        }
      }
      if (s.end <= state.floor) {
        assert.ok(
          inStore || lost || retentionDeleted,
          where(p, `hole below the floor ${state.floor} at segment ${s.start} (${rec?.state})`),
        );
        if (retentionDeleted && !inStore) {
          assert.ok(!remoteSeen, where(p, `retention deleted ${s.start} after a kept copy`));
        }
        if (inStore) remoteSeen = true;
      }
    }
    // (d) remote deletions: retention only below the consumer barrier, cleanup never of a
    // verified copy.
    const prefix = keysOf(w, p, 0n).log.replace(/[^/]*$/, "");
    const barrier = barrierOf(p);
    for (const key of before.keys) {
      if (!key.startsWith(prefix) || w.sim.objects.has(key)) continue;
      const start = BigInt(/(\d{20})\.(log|index)$/.exec(key)![1]);
      const s = p.sealed.get(start)!;
      const was = getSegment(prev, 0n, start);
      const now = getSegment(state, 0n, start);
      if (now?.deleteCause === "retention" && wasCopied(was)) {
        assert.ok(!barrier.bad, where(p, `${key} deleted while an offset file is unreadable`));
        assert.ok(
          barrier.lowest === undefined || s.end < barrier.lowest,
          where(p, `${key} (end ${s.end}) deleted at/after consumer offset ${barrier.lowest}`),
        );
      } else {
        assert.ok(
          was?.state !== "COPY_SEGMENT_FINISHED",
          where(p, `${key} of a verified copy deleted (${was?.state} -> ${now?.state})`),
        );
      }
    }
  }
  assert.equal(w.observer.quarantined.length, 0, "no marker should be quarantined");
  assert.equal(w.observer.tornTails.length, 0, "no journal should be torn");
}

/** The marker (and, for tierd's own evictions, the kept index copy) of a remote segment. */
async function checkMarker(
  p: PartitionModel,
  s: SealedSegment,
  rec: SegmentRecord,
  withIndex: boolean,
): Promise<void> {
  const paths = markerPaths(p.stateDir, s.start);
  const m = await readMarker(paths.marker);
  assert.equal(m.startOffset, s.start);
  assert.equal(m.endOffset, s.end);
  assert.equal(m.size, BigInt(s.log.length));
  assert.equal(m.indexSize, BigInt(s.index.length));
  assert.equal(m.incarnation, p.incarnation);
  assert.equal(m.generation, 0n);
  assert.equal(m.logChecksum, rec.meta!.checksum);
  if (withIndex) {
    assert.ok(bytesEqual(await readFile(paths.index), s.index), `kept index copy of ${s.start}`);
  }
}

/** A step of the run: acts, then checks every invariant against the state before it. */
abstract class Step implements fc.AsyncCommand<World, World> {
  check(): boolean {
    return true;
  }
  async run(_m: World, w: World): Promise<void> {
    const before = await snapshot(w);
    await this.act(w);
    stats.steps++;
    await checkInvariants(w, before, this.toString());
  }
  abstract act(w: World): Promise<void>;
  abstract toString(): string;
}

async function append(w: World, p: PartitionModel, messages: number): Promise<void> {
  const written = await appendMessages({
    format: w.format,
    dataDir: w.config.agent.data_dir,
    ...p.id,
    messages,
    segmentSize: p.segmentSize,
    payloadSize: p.payloadSize,
    seed: p.id.partition + 1,
  });
  const t = w.clock.ms / 1000; // the broker writes "now" on the fake clock
  for (const s of written) {
    await utimes(s.logPath, t, t);
    await utimes(s.indexPath, t, t);
  }
  for (const s of written.slice(0, -1)) {
    p.sealed.set(s.startOffset, {
      start: s.startOffset,
      end: s.endOffset,
      log: new Uint8Array(await readFile(s.logPath)),
      index: new Uint8Array(await readFile(s.indexPath)),
    });
  }
  const active = written.at(-1)!;
  p.active = active.startOffset;
  p.lastOffset = active.endOffset;
}

class Append extends Step {
  constructor(readonly p: number, readonly messages: number) {
    super();
  }
  async act(w: World) {
    await append(w, w.parts[this.p % w.parts.length], this.messages);
  }
  toString() {
    return `Append(p${this.p}, ${this.messages})`;
  }
}

class Tick extends Step {
  constructor(readonly ms: number) {
    super();
  }
  act(w: World) {
    w.clock.advance(this.ms);
    return Promise.resolve();
  }
  toString() {
    return `Tick(${this.ms} ms)`;
  }
}

/** The broker's own retention drops its oldest sealed segment, copied or not. */
class BrokerRetention extends Step {
  constructor(readonly p: number) {
    super();
  }
  async act(w: World) {
    const p = w.parts[this.p % w.parts.length];
    const { logs } = await localFiles(p.dir);
    const starts = [...logs].sort((a, b) => (a < b ? -1 : 1));
    if (starts.length < 2) return;
    const oldest = starts[0];
    const state = await durableState(w.config.agent.state_dir, p.id);
    if (!wasCopied(getSegment(state, 0n, oldest))) p.lost.add(oldest);
    p.brokerDeleted.add(oldest);
    await rm(join(p.dir, `${segmentStem(oldest)}.log`));
    await rm(join(p.dir, `${segmentStem(oldest)}.index`), { force: true });
  }
  toString() {
    return `BrokerRetention(p${this.p})`;
  }
}

/** A consumer (or group) stores an offset, or leaves an unreadable offset file. */
class StoreOffset extends Step {
  constructor(
    readonly p: number,
    readonly kind: "consumers" | "groups",
    readonly consumer: number,
    readonly at: number,
    readonly corrupt: boolean,
  ) {
    super();
  }
  async act(w: World) {
    const p = w.parts[this.p % w.parts.length];
    if (p.lastOffset < 0n) return;
    const offset = BigInt(Math.floor(this.at * Number(p.lastOffset + 1n)));
    await writeConsumerOffset(p.dir, {
      kind: this.kind,
      id: this.consumer,
      offset,
      format: w.format,
      corrupt: this.corrupt,
    });
    p.consumers.set(`${this.kind}/${this.consumer}`, { offset, bad: this.corrupt });
  }
  toString() {
    return `StoreOffset(p${this.p}, ${this.kind}/${this.consumer}, ${this.at.toFixed(3)}${
      this.corrupt ? ", corrupt" : ""
    })`;
  }
}

class DeleteConsumer extends Step {
  constructor(
    readonly p: number,
    readonly kind: "consumers" | "groups",
    readonly consumer: number,
  ) {
    super();
  }
  async act(w: World) {
    const p = w.parts[this.p % w.parts.length];
    await rm(join(p.dir, "offsets", this.kind, String(this.consumer)), { force: true });
    p.consumers.delete(`${this.kind}/${this.consumer}`);
  }
  toString() {
    return `DeleteConsumer(p${this.p}, ${this.kind}/${this.consumer})`;
  }
}

class Faults extends Step {
  constructor(readonly throttle: number, readonly server: number, readonly reset: number) {
    super();
  }
  act(w: World) {
    w.sim.setFaults({
      throttleRate: this.throttle,
      serverErrorRate: this.server,
      resetRate: this.reset,
    });
    w.faulty = this.throttle + this.server + this.reset > 0 || w.sim.faults.unavailable;
    return Promise.resolve();
  }
  toString() {
    return `Faults(throttle ${this.throttle}, 5xx ${this.server}, reset ${this.reset})`;
  }
}

class Outage extends Step {
  constructor(readonly down: boolean) {
    super();
  }
  act(w: World) {
    w.sim.setUnavailable(this.down);
    const f = w.sim.faults;
    w.faulty = f.unavailable || f.throttleRate + f.serverErrorRate + f.resetRate > 0;
    return Promise.resolve();
  }
  toString() {
    return this.down ? "StoreDown" : "StoreUp";
  }
}

/** A clean restart: the worker closes; a new one replays the journals. */
class Restart extends Step {
  async act(w: World) {
    await w.worker.close();
    newWorker(w);
    w.crashed = false;
  }
  toString() {
    return "Restart";
  }
}

class Compact extends Step {
  constructor(readonly p: number) {
    super();
  }
  async act(w: World) {
    const agent = w.worker.partitions.find((a) => a.id.partition === this.p % w.parts.length);
    if (!agent || w.crashed) return;
    await agent.compact();
    const state = await durableState(w.config.agent.state_dir, agent.id);
    assert.deepEqual(summary(state), summary(agent.state), "compaction changed the state");
  }
  toString() {
    return `Compact(p${this.p})`;
  }
}

function summary(s: PartitionState) {
  return {
    incarnation: s.incarnation,
    generation: s.generation,
    floor: s.floor,
    segments: [...s.segments.keys()].flatMap((g) =>
      segmentsOf(s, g).map((r) => ({ ...r, since: undefined }))
    ),
  };
}

interface Retention {
  local_retention_size: number;
  local_retention_age: number;
  message_expiry: number;
  max_topic_size: number;
}

/**
 * A tier pass under the given retention. With `crash`, the agent dies at a store request (the
 * request may have reached the store) and a new one starts over the same state directory.
 */
class Pass extends Step {
  constructor(
    readonly retention: Retention,
    readonly crash?: { after: number; applied: boolean },
  ) {
    super();
  }
  async act(w: World) {
    Object.assign(w.config.topic[0], this.retention);
    stats.passes++;
    let froze!: () => void;
    const frozen = new Promise<"frozen">((resolve) => (froze = () => resolve("frozen")));
    if (this.crash) w.store.arm(this.crash.after, this.crash.applied, froze);
    const pass = w.worker.pass();
    const first = await w.clock.runUntil(Promise.race([pass, frozen]));
    if (first === "frozen") {
      // The process died here: its journals take no more records, its requests never answer.
      await Promise.all(w.worker.partitions.map((a) => a.close()));
      w.store.release();
      await w.clock.runUntil(pass.catch(() => {}));
      await w.worker.close();
      newWorker(w);
      w.crashed = true;
      stats.crashes++;
      for (const p of w.parts) {
        for (const r of segmentsOf(await durableState(w.config.agent.state_dir, p.id))) {
          if (r.state === "COPY_SEGMENT_STARTED") stats.crashedCopies++;
          if (r.state === "DELETE_SEGMENT_STARTED") stats.crashedDeletes++;
        }
      }
      return;
    }
    w.store.disarm();
    w.crashed = false;
    const report = first;
    stats.evicted += report.evicted;
    stats.lost += report.lost;
    stats.remoteDeleted += report.remoteDeleted;
    if (!w.faulty) {
      assert.deepEqual(report.problems, [], "a pass over a healthy store has no errors");
    }
  }
  toString() {
    const r = this.retention;
    const fmt = (n: number) => (Number.isFinite(n) ? String(n) : "∞");
    return `Pass(local ${fmt(r.local_retention_size)} B/${fmt(r.local_retention_age)} ms, ` +
      `total ${fmt(r.max_topic_size)} B/${fmt(r.message_expiry)} ms` +
      (this.crash
        ? `, crash after ${this.crash.after}${this.crash.applied ? " applied" : ""})`
        : ")");
  }
}

const part = fc.nat(1);
const kind = fc.constantFrom("consumers" as const, "groups" as const);
const unlimited = fc.constant(Infinity);
const retention: fc.Arbitrary<Retention> = fc.record({
  local_retention_size: fc.oneof(unlimited, fc.constant(0), fc.integer({ min: 1024, max: 16384 })),
  local_retention_age: fc.oneof(unlimited, unlimited, fc.integer({ min: 0, max: 20_000 })),
  message_expiry: fc.oneof(
    { weight: 2, arbitrary: unlimited },
    { weight: 1, arbitrary: fc.integer({ min: 1000, max: 60_000 }) },
  ),
  max_topic_size: fc.oneof(
    { weight: 1, arbitrary: unlimited },
    { weight: 1, arbitrary: fc.integer({ min: 2048, max: 32_768 }) },
  ),
});
const rate = fc.constantFrom(0, 0, 0.1, 0.3, 0.6);
const passes = fc.tuple(
  retention,
  fc.oneof(
    { weight: 3, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.record({ after: fc.nat(24), applied: fc.boolean() }),
    },
  ),
).map(([r, c]) => new Pass(r, c));

const steps = [
  fc.tuple(part, fc.integer({ min: 1, max: 40 })).map(([p, n]) => new Append(p, n)),
  fc.tuple(part, fc.integer({ min: 1, max: 40 })).map(([p, n]) => new Append(p, n)),
  fc.tuple(part, fc.integer({ min: 1, max: 40 })).map(([p, n]) => new Append(p, n)),
  fc.integer({ min: 0, max: 4000 }).map((ms) => new Tick(ms)),
  fc.integer({ min: 0, max: 4000 }).map((ms) => new Tick(ms)),
  part.map((p) => new BrokerRetention(p)),
  fc.tuple(part, kind, fc.integer({ min: 1, max: 2 }), fc.double({ min: 0, max: 1, noNaN: true }))
    .map(([p, k, c, at]) => new StoreOffset(p, k, c, at, false)),
  fc.tuple(
    part,
    kind,
    fc.integer({ min: 1, max: 2 }),
    fc.double({ min: 0, max: 1, noNaN: true }),
    fc.nat(7),
  )
    .map(([p, k, c, at, bad]) => new StoreOffset(p, k, c, at, bad === 0)),
  fc.tuple(part, kind, fc.integer({ min: 1, max: 2 })).map(([p, k, c]) =>
    new DeleteConsumer(p, k, c)
  ),
  fc.tuple(rate, rate, rate).map(([t, s, r]) => new Faults(t, s, r)),
  fc.boolean().map((down) => new Outage(down)),
  fc.constant(new Restart()),
  part.map((p) => new Compact(p)),
  passes,
  passes,
  passes,
  passes,
];

const setup = fc.record({
  format: fc.constantFrom("iggy-0.8" as const, "iggy-0.9" as const),
  partitions: fc.integer({ min: 1, max: 2 }),
  segmentSize: fc.integer({ min: 1024, max: 4096 }),
  payloadSize: fc.integer({ min: 16, max: 160 }),
  quiescence: fc.constantFrom(0, 1500),
  simSeed: fc.nat(),
  rngSeed: fc.nat(),
  deleteBatch: fc.integer({ min: 2, max: 12 }),
  deletePending: fc.integer({ min: 1, max: 4 }),
  initialMessages: fc.integer({ min: 0, max: 60 }),
});

/** Heals the store and runs passes until nothing is left to do; then checks the end state. */
async function settle(w: World): Promise<void> {
  w.sim.setFaults({ throttleRate: 0, serverErrorRate: 0, resetRate: 0, unavailable: false });
  w.faulty = false;
  w.clock.advance(60_000); // every segment with a successor is quiet by now
  Object.assign(w.config.topic[0], { message_expiry: Infinity, max_topic_size: Infinity });
  let report;
  for (let i = 0; i < 8; i++) {
    const before = await snapshot(w);
    report = await w.clock.runUntil(w.worker.pass());
    w.crashed = false;
    await checkInvariants(w, before, `settling pass ${i + 1}`);
    const moved = report.copied + report.adopted + report.cleaned + report.lost + report.evicted +
      report.remoteDeleted;
    if (moved === 0 && report.pending === 0) break;
  }
  assert.deepEqual(report!.problems, [], "the last settling pass has no errors");
  assert.equal(report!.pending, 0, "nothing is left waiting for a copy");
  let lostRecords = 0;
  for (const p of w.parts) {
    const state = await durableState(w.config.agent.state_dir, p.id);
    const records = segmentsOf(state);
    const barrier = barrierOf(p);
    const label = `${p.id.stream}/${p.id.topic}/${p.id.partition}`;
    for (const r of records) {
      assert.ok(
        r.state !== "DANGLING" && r.state !== "COPY_SEGMENT_STARTED" &&
          !(r.state === "DELETE_SEGMENT_STARTED" && r.deleteCause === "dangling"),
        `${label}: segment ${r.start} left in ${r.state}`,
      );
      if (r.state === "DELETE_SEGMENT_STARTED") {
        // A pending retention delete may wait only for the consumer barrier.
        assert.ok(
          barrier.bad || (barrier.lowest !== undefined && r.meta!.endOffset >= barrier.lowest),
          `${label}: retention delete of ${r.start} left pending`,
        );
      }
      if (r.state === "LOST_BEFORE_UPLOAD") {
        lostRecords++;
        for (const s of p.sealed.values()) {
          if (s.start >= r.start && s.start <= r.lostEndOffset!) {
            assert.ok(p.lost.has(s.start), `${label}: segment ${s.start} recorded lost wrongly`);
          }
        }
      }
    }
    const { logs } = await localFiles(p.dir);
    let lastEnd = -1n;
    for (const s of p.sealed.values()) {
      if (s.end > lastEnd) lastEnd = s.end;
      const rec = getSegment(state, 0n, s.start);
      if (p.lost.has(s.start) && !wasCopied(rec)) {
        assert.ok(
          records.some((r) =>
            r.state === "LOST_BEFORE_UPLOAD" && r.start <= s.start && r.lostEndOffset! >= s.end
          ),
          `${label}: lost segment ${s.start} has no lost_before_upload record`,
        );
      } else if (p.lost.has(s.start)) {
        // The broker dropped it before a verified copy, but a copy attempt had left a complete
        // object: the cleanup adopted it instead of calling it lost. It must be this segment.
        const obj = w.sim.objects.get(keysOf(w, p, s.start).log);
        assert.ok(
          rec!.state !== "COPY_SEGMENT_FINISHED" || (obj && bytesEqual(obj.bytes, s.log)),
          `${label}: segment ${s.start} adopted without its bytes in the store`,
        );
      } else {
        assert.ok(
          wasCopied(rec),
          `${label}: sealed segment ${s.start} (${logs.has(s.start) ? "local" : "gone"}) ` +
            `not copied: ${rec?.state}`,
        );
      }
    }
    assert.equal(state.floor, lastEnd, `${label}: floor reaches the last sealed segment`);
    // Nothing but verified copies (and deletions waiting on the barrier) is left in the store.
    const prefix = keysOf(w, p, 0n).log.replace(/[^/]*$/, "");
    for (const key of w.sim.objects.keys()) {
      if (!key.startsWith(prefix)) continue;
      const start = BigInt(/(\d{20})\.(log|index)$/.exec(key)![1]);
      const rec = getSegment(state, 0n, start);
      assert.ok(
        rec?.state === "COPY_SEGMENT_FINISHED" || rec?.state === "DELETE_SEGMENT_STARTED",
        `${label}: stray object ${key} (${rec?.state})`,
      );
    }
    // Local bytes were never touched by tierd.
    for (const s of p.sealed.values()) {
      if (!logs.has(s.start)) continue;
      const bytes = await readFile(join(p.dir, `${segmentStem(s.start)}.log`));
      assert.ok(bytesEqual(bytes, s.log), `${label}: local segment ${s.start} changed`);
    }
  }
  assert.equal(w.observer.lost, lostRecords, "every lost_before_upload was counted once");
  assert.deepEqual(await w.sim.listMultipartUploads(""), [], "no multipart upload left");
}

Deno.test("tier worker model: invariants hold under broker churn, consumers, faults and crashes", async () => {
  const started = performance.now();
  await fc.assert(
    fc.asyncProperty(
      setup,
      fc.commands(steps, {
        maxCommands: 40,
        size: "max",
        replayPath: Deno.env.get("TIERD_MODEL_REPLAY"), // the counterexample's replayPath
      }),
      async (s, cmds) => {
        const tmp = await scratchDir("tierd-model");
        const { logger } = capturingLogger("warn");
        let world: World | undefined;
        try {
          const config = testConfig({ dir: tmp.path, backend: "sim", uploadTimeout: "2 s" });
          config.agent.seal_quiescence = s.quiescence;
          config.tiered_storage.delete_batch_per_pass = s.deleteBatch;
          config.tiered_storage.delete_pending_per_partition = s.deletePending;
          const clock = new FakeClock();
          const sim = new SimStore({ seed: s.simSeed, clock });
          const w: World = world = {
            config,
            format: s.format,
            clock,
            sim,
            store: undefined as unknown as FreezingStore,
            worker: undefined as unknown as TierWorker,
            observer: recordingObserver(),
            logger,
            rng: seededRandom(s.rngSeed),
            parts: [],
            faulty: false,
            crashed: false,
          };
          for (let i = 0; i < s.partitions; i++) {
            const id = { stream: 0, topic: 0, partition: i };
            const p: PartitionModel = {
              id,
              dir: partitionDir(config.agent.data_dir, id),
              stateDir: partitionStateDir(config.agent.state_dir, id),
              segmentSize: s.segmentSize,
              payloadSize: s.payloadSize,
              sealed: new Map(),
              active: 0n,
              lastOffset: -1n,
              brokerDeleted: new Set(),
              lost: new Set(),
              consumers: new Map(),
              maxFloor: -1n,
            };
            w.parts.push(p);
            await append(w, p, Math.max(1, s.initialMessages));
          }
          newWorker(w);
          await fc.asyncModelRun(() => ({ model: w, real: w }), cmds);
          await settle(w);
          stats.runs++;
        } finally {
          await world?.worker.close().catch(() => {});
          await tmp.cleanup();
        }
      },
    ),
    {
      numRuns: NUM_RUNS,
      // A failure prints its seed, path and replayPath; TIERD_MODEL_SEED, TIERD_MODEL_PATH and
      // TIERD_MODEL_REPLAY replay it.
      ...(Deno.env.get("TIERD_MODEL_SEED") && {
        seed: Number(Deno.env.get("TIERD_MODEL_SEED")),
        path: Deno.env.get("TIERD_MODEL_PATH"),
        endOnFailure: true,
      }),
    },
  );
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(
    `model: ${stats.runs} runs, ${stats.steps} steps (${stats.passes} passes, ${stats.crashes} ` +
      `crashes, leaving ${stats.crashedCopies} copies and ${stats.crashedDeletes} deletions ` +
      `mid-way), ${stats.evicted} evictions, ${stats.lost} losses recorded, ` +
      `${stats.remoteDeleted} retention deletes, ${seconds} s`,
  );
});

/** A worker on the real clock, a second ahead so files written just now count as quiet. */
function plainWorker(config: Config, store: ObjectStore): TierWorker {
  const clock = aheadClock(1000);
  return new TierWorker({
    config,
    store,
    prefix: PREFIX,
    logger: silentLogger,
    clock,
    rng: () => 0,
  });
}

/** Runs one pass that dies at the first `op` request (`applied`: after it reached the store). */
async function passThatCrashes(
  config: Config,
  sim: SimStore,
  op: "put" | "deleteMany",
  applied: boolean,
): Promise<void> {
  const store = new FreezingStore(sim);
  const worker = plainWorker(config, store);
  let froze!: () => void;
  const frozen = new Promise<"frozen">((resolve) => (froze = () => resolve("frozen")));
  store.arm(0, applied, froze, op);
  const pass = worker.pass();
  assert.equal(await Promise.race([pass, frozen]), "frozen");
  await Promise.all(worker.partitions.map((a) => a.close()));
  store.release();
  await pass.catch(() => {});
  await worker.close();
}

// The first two counterexamples the model found, kept as plain regressions.
Deno.test("a copy cut off by a crash, then deleted by the broker, becomes a recorded loss", async () => {
  const tmp = await scratchDir("tierd-model");
  try {
    const config = testConfig({ dir: tmp.path, backend: "sim" });
    const sim = new SimStore();
    const id = { stream: 0, topic: 0, partition: 0 };
    const segments = await appendMessages({
      format: "iggy-0.9",
      dataDir: config.agent.data_dir,
      ...id,
      messages: 40,
      segmentSize: 1024,
    });
    await passThatCrashes(config, sim, "put", true);
    const crashed = await durableState(config.agent.state_dir, id);
    assert.equal(getSegment(crashed, 0n, 0n)?.state, "COPY_SEGMENT_STARTED");
    await rm(segments[0].logPath); // the broker's retention
    await rm(segments[0].indexPath);
    const worker = plainWorker(config, sim);
    // The first pass cleans up the interrupted copy, the next records the gap.
    for (let i = 0; i < 2; i++) assert.deepEqual((await worker.pass()).problems, []);
    await worker.close();
    const state = await durableState(config.agent.state_dir, id);
    assert.equal(getSegment(state, 0n, 0n)?.state, "LOST_BEFORE_UPLOAD");
    assert.equal(state.floor, segments.at(-2)!.endOffset);
    assert.deepEqual(
      [...sim.objects.keys()].filter((k) => k.endsWith("00000000000000000000.log")),
      [],
    );
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("a dangling cleanup cut off by a crash is finished after the restart", async () => {
  const tmp = await scratchDir("tierd-model");
  try {
    const config = testConfig({ dir: tmp.path, backend: "sim" });
    const sim = new SimStore();
    const id = { stream: 0, topic: 0, partition: 0 };
    const segments = await appendMessages({
      format: "iggy-0.8",
      dataDir: config.agent.data_dir,
      ...id,
      messages: 40,
      segmentSize: 1024,
    });
    const down = plainWorker(config, sim);
    await down.open(); // a partition seen for the first time asks the bucket about itself
    sim.setUnavailable(true);
    await down.pass();
    await down.close();
    sim.setUnavailable(false);
    await passThatCrashes(config, sim, "deleteMany", false);
    const crashed = await durableState(config.agent.state_dir, id);
    assert.equal(getSegment(crashed, 0n, 0n)?.state, "DELETE_SEGMENT_STARTED");
    const worker = plainWorker(config, sim);
    const report = await worker.pass();
    await worker.close();
    assert.deepEqual(report.problems, []);
    const state = await durableState(config.agent.state_dir, id);
    assert.ok(segmentsOf(state).every((r) => r.state === "COPY_SEGMENT_FINISHED"));
    assert.equal(state.floor, segments.at(-2)!.endOffset);
  } finally {
    await tmp.cleanup();
  }
});
