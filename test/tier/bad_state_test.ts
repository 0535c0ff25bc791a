// Bad state on disk: a torn journal tail, untrusted `.remote` markers, broker
// segments truncated behind the agent's back and an unreadable consumer offset file. Each is
// logged (and counted where the design says so), never trusted, and never crashes the agent.
import assert from "node:assert/strict";
import { appendFile, mkdir, readdir, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Clock } from "../../src/base/clock.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import type { Config } from "../../src/config/schema.ts";
import {
  appendMessages,
  type GeneratedSegment,
  generatePartition,
} from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { createLogger } from "../../src/log.ts";
import { readMarker, writeMarker } from "../../src/state/marker.ts";
import { getSegment, segmentsOf } from "../../src/state/segment_state.ts";
import { markerPaths, partitionStateDir } from "../../src/layout/state_paths.ts";
import { describeProblem } from "../../src/tier/problem.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import {
  capturingLogger,
  durableState,
  journalPath,
  type LogLine,
  recordingObserver,
  remoteKeys,
  scratchDir,
  writeConsumerOffset,
} from "../_model/tier_harness.ts";
import { testConfig } from "../_config.ts";
import { aheadClock } from "../_fake_clock.ts";

await initHashes();

const ID = { stream: 0, topic: 0, partition: 0 };

interface Rig {
  config: Config;
  sim: SimStore;
  clock: { skew: { ms: number }; clock: Clock };
  segments: GeneratedSegment[];
  stateDir: string;
  dir: string;
  logs: LogLine[];
  observer: ReturnType<typeof recordingObserver>;
  worker(): TierWorker;
  format: FormatName;
  keys(start: bigint): Promise<{ log: string; index: string }>;
  cleanup(): Promise<void>;
}

/** A partition of a few small sealed segments, a sim store and a logging, observed worker. */
async function rig(format: FormatName = "iggy-0.9", messages = 600): Promise<Rig> {
  const tmp = await scratchDir("tierd-bad-state");
  const config = testConfig({ dir: tmp.path, backend: "sim", uploadTimeout: "2 s" });
  const segments = await generatePartition({
    format,
    dataDir: config.agent.data_dir,
    ...ID,
    messages,
    segmentSize: 16 * 1024,
    payloadSize: 100,
  });
  const sim = new SimStore();
  // Real time, a second ahead so files written (or truncated) just now already count as
  // quiet, plus however far a test skips ahead.
  const skew = { ms: 1000 };
  const clock = { skew, clock: aheadClock(() => skew.ms) };
  const { logger, lines } = capturingLogger();
  const observer = recordingObserver();
  const stateDir = partitionStateDir(config.agent.state_dir, ID);
  return {
    config,
    format,
    sim,
    clock,
    segments,
    stateDir,
    dir: join(config.agent.data_dir, "streams/0/topics/0/partitions/0"),
    logs: lines,
    observer,
    worker: () =>
      new TierWorker({
        config,
        store: sim,
        prefix: "iggy",
        logger,
        clock: clock.clock,
        observer,
        rng: () => 0,
      }),
    keys: (start: bigint) => remoteKeys(config, ID, start),
    cleanup: tmp.cleanup,
  };
}

function logged(r: Rig, msg: string): LogLine[] {
  return r.logs.filter((l) => l.msg === msg);
}

function noPassFailed(r: Rig): void {
  assert.deepEqual(logged(r, "partition pass failed"), [], "a partition pass threw");
}

