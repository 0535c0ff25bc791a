// The agent beside a broker that does its own thing: retention that deletes a
// segment before it was copied, a partition directory recreated or purged, a partition that
// disappears mid-run, and `evict_via = "broker"` against a local stand-in of Iggy's HTTP API.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { readdir, readFile, rename, rm, stat, unlink } from "node:fs/promises";
import { SimStore } from "../../providers/sim/store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import type { Config } from "../../src/config/schema.ts";
import {
  appendMessages,
  type GeneratedSegment,
  generatePartition,
  partitionDir,
  segmentPaths,
} from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { readConsumerBarrier } from "../../src/partition/consumer_offsets.ts";
import { incarnationHex } from "../../src/layout/partition.ts";
import { parseSegmentFileName, type PartitionId } from "../../src/layout/partition.ts";
import { getSegment, segmentsOf } from "../../src/state/segment_state.ts";
import { markerPaths, partitionStateDir } from "../../src/layout/state_paths.ts";
import { describeProblem } from "../../src/tier/problem.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import { BrokerPresence } from "../../src/tier/broker_presence.ts";
import { createLogger, type Logger } from "../../src/log.ts";
import { holdOpen, release } from "./_holder.ts";
import {
  capturingLogger,
  durableState,
  type LogLine,
  recordingObserver,
  remoteKeys,
  scratchDir,
  writeConsumerOffset,
} from "../_model/tier_harness.ts";
import { testConfig } from "../_config.ts";
import { aheadClock, FakeClock } from "../_fake_clock.ts";
import type { Clock } from "../../src/base/clock.ts";

await initHashes();

const P0: PartitionId = { stream: 0, topic: 0, partition: 0 };
const P1: PartitionId = { stream: 0, topic: 0, partition: 1 };
const SEGMENT = 16 * 1024;

interface Rig {
  config: Config;
  sim: SimStore;
  logs: LogLine[];
  observer: ReturnType<typeof recordingObserver>;
  worker(store?: ObjectStore): TierWorker;
  generate(id: PartitionId, messages: number, o?: { seed?: number }): Promise<GeneratedSegment[]>;
  append(id: PartitionId, messages: number): Promise<GeneratedSegment[]>;
  dir(id: PartitionId): string;
  keys(id: PartitionId, start: bigint): Promise<{ log: string; index: string }>;
  cleanup(): Promise<void>;
}

async function rig(format: FormatName = "iggy-0.9", clock?: Clock): Promise<Rig> {
  const tmp = await scratchDir("tierd-broker");
  const config = testConfig({ dir: tmp.path, backend: "sim", uploadTimeout: "2 s" });
  const sim = new SimStore();
  const { logger, lines } = capturingLogger();
  const observer = recordingObserver();
  const gen = { format, dataDir: config.agent.data_dir, segmentSize: SEGMENT, payloadSize: 100 };
  return {
    config,
    sim,
    logs: lines,
    observer,
    worker: (store = sim) =>
      new TierWorker({
        config,
        store,
        prefix: "iggy",
        logger,
        observer,
        rng: () => 0,
        clock: clock ?? aheadClock(1000), // files written just now already count as quiet
      }),
    generate: (id, messages, o = {}) => generatePartition({ ...gen, ...id, messages, ...o }),
    append: (id, messages) => appendMessages({ ...gen, ...id, messages }),
    dir: (id) => partitionDir(config.agent.data_dir, id),
    keys: (id, start) => remoteKeys(config, id, start),
    cleanup: tmp.cleanup,
  };
}

/** A logger whose lines land in `lines` (beside the rig's own). */
function capturingLoggerInto(lines: LogLine[]): Logger {
  return createLogger({ write: (l) => void lines.push(JSON.parse(l)) });
}

function logged(r: Rig, msg: string): LogLine[] {
  return r.logs.filter((l) => l.msg === msg);
}

async function localStarts(dir: string): Promise<bigint[]> {
  return (await readdir(dir))
    .map(parseSegmentFileName)
    .filter((f) => f?.ext === "log")
    .map((f) => f!.start)
    .sort((a, b) => (a < b ? -1 : 1));
}

/** The broker's retention drops a segment: `.log`, then `.index`. */
async function brokerDeletes(s: GeneratedSegment): Promise<void> {
  await unlink(s.logPath);
  await unlink(s.indexPath);
}