Deno.test("a torn journal tail is cut off, logged and counted; the agent keeps its state and works on", async () => {
  const r = await rig();
  try {
    const w1 = r.worker();
    const first = await w1.pass();
    assert.deepEqual(first.problems, []);
    await w1.close();
    const before = await durableState(r.config.agent.state_dir, ID);
    const path = journalPath(r.config.agent.state_dir, ID);
    const size = (await readFile(path)).length;
    // A crash mid-append: a plausible header and a partial body.
    await appendFile(path, new Uint8Array([40, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9]));

    await appendMoreAndPass(r, async () => {
      assert.deepEqual(r.observer.tornTails, [path]);
      const line = logged(r, "journal torn tail truncated")[0];
      assert.ok(line, "a log line reports the torn tail");
      assert.equal(line.level, "warn");
      assert.equal(line.path, path);
      assert.equal(line.valid_bytes, size);
      assert.equal(line.dropped_bytes, 15);
      assert.equal((await readFile(path)).length > size, true, "new records follow the cut");
      const after = await durableState(r.config.agent.state_dir, ID);
      assert.equal(after.incarnation, before.incarnation, "the incarnation survived");
      assert.ok(after.floor > before.floor, "the floor moved on past the old one");
    });
    noPassFailed(r);
  } finally {
    await r.cleanup();
  }
});

/** Appends messages (sealing more segments), runs a pass with a new worker, then `check`. */
async function appendMoreAndPass(r: Rig, check: () => Promise<void>): Promise<void> {
  await appendMessages({
    format: r.format,
    dataDir: r.config.agent.data_dir,
    ...ID,
    messages: 300,
    segmentSize: 16 * 1024,
    payloadSize: 100,
  });
  const w = r.worker();
  try {
    const report = await w.pass();
    assert.deepEqual(report.problems, []);
    assert.ok(report.copied > 0, "new segments are copied");
    await check();
  } finally {
    await w.close();
  }
}

Deno.test("markers with a bad checksum or of another incarnation are quarantined, never trusted", async () => {
  const r = await rig();
  try {
    r.config.topic[0].local_retention_size = 0; // evict every copied segment
    const w1 = r.worker();
    const first = await w1.pass();
    assert.deepEqual(first.problems, []);
    assert.ok(first.evicted >= 2, `evicted ${first.evicted}`);
    await w1.close();
    const stateBefore = await durableState(r.config.agent.state_dir, ID);
    const [a, b] = r.segments.map((s) => markerPaths(r.stateDir, s.startOffset));
    // a: one flipped bit inside the checksummed bytes (the end offset).
    const bytes = new Uint8Array(await readFile(a.marker));
    bytes[24] ^= 0x01;
    await writeFile(a.marker, bytes);
    // b: a well-formed marker, but of another incarnation (a recreated partition's leftover).
    const good = await readMarker(b.marker);
    await writeMarker(b.marker, { ...good, incarnation: good.incarnation ^ 0x5555n });
    const forged = new Uint8Array(await readFile(b.marker));

    const w2 = r.worker();
    try {
      const report = await w2.pass();
      assert.deepEqual(report.problems, [], "the agent keeps working");
      assert.equal(r.observer.quarantined.length, 2);
      assert.deepEqual(r.observer.quarantined.map((q) => q.path).sort(), [a.marker, b.marker]);
      assert.match(r.observer.quarantined.find((q) => q.path === a.marker)!.reason, /checksum/);
      assert.match(r.observer.quarantined.find((q) => q.path === b.marker)!.reason, /incarnation/);
      const lines = logged(r, "untrusted .remote marker quarantined");
      assert.equal(lines.length, 2);
      assert.ok(lines.every((l) => l.level === "warn" && typeof l.moved_to === "string"));
      // Moved aside intact, not deleted, not left in place.
      const names = await readdir(r.stateDir);
      assert.ok(!names.includes(a.marker.split("/").at(-1)!));
      const quarantine = join(r.stateDir, "quarantine");
      const moved = await readdir(quarantine);
      assert.equal(moved.length, 2);
      const forgedCopy = lines.find((l) => l.path === b.marker)!.moved_to as string;
      assert.deepEqual(new Uint8Array(await readFile(forgedCopy)), forged);
      // Never trusted: nothing about the segments changed because of them.
      const stateAfter = await durableState(r.config.agent.state_dir, ID);
      for (const s of r.segments.slice(0, 2)) {
        assert.deepEqual(
          getSegment(stateAfter, 0n, s.startOffset),
          getSegment(stateBefore, 0n, s.startOffset),
        );
      }
      assert.equal(stateAfter.incarnation, stateBefore.incarnation);
      // A second restart finds nothing more to quarantine.
      await w2.close();
      const w3 = r.worker();
      assert.deepEqual((await w3.pass()).problems, []);
      await w3.close();
      assert.equal(r.observer.quarantined.length, 2);
    } finally {
      await w2.close();
    }
    noPassFailed(r);
  } finally {
    await r.cleanup();
  }
});

for (const format of ["iggy-0.8", "iggy-0.9"] as const) {
  Deno.test(`a sealed ${format} segment truncated mid-record before its copy is refused, loudly`, async () => {
    const r = await rig(format);
    try {
      const victim = r.segments[1];
      await truncate(victim.logPath, victim.size - 7);
      const w = r.worker();
      try {
        for (let i = 0; i < 2; i++) {
          const report = await w.pass();
          // The first segment is copied; the truncated one is refused; oldest-first stops there.
          assert.equal(report.failed, 0);
          const damaged = report.problems.find((p) => p.kind === "segment_damaged");
          assert.equal(damaged?.segment, victim.startOffset, "it is reported damaged");
          assert.ok(describeProblem(damaged!).includes(victim.logPath), "naming its file");
          const keys = await r.keys(victim.startOffset);
          assert.equal(r.sim.objects.has(keys.log), false, "nothing uploaded for it");
          assert.equal(r.sim.objects.has(keys.index), false);
          const state = await durableState(r.config.agent.state_dir, ID);
          assert.equal(getSegment(state, 0n, victim.startOffset), undefined, "still LOCAL");
          assert.equal(state.floor, r.segments[0].endOffset);
        }
        const lines = logged(
          r,
          "sealed segment is damaged: not copied, not evicted, later segments wait",
        );
        assert.equal(lines.length, 1, "logged once, not on every pass");
        assert.equal(lines[0].level, "error");
        assert.equal(lines[0].file, victim.logPath);
        assert.equal(typeof lines[0].position, "number", "with the byte position");
        assert.match(JSON.stringify(lines[0]), new RegExp(victim.startOffset.toString()));
      } finally {
        await w.close();
      }
      noPassFailed(r);
    } finally {
      await r.cleanup();
    }
  });
}

Deno.test("an already-copied segment truncated behind the agent's back is not evicted, and is named", async () => {
  const r = await rig();
  try {
    const w = r.worker();
    try {
      const first = await w.pass();
      assert.deepEqual(first.problems, []);
      const victim = r.segments[0];
      await truncate(victim.logPath, victim.size - 7);
      r.config.topic[0].local_retention_size = 0; // eviction now wants everything copied
      const report = await w.pass();
      const state = await durableState(r.config.agent.state_dir, ID);
      const rec = getSegment(state, 0n, victim.startOffset)!;
      assert.equal(rec.state, "COPY_SEGMENT_FINISHED");
      assert.equal(rec.evicted, false, "a changed segment is never evicted");
      assert.equal((await readFile(victim.logPath)).length, victim.size - 7, "left as it is");
      // Evictions are a prefix: nothing after it goes either.
      assert.equal(report.evicted, 0);
      assert.ok(segmentsOf(state).every((s) => !s.evicted));
      const changed = report.problems.find((p) => p.segment === victim.startOffset);
      assert.equal(changed?.kind, "segment_changed", report.problems.map(describeProblem).join());
      assert.ok(describeProblem(changed!).includes(victim.logPath), "naming its file");
      const line = r.logs.find((l) =>
        l.level === "error" && JSON.stringify(l).includes(victim.logPath)
      );
      assert.ok(line, "an error log line names the file");
    } finally {
      await w.close();
    }
    noPassFailed(r);
  } finally {
    await r.cleanup();
  }
});