Deno.test("segments the broker deleted before their copy are recorded lost_before_upload and counted", async () => {
  const r = await rig("iggy-0.8");
  try {
    const segments = await r.generate(P0, 800);
    assert.ok(segments.length >= 5);
    await brokerDeletes(segments[0]);
    await brokerDeletes(segments[1]);
    const w = r.worker();
    try {
      const report = await w.pass();
      assert.deepEqual(report.problems, []);
      assert.equal(report.lost, 1);
      assert.equal(r.observer.lost, 1, "counted through the observer");
      const state = await durableState(r.config.agent.state_dir, P0);
      const lost = segmentsOf(state).filter((s) => s.state === "LOST_BEFORE_UPLOAD");
      assert.equal(lost.length, 1);
      assert.equal(lost[0].start, 0n);
      assert.equal(lost[0].lostEndOffset, segments[1].endOffset);
      // The floor skips the recorded gap: everything sealed after it is tiered.
      assert.equal(state.floor, segments.at(-2)!.endOffset);
      for (const s of segments.slice(0, 2)) {
        const keys = await r.keys(P0, s.startOffset);
        assert.equal(r.sim.objects.has(keys.log), false);
      }
      const line = logged(r, "offsets deleted by the broker before they were copied")[0];
      assert.equal(line?.level, "warn");
      assert.equal(line.lost_from, "0");
      assert.equal(line.lost_to, String(segments[1].endOffset));
      // Counted once: later passes add nothing.
      await w.pass();
      assert.equal(r.observer.lost, 1);
    } finally {
      await w.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("a recreated partition directory gets a new incarnation and new keys; old objects stay", async () => {
  const r = await rig();
  try {
    await r.generate(P0, 600, { seed: 1 });
    const w = r.worker();
    try {
      assert.deepEqual((await w.pass()).problems, []);
      const before = await durableState(r.config.agent.state_dir, P0);
      const old = new Map([...r.sim.objects].map(([k, o]) => [k, o.bytes]));
      assert.ok(old.size >= 4);
      // The topic is deleted and recreated with the same ids. The new directory is made while
      // the old one still exists (renamed away), so it cannot reuse the old inode number.
      const dir = r.dir(P0);
      await rename(dir, `${dir}.deleted`);
      const fresh = await r.generate(P0, 500, { seed: 2 });
      await rm(`${dir}.deleted`, { recursive: true });

      const report = await w.pass();
      assert.deepEqual(report.problems, []);
      assert.equal(report.copied, fresh.length - 1);
      const after = await durableState(r.config.agent.state_dir, P0);
      assert.notEqual(after.incarnation, before.incarnation);
      assert.equal(after.generation, 0n);
      assert.equal(after.floor, fresh.at(-2)!.endOffset);
      const newPrefix = `${incarnationHex(after.incarnation!)}-0/`;
      for (const s of fresh.slice(0, -1)) {
        const keys = await r.keys(P0, s.startOffset);
        assert.ok(keys.log.includes(newPrefix));
        assert.deepEqual(
          new Uint8Array(r.sim.objects.get(keys.log)!.bytes),
          new Uint8Array(await readFile(s.logPath)),
        );
      }
      // The old incarnation's objects are untouched (left to the orphan sweep).
      for (const [key, bytes] of old) assert.equal(r.sim.objects.get(key)?.bytes, bytes, key);
      const line = logged(r, "partition directory was recreated: new incarnation")[0];
      assert.ok(line, "the new incarnation is logged");
      assert.equal(line.old_incarnation, incarnationHex(before.incarnation!));
    } finally {
      await w.close();
    }
    // A restarted agent keeps the new incarnation.
    const w2 = r.worker();
    assert.deepEqual((await w2.pass()).problems, []);
    await w2.close();
    const last = await durableState(r.config.agent.state_dir, P0);
    assert.equal(logged(r, "partition directory was recreated: new incarnation").length, 1);
    assert.notEqual(last.incarnation, undefined);
  } finally {
    await r.cleanup();
  }
});

Deno.test("a purge (offsets restart at 0 below the floor) bumps the generation and its keys", async () => {
  const r = await rig();
  try {
    const first = await r.generate(P0, 600, { seed: 1 });
    const w = r.worker();
    try {
      assert.deepEqual((await w.pass()).problems, []);
      const before = await durableState(r.config.agent.state_dir, P0);
      assert.equal(before.floor, first.at(-2)!.endOffset);
      const old = new Map([...r.sim.objects].map(([k, o]) => [k, o.bytes]));
      // PurgePartition: every segment goes, the partition restarts at offset 0 (same directory).
      for (const s of first) await brokerDeletes(s);
      const fresh = await r.generate(P0, 200, { seed: 3 });
      assert.ok(fresh.at(-1)!.startOffset <= before.floor, "the new chain starts below the floor");

      const report = await w.pass();
      assert.deepEqual(report.problems, []);
      const after = await durableState(r.config.agent.state_dir, P0);
      assert.equal(after.incarnation, before.incarnation);
      assert.equal(after.generation, before.generation + 1n);
      assert.equal(after.floor, fresh.length > 1 ? fresh.at(-2)!.endOffset : -1n);
      const prefix = `${incarnationHex(after.incarnation!)}-${after.generation}/`;
      for (const s of fresh.slice(0, -1)) {
        const keys = await r.keys(P0, s.startOffset);
        assert.ok(keys.log.includes(prefix), keys.log);
        assert.deepEqual(
          new Uint8Array(r.sim.objects.get(keys.log)!.bytes),
          new Uint8Array(await readFile(s.logPath)),
        );
      }
      for (const [key, bytes] of old) assert.equal(r.sim.objects.get(key)?.bytes, bytes, key);
      assert.equal(
        logged(r, "partition was purged (offsets restarted below the floor): new generation")
          .length,
        1,
      );
      // The old generation's records are kept (its objects still exist), the new one is separate.
      assert.equal(segmentsOf(after, 0n).length, first.length - 1);
    } finally {
      await w.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("a purge unseen while the agent was down never costs data: the changed segments stay, loudly", async () => {
  const r = await rig("iggy-0.8");
  try {
    // Fixed-size messages: the purged and the new chain have segments of the very same sizes
    // and start offsets; only the contents differ. The new chain grows past the old floor
    // before the agent looks again, so "restarted below the floor" cannot be seen.
    const first = await r.generate(P0, 600, { seed: 1 });
    const w = r.worker();
    assert.deepEqual((await w.pass()).problems, []);
    await w.close();
    const before = await durableState(r.config.agent.state_dir, P0);
    for (const s of first) await brokerDeletes(s);
    const fresh = await r.generate(P0, 900, { seed: 4 });
    assert.ok(fresh.at(-1)!.startOffset > before.floor, "the new chain grew past the old floor");
    assert.equal(fresh[0].size, first[0].size);
    const bytes = new Map<bigint, Uint8Array>();
    for (const s of fresh) bytes.set(s.startOffset, new Uint8Array(await readFile(s.logPath)));

    r.config.topic[0].local_retention_size = 0; // evict whatever is verified
    const w2 = r.worker();
    try {
      for (let i = 0; i < 2; i++) {
        const report = await w2.pass();
        const words = report.problems.map(describeProblem);
        assert.ok(
          words.some((e) => e.includes(fresh[0].logPath)),
          `the changed segment is named: ${words}`,
        );
      }
      // Whatever left the broker directory is in the store, byte for byte.
      const present = new Set(await localStarts(r.dir(P0)));
      for (const s of fresh.slice(0, -1)) {
        if (present.has(s.startOffset)) continue;
        const obj = r.sim.objects.get((await r.keys(P0, s.startOffset)).log);
        assert.ok(obj, `segment ${s.startOffset} left the broker without a copy`);
        assert.deepEqual(
          new Uint8Array(obj.bytes),
          bytes.get(s.startOffset),
          `segment ${s.startOffset}`,
        );
      }
      assert.ok(present.has(0n), "the first new segment, never copied, is still local");
      const line =
        logged(r, "local segment changed after its copy was verified; not evicting it")[0];
      assert.equal(line?.level, "error");
    } finally {
      await w2.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("a partition directory that disappears stops only its own work", async () => {
  const r = await rig();
  try {
    await r.generate(P0, 400);
    await r.generate(P1, 400);
    const w = r.worker();
    try {
      assert.deepEqual((await w.pass()).problems, []);
      assert.equal(w.partitions.length, 2);
      // Between passes: partition 1's directory goes (topic partitions deleted).
      await rm(r.dir(P1), { recursive: true });
      const more = await r.append(P0, 300);
      const report = await w.pass();
      assert.deepEqual(report.problems, []);
      assert.equal(report.copied, more.length - 1);
      assert.deepEqual(w.partitions.map((a) => a.label), ["0/0/0"]);
      assert.equal(logged(r, "partition directory gone; its work stops").length, 1);
    } finally {
      await w.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("a partition directory removed in the middle of a pass fails that partition only", async () => {
  const r = await rig();
  try {
    await r.generate(P0, 600);
    await r.generate(P1, 600);
    // The store removes partition 1's directory as its first segment's upload arrives.
    const dir1 = r.dir(P1);
    let removed = false;
    const sim = r.sim;
    const store: ObjectStore = {
      kind: "sim",
      put: async (key, body, o) => {
        if (!removed && key.includes("/0/0/1/")) {
          removed = true;
          await rm(dir1, { recursive: true });
        }
        return await sim.put(key, body, o);
      },
      get: (k, o) => sim.get(k, o),
      head: (k, o) => sim.head(k, o),
      deleteMany: (k, o) => sim.deleteMany(k, o),
      list: (p, o) => sim.list(p, o),
      createMultipart: (k, o) => sim.createMultipart(k, o),
      putPart: (k, u, n, b, o) => sim.putPart(k, u, n, b, o),
      completeMultipart: (k, u, p, o) => sim.completeMultipart(k, u, p, o),
      abortMultipart: (k, u, o) => sim.abortMultipart(k, u, o),
      listMultipartUploads: (p, o) => sim.listMultipartUploads(p, o),
    };
    const w = r.worker(store);
    try {
      const report = await w.pass();
      assert.ok(removed);
      const p0 = report.partitions.find((p) => p.partition === "0/0/0")!;
      assert.deepEqual(p0.problems, []);
      assert.ok(p0.copied >= 2, "the other partition is tiered in full");
      const next = await w.pass();
      assert.deepEqual(next.problems, []);
      assert.deepEqual(w.partitions.map((a) => a.label), ["0/0/0"]);
      await assert.rejects(stat(dir1));
    } finally {
      await w.close();
    }
  } finally {
    await r.cleanup();
  }
});

/**
 * A local stand-in for the two routes of Iggy's HTTP API that `evict_via = "broker"` uses,
 * following docs/architecture.md, "The broker contract" (the real 0.8 and 0.9 servers are run in
 * test/e2e/). `POST /users/login` answers a JWT-like token for the right credentials;
 * `DELETE /streams/{s}/topics/{t}/partitions/{p}?segments_count=N` needs that bearer token and
 * deletes the N oldest sealed segments (`.log`, then `.index`), stopping at the first one that
 * ends after the lowest stored consumer offset (Iggy keeps `end_offset > barrier`), and answers
 * 204. With `deferred`, files go only when `reconcile()` runs, like 0.9's reconciler that
 * unlinks a little later; with `keeps`, it answers 204 and deletes nothing while `keeps()` is
 * true (a consumer offset the broker holds in memory that tierd cannot read).
 */
class BrokerStandIn {
  readonly server: http.Server;
  logins = 0;
  readonly deletes: { partition: string; count: number }[] = [];
  readonly refused: string[] = [];
  #tokens = new Set<string>();
  #queue: string[] = [];

  constructor(
    readonly dataDir: string,
    readonly creds: { username: string; password: string },
    readonly options: { deferred?: boolean; keeps?: () => boolean } = {},
  ) {
    this.server = http.createServer((req, res) => {
      this.#handle(req, res).catch((err) => {
        res.writeHead(500).end(String(err));
      });
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Forgets every token, as when they expire. */
  expireTokens(): void {
    this.#tokens.clear();
  }

  /** Unlinks what deferred DeleteSegments calls dropped. */
  async reconcile(): Promise<void> {
    for (const path of this.#queue.splice(0)) await unlink(path).catch(() => {});
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url!, "http://stand-in");
    let body = "";
    for await (const chunk of req) body += chunk;
    if (req.method === "POST" && url.pathname === "/users/login") {
      const { username, password } = JSON.parse(body);
      if (username !== this.creds.username || password !== this.creds.password) {
        this.refused.push("login");
        res.writeHead(401, { "content-type": "application/json" });
        res.end(JSON.stringify({ id: 40, code: "invalid_credentials" }));
        return;
      }
      const token = `tok-${++this.logins}`;
      this.#tokens.add(token);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ user_id: 1, access_token: { token, expiry: 0 } }));
      return;
    }
    const m = /^\/streams\/(\d+)\/topics\/(\d+)\/partitions\/(\d+)$/.exec(url.pathname);
    if (req.method === "DELETE" && m) {
      const auth = req.headers.authorization ?? "";
      if (!auth.startsWith("Bearer ") || !this.#tokens.has(auth.slice(7))) {
        this.refused.push("delete");
        res.writeHead(401).end();
        return;
      }
      const count = Number(url.searchParams.get("segments_count"));
      const id = { stream: Number(m[1]), topic: Number(m[2]), partition: Number(m[3]) };
      this.deletes.push({ partition: `${m[1]}/${m[2]}/${m[3]}`, count });
      const dir = partitionDir(this.dataDir, id);
      const starts = await localStarts(dir);
      const { lowest } = await readConsumerBarrier(dir);
      const keeps = this.options.keeps?.() ?? false;
      // The last segment is active; a sealed one ends where its successor starts.
      for (let i = 0; i < Math.min(count, starts.length - 1) && !keeps; i++) {
        const end = starts[i + 1] - 1n;
        if (lowest !== undefined && end > lowest) break; // a consumer still needs it
        const paths = segmentPaths(dir, starts[i]);
        if (this.options.deferred) this.#queue.push(paths.log, paths.index);
        else {
          await unlink(paths.log);
          await unlink(paths.index);
        }
      }
      res.writeHead(204).end();
      return;
    }
    res.writeHead(404).end();
  }
}

async function brokerRig(
  options: { deferred?: boolean; keeps?: () => boolean; password?: string; clock?: Clock } = {},
) {
  const r = await rig("iggy-0.9", options.clock);
  const broker = new BrokerStandIn(r.config.agent.data_dir, {
    username: "iggy",
    password: "iggy-secret",
  }, options);
  const url = await broker.start();
  r.config.agent.broker = {
    http_url: url,
    username: "iggy",
    password: options.password ?? "iggy-secret",
    personal_access_token: "",
    tls_ca: "",
  };
  r.config.agent.evict_via = "broker";
  r.config.topic[0].local_retention_size = 0; // evict everything verified
  return {
    r,
    broker,
    async cleanup() {
      await broker.close();
      await r.cleanup();
    },
  };
}

Deno.test("evict_via = broker: segments the broker kept for a consumer stay uploaded local segments", async () => {
  const { r, broker, cleanup } = await brokerRig();
  try {
    const segments = await r.generate(P0, 800);
    const sealed = segments.slice(0, -1);
    assert.ok(sealed.length >= 5);
    // A consumer is inside the third segment: the broker keeps it and everything after.
    const barrier = sealed[2].startOffset + 5n;
    await writeConsumerOffset(r.dir(P0), { id: 1, offset: barrier, format: "iggy-0.9" });
    const w = r.worker();
    try {
      const report = await w.pass();
      assert.deepEqual(report.problems, []);
      assert.equal(broker.logins, 1);
      // Only the segments the barrier lets go are asked for: the third ends after it.
      assert.deepEqual(broker.deletes, [{ partition: "0/0/0", count: 2 }]);
      assert.equal(report.evicted, 2);
      const block = report.partitions[0].evictionBlocked;
      assert.equal(block?.reason, "consumer_offset");
      assert.equal(block.consumerOffset, barrier);
      assert.equal(block.segment, sealed[2].startOffset);
      assert.match(block.text, new RegExp(`^eviction blocked by consumer offset ${barrier}\\b`));
      assert.deepEqual(w.evictionBlocks().get("0/0/0"), block, "the status page's view");
      const warned = r.logs.filter((l) => l.msg === block.text);
      assert.equal(warned.length, 1);
      assert.equal(warned[0].level, "warn");
      assert.equal(warned[0].consumer_offset, String(barrier));
      assert.deepEqual(r.observer.blocked, [{ partition: "0/0/0", reason: "consumer_offset" }]);
      const state = await durableState(r.config.agent.state_dir, P0);
      const stateDir = partitionStateDir(r.config.agent.state_dir, P0);
      for (const [i, s] of sealed.entries()) {
        const rec = getSegment(state, 0n, s.startOffset)!;
        assert.equal(rec.state, "COPY_SEGMENT_FINISHED");
        assert.equal(rec.evicted, i < 2, `segment ${s.startOffset}`);
        // Marker first: the segments offered to the broker have one; the others were never
        // offered (the barrier keeps them) and stay uploaded local segments.
        const marker = await stat(markerPaths(stateDir, s.startOffset).marker).then(
          () => true,
          () => false,
        );
        assert.equal(marker, i < 2, `marker of segment ${s.startOffset}`);
        if (i >= 2) await stat(s.logPath);
      }
      await w.close();

      // A restart sees the kept segments as uploaded local ones: nothing re-uploaded, and the
      // broker is not asked for what the barrier keeps (nor the copies HEADed for it).
      const puts = r.sim.requestCount("put");
      const heads = r.sim.requestCount("head");
      const w2 = r.worker();
      for (let i = 0; i < 3; i++) {
        const again = await w2.pass();
        assert.deepEqual(again.problems, []);
        assert.equal(again.copied + again.evicted, 0);
        assert.equal(again.partitions[0].evictionBlocked?.reason, "consumer_offset");
      }
      assert.equal(r.sim.requestCount("put"), puts);
      assert.equal(r.sim.requestCount("head"), heads);
      assert.equal(broker.deletes.length, 1);
      // The consumer moves on: the broker lets them go, and the agent records it.
      await writeConsumerOffset(r.dir(P0), {
        id: 1,
        offset: segments.at(-1)!.startOffset,
        format: "iggy-0.9",
      });
      const last = await w2.pass();
      assert.deepEqual(last.problems, []);
      assert.equal(last.evicted, sealed.length - 2);
      assert.equal(last.partitions[0].evictionBlocked, undefined);
      assert.equal(logged(r, "eviction no longer blocked").length, 1);
      assert.deepEqual(r.observer.blocked.at(-1), { partition: "0/0/0", reason: undefined });
      await w2.close();
      assert.deepEqual(await localStarts(r.dir(P0)), [segments.at(-1)!.startOffset]);
    } finally {
      await w.close();
    }
  } finally {
    await cleanup();
  }
});

Deno.test("evict_via = broker: nothing is recorded evicted until the directory shows it gone", async () => {
  const { r, broker, cleanup } = await brokerRig({ deferred: true });
  try {
    const segments = await r.generate(P0, 500);
    const sealed = segments.slice(0, -1);
    const w = r.worker();
    try {
      const first = await w.pass();
      assert.deepEqual(first.problems, []);
      assert.equal(broker.deletes.length, 1);
      assert.equal(first.evicted, 0, "the broker answered, but the files are still there");
      let state = await durableState(r.config.agent.state_dir, P0);
      assert.ok(segmentsOf(state).every((s) => !s.evicted));
      // The broker's reconciler unlinks them; the next pass records what is gone.
      await broker.reconcile();
      const second = await w.pass();
      assert.deepEqual(second.problems, []);
      assert.equal(second.evicted, sealed.length);
      state = await durableState(r.config.agent.state_dir, P0);
      assert.ok(segmentsOf(state).every((s) => s.evicted));
    } finally {
      await w.close();
    }
  } finally {
    await cleanup();
  }
});

Deno.test("evict_via = broker: an expired token is renewed; refused credentials keep segments local", async () => {
  const { r, broker, cleanup } = await brokerRig();
  try {
    await r.generate(P0, 300);
    const w = r.worker();
    try {
      assert.deepEqual((await w.pass()).problems, []);
      assert.equal(broker.logins, 1);
      broker.expireTokens();
      await r.append(P0, 300);
      const report = await w.pass();
      assert.deepEqual(report.problems, []);
      assert.ok(report.evicted > 0);
      assert.deepEqual(broker.refused, ["delete"], "the stale token was refused once");
      assert.equal(broker.logins, 2, "then the client logged in again");
    } finally {
      await w.close();
    }
  } finally {
    await cleanup();
  }
  const bad = await brokerRig({ password: "wrong" });
  try {
    const segments = await bad.r.generate(P0, 300);
    const w = bad.r.worker();
    try {
      const report = await w.pass();
      assert.equal(report.evicted, 0);
      const refused = report.problems.find((p) => p.kind === "evict");
      assert.equal(
        refused?.what,
        "broker DeleteSegments",
        report.problems.map(describeProblem).join(),
      );
      assert.ok(!JSON.stringify(bad.r.logs).includes("wrong"), "the password is never logged");
      assert.equal(logged(bad.r, "broker refused DeleteSegments; segments stay local").length, 1);
      for (const s of segments) await stat(s.logPath);
    } finally {
      await w.close();
    }
  } finally {
    await bad.cleanup();
  }
});

Deno.test("evict_via = broker: a broker that keeps what it is asked to delete is asked again only after a doubling back-off, said once", async () => {
  // Starts ahead of the files' mtimes, so they count as quiet.
  const clock = new FakeClock(Date.now() + 1000);
  let keeps = true;
  const { r, broker, cleanup } = await brokerRig({ keeps: () => keeps, clock });
  try {
    const sealed = (await r.generate(P0, 800)).slice(0, -1);
    const w = r.worker();
    try {
      // A pass every 500 ms for a minute (the scan timer of a busy agent, or a watch firing).
      const start = clock.now();
      const asked: number[] = [];
      for (let t = 0; t <= 60_000; t += 500) {
        const before = broker.deletes.length;
        const report = await w.pass();
        assert.deepEqual(report.problems, []);
        assert.equal(report.evicted, 0);
        if (broker.deletes.length > before) asked.push(clock.now() - start);
        clock.advance(500);
      }
      assert.deepEqual(asked, [0, 2_000, 6_000, 14_000, 30_000], "a handful a minute, doubling");
      const text = `eviction blocked: the broker kept segment ${sealed[0].startOffset} ` +
        "when asked to delete it";
      const warned = logged(r, text);
      assert.equal(warned.length, 1, "said once, on the second answer that removed nothing");
      assert.equal(warned[0].level, "warn");
      assert.equal(warned[0].reason, "broker_kept");
      assert.equal(w.evictionBlocks().get("0/0/0")?.reason, "broker_kept");
      assert.deepEqual(r.observer.blocked, [{ partition: "0/0/0", reason: "broker_kept" }]);
      assert.equal(logged(r, "segments evicted locally").length, 0);

      // The broker lets go: the next request (due at 62 s) evicts, and the block is lifted.
      keeps = false;
      clock.advance(2_000);
      const done = await w.pass();
      assert.deepEqual(done.problems, []);
      assert.equal(done.evicted, sealed.length);
      assert.equal(broker.deletes.length, 6);
      assert.equal(done.partitions[0].evictionBlocked, undefined);
      assert.equal(logged(r, "eviction no longer blocked").length, 1);
      assert.deepEqual(r.observer.blocked.at(-1), { partition: "0/0/0", reason: undefined });
    } finally {
      await w.close();
    }
  } finally {
    await cleanup();
  }
});

Deno.test("evict_via = broker: a consumer offset that moves asks again at once, backing off or not", async () => {
  const clock = new FakeClock(Date.now() + 1000);
  let keeps = true;
  const { r, broker, cleanup } = await brokerRig({ keeps: () => keeps, clock });
  try {
    const segments = await r.generate(P0, 800);
    const sealed = segments.slice(0, -1);
    // The barrier lets everything go as far as tierd can read it; the broker keeps them anyway.
    const past = segments.at(-1)!.startOffset;
    await writeConsumerOffset(r.dir(P0), { id: 1, offset: past, format: "iggy-0.9" });
    const w = r.worker();
    try {
      await w.pass();
      clock.advance(2_000);
      await w.pass();
      assert.equal(broker.deletes.length, 2);
      await w.pass(); // backing off
      assert.equal(broker.deletes.length, 2);
      keeps = false;
      await writeConsumerOffset(r.dir(P0), { id: 1, offset: past + 1n, format: "iggy-0.9" });
      const moved = await w.pass();
      assert.equal(broker.deletes.length, 3, "a new barrier is a new request");
      assert.equal(moved.evicted, sealed.length);
    } finally {
      await w.close();
    }
  } finally {
    await cleanup();
  }
});

Deno.test({
  name:
    "evict_via = auto without [agent.broker]: nothing is unlinked while a process holds the partition's files",
  ignore: !(await stat("/proc/self/fd").then(() => true, () => false)),
  fn: async () => {
    const r = await rig();
    const holders: Deno.ChildProcess[] = [];
    try {
      r.config.agent.evict_via = "auto";
      r.config.topic[0].local_retention_size = 0;
      const segments = await r.generate(P0, 600);
      const sealed = segments.slice(0, -1);
      // The broker's stand-in: a process that keeps the active segment open, as Iggy does.
      holders.push(await holdOpen(segments.at(-1)!.logPath));
      // No HTTP API anywhere (an Iggy on the default port of this machine must not decide).
      const presence = new BrokerPresence({
        dataDir: r.config.agent.data_dir,
        fetch: () => Promise.reject(new TypeError("connection refused")),
      });
      const w = new TierWorker({
        config: r.config,
        store: r.sim,
        prefix: "iggy",
        logger: capturingLoggerInto(r.logs),
        observer: r.observer,
        rng: () => 0,
        clock: aheadClock(1000),
        brokerWatch: presence,
      });
      try {
        const first = await w.pass();
        assert.deepEqual(first.problems, []);
        assert.equal(first.copied, sealed.length, "copies go on");
        assert.equal(first.evicted, 0);
        const block = first.partitions[0].evictionBlocked;
        assert.equal(block?.reason, "broker_running");
        assert.match(block.evidence!, new RegExp(`^process ${holders[0].pid} \\(sleep\\) holds `));
        assert.match(
          block.text,
          /^eviction blocked: a broker is running beside the data directory/,
        );
        const second = await w.pass();
        assert.equal(second.evicted, 0);
        for (const s of segments) await stat(s.logPath); // every file is still there
        assert.equal(logged(r, block.text).length, 1, "said once");
        assert.equal(logged(r, block.text)[0].level, "warn");
        const start = logged(
          r,
          "evict_via = auto without [agent.broker]: tierd unlinks " +
            "evicted segments itself, only while no broker runs beside the data directory " +
            "(it waits while one does)",
        );
        assert.equal(start.length, 1);
        assert.equal(start[0].level, "info");

        // The broker stops: the files go, and the wait is over.
        await release(holders.pop()!);
        presence.forget();
        const third = await w.pass();
        assert.deepEqual(third.problems, []);
        assert.equal(third.evicted, sealed.length);
        assert.deepEqual(await localStarts(r.dir(P0)), [segments.at(-1)!.startOffset]);
        assert.equal(logged(r, "eviction no longer blocked").length, 1);
      } finally {
        await w.close();
      }
    } finally {
      for (const h of holders) await release(h);
      await r.cleanup();
    }
  },
});

Deno.test("evict_via = auto: a broker seen right before the unlink stops it, with nothing removed", async () => {
  const r = await rig();
  try {
    r.config.agent.evict_via = "auto";
    r.config.topic[0].local_retention_size = 0;
    const segments = await r.generate(P0, 600);
    // Stopped when eviction is admitted, running by the time the files would go.
    const answers = [false, true];
    const watch = {
      check: () => {
        const running = answers.shift() ?? true;
        return Promise.resolve({ running, evidence: running ? "it started" : "nothing" });
      },
    };
    const w = new TierWorker({
      config: r.config,
      store: r.sim,
      prefix: "iggy",
      logger: capturingLoggerInto(r.logs),
      rng: () => 0,
      clock: aheadClock(1000),
      brokerWatch: watch,
    });
    try {
      const report = await w.pass();
      assert.deepEqual(report.problems, []);
      assert.equal(report.evicted, 0);
      assert.equal(report.partitions[0].evictionBlocked?.reason, "broker_running");
      assert.equal(report.partitions[0].evictionBlocked?.evidence, "it started");
      for (const s of segments) await stat(s.logPath);
    } finally {
      await w.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("evict_via = unlink: said at start to be for a stopped broker, and unlinks without looking", async () => {
  const r = await rig();
  const holders: Deno.ChildProcess[] = [];
  try {
    r.config.topic[0].local_retention_size = 0; // test configs say evict_via = "unlink"
    const segments = await r.generate(P0, 400);
    if (await stat("/proc/self/fd").then(() => true, () => false)) {
      holders.push(await holdOpen(segments.at(-1)!.logPath));
    }
    const w = r.worker();
    try {
      const report = await w.pass();
      assert.deepEqual(report.problems, []);
      assert.equal(report.evicted, segments.length - 1, "the operator said the broker is stopped");
      const line = logged(
        r,
        "evict_via = unlink: tierd unlinks evicted segments itself, which is only safe while " +
          "the broker is stopped",
      );
      assert.equal(line.length, 1);
      assert.equal(line[0].level, "info");
      await w.pass();
      assert.equal(line.length, 1, "once");
    } finally {
      await w.close();
    }
  } finally {
    for (const h of holders) await release(h);
    await r.cleanup();
  }
});