for (const format of ["iggy-0.8", "iggy-0.9"] as const) {
  Deno.test(`an unreadable ${format} consumer offset file pauses remote deletion, even one already started`, async () => {
    const r = await rig(format);
    try {
      r.config.topic[0].local_retention_size = 0;
      const w = r.worker();
      try {
        assert.deepEqual((await w.pass()).problems, []);
        const copied = Object.fromEntries(r.sim.objects);
        // Total retention now wants everything, but the store fails the first deletion:
        // it stays journaled as started.
        r.config.topic[0].message_expiry = 1000;
        r.clock.skew.ms += 1_000_000_000;
        r.sim.setUnavailable(true);
        const failed = await w.pass();
        assert.ok(failed.problems.some((p) => p.kind === "retention_delete" && p.storeFault));
        r.sim.setUnavailable(false);
        const started = segmentsOf(await durableState(r.config.agent.state_dir, ID))
          .filter((s) => s.state === "DELETE_SEGMENT_STARTED");
        assert.equal(started.length, 1, "one deletion is pending");

        const bad = await writeConsumerOffset(r.dir, {
          id: 7,
          offset: 0n,
          format,
          corrupt: true,
        });
        for (let i = 0; i < 2; i++) {
          const report = await w.pass();
          assert.equal(report.remoteDeleted, 0);
          assert.deepEqual(Object.fromEntries(r.sim.objects), copied, "nothing deleted");
        }
        const line = logged(r, "unreadable consumer offset file: remote deletion paused")[0];
        assert.ok(line, "a log line says why");
        assert.match(JSON.stringify(line.files), new RegExp(bad.replaceAll("/", "\\/")));

        // The broker rewrites the file (a consumer at the third segment): deletion resumes
        // below it, never at or after it.
        const barrier = r.segments[2].startOffset + 1n;
        await writeConsumerOffset(r.dir, { id: 7, offset: barrier, format });
        const resumed = await w.pass();
        assert.deepEqual(resumed.problems, []);
        assert.equal(resumed.remoteDeleted, 2);
        for (const s of r.segments.slice(0, -1)) {
          const keys = await r.keys(s.startOffset);
          assert.equal(
            r.sim.objects.has(keys.log),
            s.endOffset >= barrier,
            `segment ${s.startOffset}`,
          );
        }
      } finally {
        await w.close();
      }
      noPassFailed(r);
    } finally {
      await r.cleanup();
    }
  });
}

Deno.test("a dangling copy whose object no longer matches the rewritten local segment is cleaned up", async () => {
  const r = await rig("iggy-0.8");
  try {
    // The store takes the .log but refuses every .index for a while: segment 0 stays DANGLING
    // with a complete .log object under its key.
    let refuseIndex = true;
    const sim = r.sim;
    const store: ObjectStore = {
      kind: "sim",
      put: (k, b, o) =>
        refuseIndex && k.endsWith(".index")
          ? Promise.reject(new StoreError("Transport", "injected: connection reset", { op: "put" }))
          : sim.put(k, b, o),
      get: sim.get.bind(sim),
      head: sim.head.bind(sim),
      deleteMany: sim.deleteMany.bind(sim),
      list: sim.list.bind(sim),
      createMultipart: sim.createMultipart.bind(sim),
      putPart: sim.putPart.bind(sim),
      completeMultipart: sim.completeMultipart.bind(sim),
      abortMultipart: sim.abortMultipart.bind(sim),
      listMultipartUploads: sim.listMultipartUploads.bind(sim),
    };
    const make = () =>
      new TierWorker({
        config: r.config,
        store,
        prefix: "iggy",
        logger: createLogger({ write: (l) => void r.logs.push(JSON.parse(l)) }),
        clock: r.clock.clock,
        observer: r.observer,
        rng: () => 0,
      });
    const w1 = make();
    const failed = await w1.pass();
    assert.ok(failed.failed >= 1);
    await w1.close();
    const keys = await r.keys(0n);
    assert.ok(sim.objects.has(keys.log), "the .log object landed");
    assert.equal(
      getSegment(await durableState(r.config.agent.state_dir, ID), 0n, 0n)?.state,
      "DANGLING",
    );
    // While the agent is down the partition is purged and refilled with messages of the same
    // size: the new segment 0 is not the one whose .log sits in the store.
    for (const s of r.segments) {
      await rm(s.logPath);
      await rm(s.indexPath);
    }
    const fresh = await generatePartition({
      format: "iggy-0.8",
      dataDir: r.config.agent.data_dir,
      ...ID,
      messages: 600,
      segmentSize: 16 * 1024,
      payloadSize: 100,
      seed: 9,
    });
    assert.equal(fresh[0].size, r.segments[0].size);
    refuseIndex = false;
    const w2 = make();
    try {
      const report = await w2.pass();
      assert.deepEqual(report.problems, []);
      assert.equal(report.cleaned, 1, "the stale object was deleted, not adopted");
      const state = await durableState(r.config.agent.state_dir, ID);
      assert.equal(getSegment(state, 0n, 0n)?.state, "COPY_SEGMENT_FINISHED");
      assert.deepEqual(
        new Uint8Array(sim.objects.get(keys.log)!.bytes),
        new Uint8Array(await readFile(fresh[0].logPath)),
        "the store now holds the new segment 0",
      );
      assert.equal(state.floor, fresh.at(-2)!.endOffset);
    } finally {
      await w2.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("a partition whose state cannot be opened is reported failed; the others are tiered, and it opens once it can", async () => {
  const r = await rig();
  try {
    const other = { ...ID, partition: 1 };
    const otherSegments = await generatePartition({
      format: r.format,
      dataDir: r.config.agent.data_dir,
      ...other,
      messages: 600,
      segmentSize: 16 * 1024,
      payloadSize: 100,
    });
    // Partition 0's state directory cannot be made (a file stands in its place), as with a
    // full or read-only state volume: its open fails on every pass until that is fixed.
    await rm(r.stateDir, { recursive: true, force: true });
    await mkdir(dirname(r.stateDir), { recursive: true });
    await writeFile(r.stateDir, "not a directory");
    const w = r.worker();
    const report = await w.pass();
    const failed = report.partitions.find((p) => p.partition === "0/0/0");
    assert.ok(failed, "the partition that failed to open is in the pass report");
    assert.deepEqual(failed.problems.map((p) => p.kind), ["partition_open"]);
    assert.ok(describeProblem(failed.problems[0]).includes(r.stateDir));
    assert.equal(w.health(ID)?.state, "failed");
    assert.ok(w.health(ID)?.detail?.includes(r.stateDir), w.health(ID)?.detail);
    // The other partition is copied in full, sealed segments all.
    const copied = await durableState(r.config.agent.state_dir, other);
    const sealed = otherSegments.slice(0, -1).map((s) => s.startOffset); // the last one is active
    assert.deepEqual(
      segmentsOf(copied).filter((s) => s.state === "COPY_SEGMENT_FINISHED").map((s) => s.start),
      sealed,
    );
    noPassFailed(r);
    // Fixed by the operator: the next pass opens it and copies it too.
    await rm(r.stateDir);
    const again = await w.pass();
    assert.deepEqual(again.partitions.find((p) => p.partition === "0/0/0")?.problems, []);
    assert.equal(w.health(ID)?.state, "ok");
    const mine = await durableState(r.config.agent.state_dir, ID);
    assert.deepEqual(
      segmentsOf(mine).filter((s) => s.state === "COPY_SEGMENT_FINISHED").map((s) => s.start),
      r.segments.slice(0, -1).map((s) => s.startOffset),
    );
    await w.close();
  } finally {
    await r.cleanup();
  }
});
