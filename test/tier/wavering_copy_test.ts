// One NotFound is not a lost copy (issue 22): the housekeeping verify pass and eviction's proof
// of a copy, over a sim store that answers NotFound for an object it still has — once, or once
// more while the absence is confirmed (the listing still shows it) — journal no `dangling`
// record, raise no missing-objects count, log no "gone" line, and evict nothing they should not.
// An object really deleted is still found out: the verify pass reports it (DANGLING for a copy
// whose local files remain, one error line for an evicted one), eviction records it DANGLING.
import assert from "node:assert/strict";
import { access } from "node:fs/promises";
import type { StoreErrorKind } from "../../providers/types.ts";
import { getSegment, segmentsOf } from "../../src/state/segment_state.ts";
import { UnlinkEvictor } from "../../src/tier/evictor.ts";
import type { JobEnv } from "../../src/tier/housekeeping/job.ts";
import { emptyHousekeepingState } from "../../src/tier/housekeeping/state.ts";
import { verifyCopies } from "../../src/tier/housekeeping/verify.ts";
import { copyPhase } from "../../src/tier/phases/copy.ts";
import { evictPhase } from "../../src/tier/phases/evict.ts";
import { advanceFloor } from "../../src/tier/phases/floor.ts";
import { exactly, type Waver, type WaveringStore, waveringStore } from "../_wavering_store.ts";
import { type PhaseRig, phaseRig } from "./_phase_rig.ts";

const GONE_EVICTED =
  "verify: the only copy of an evicted segment is gone or damaged; its offsets cannot be read";
const GONE_LOCAL =
  "verify: a remote copy is gone or damaged; its local files are still here, so it will be copied again";
const EVICT_DAMAGED = "not evicting: the remote copy is damaged or gone; it will be copied again";
const EVICT_UNVERIFIED = "not evicting: the remote copy could not be verified";

/** A phase rig over a wavering sim store, counting what the observer is told is missing. */
async function rig(): Promise<{ r: PhaseRig; w: WaveringStore; missing: () => number }> {
  let w!: WaveringStore;
  const r = await phaseRig({
    wrap: (sim) => {
      w = waveringStore(sim);
      return w.store;
    },
  });
  let missing = 0;
  r.observer.remoteObjectsMissing = (n: number) => void (missing += n);
  return { r, w, missing: () => missing };
}

/** Copies every sealed segment and advances the floor over them. */
async function copyAll(r: PhaseRig): Promise<void> {
  const out = await copyPhase(r.ctx, r.ledger, {
    segments: await r.local(),
    format: r.format,
    reportedGaps: new Set(),
  });
  assert.deepEqual(out.problems, []);
  await advanceFloor(r.ctx, r.ledger);
}

/** Local retention that wants exactly the first `n` segments gone (by size). */
function keepAllBut(r: PhaseRig, n: number): number {
  const total = r.segments.reduce((sum, s) => sum + s.size, 0);
  return total - r.segments.slice(0, n).reduce((sum, s) => sum + s.size, 0);
}

async function evict(r: PhaseRig, retentionSize: number) {
  return await evictPhase(r.ctx, r.ledger, {
    dir: r.dir,
    segments: await r.local(),
    format: r.format,
    topic: { ...r.topic, local_retention_size: retentionSize },
    evictor: new UnlinkEvictor(),
  });
}

/** A verify pass from the start, over the rig's one partition, as the housekeeper runs it. */
async function verifyPass(r: PhaseRig) {
  const deadline = r.store.deadline(60_000);
  const env: JobEnv = {
    config: r.config,
    store: r.store.within(deadline, "housekeeping"),
    clock: r.clock,
    log: r.ctx.log,
    observer: r.observer,
    keySpace: r.keySpace,
    targets: [{ ledger: r.ledger, format: r.format, dir: r.dir }],
    state: emptyHousekeepingState(),
  };
  try {
    return await verifyCopies(env);
  } finally {
    deadline.dispose();
  }
}

async function danglingEvents(r: PhaseRig) {
  return (await r.events()).filter((e) => e.type === "dangling");
}

const exists = (path: string) => access(path).then(() => true, () => false);

/** The ways a store wavers over one object (key `k`) the verify pass or eviction asks about. */
function wavers(k: string): { name: string; wavers: Waver[] }[] {
  return [{ name: "one HEAD NotFound", wavers: [{ op: "head", key: exactly(k), times: 1 }] }];
}

Deno.test("verify pass: one NotFound (answered once) of an evicted or a local copy journals no dangling and raises no missing count", async () => {
  const { r, w, missing } = await rig();
  try {
    await copyAll(r);
    const evicted = await evict(r, keepAllBut(r, 2));
    assert.equal(evicted.evicted, 2);
    const copies = segmentsOf(r.ledger.state).filter((s) => s.state === "COPY_SEGMENT_FINISHED");
    const gone = copies.find((s) => s.evicted)!;
    const local = copies.find((s) => !s.evicted && s.meta!.endOffset <= r.ledger.state.floor)!;
    assert.ok(gone && local, "an evicted copy and a local one, both below the floor");
    const keys = [r.ledger.keys(gone.start), r.ledger.keys(local.start)];
    const targets = [
      ...keys.map((k) => k.log),
      keys[0].index, // the index object too
    ];
    for (const target of targets) {
      for (const c of wavers(target)) {
        const failedBefore = w.failed;
        for (const x of c.wavers) w.waver(x);
        const out = await verifyPass(r);
        const what = `${c.name} of ${target}`;
        assert.ok(w.failed > failedBefore, `${what}: the store wavered`);
        assert.deepEqual(out.problems, [], what);
        assert.equal(out.complete, true, what);
        assert.equal(out.counts.missing, 0, `${what}: counted missing`);
        assert.equal(out.counts.recopy, 0, `${what}: sent to be copied again`);
        assert.equal(missing(), 0, `${what}: the missing-objects observer was raised`);
        assert.deepEqual(await danglingEvents(r), [], `${what}: a dangling record`);
        assert.equal(getSegment(r.ledger.state, 0n, local.start)!.state, "COPY_SEGMENT_FINISHED");
        assert.deepEqual(r.logged(GONE_EVICTED), [], what);
        assert.deepEqual(r.logged(GONE_LOCAL), [], what);
      }
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("verify pass: objects really deleted are found out — the local one DANGLING, the evicted one reported once", async () => {
  const { r, missing } = await rig();
  try {
    await copyAll(r);
    await evict(r, keepAllBut(r, 2));
    const copies = segmentsOf(r.ledger.state).filter((s) => s.state === "COPY_SEGMENT_FINISHED");
    const gone = copies.find((s) => s.evicted)!;
    const local = copies.find((s) => !s.evicted && s.meta!.endOffset <= r.ledger.state.floor)!;
    await r.sim.deleteMany([r.ledger.keys(gone.start).log, r.ledger.keys(local.start).log]);
    const out = await verifyPass(r);
    assert.deepEqual(out.problems, []);
    assert.equal(out.counts.missing, 2);
    assert.equal(out.counts.recopy, 1);
    assert.equal(missing(), 2);
    const dangling = await danglingEvents(r);
    assert.equal(dangling.length, 1);
    assert.equal((dangling[0] as { segment: bigint }).segment, local.start);
    assert.equal(getSegment(r.ledger.state, 0n, local.start)!.state, "DANGLING");
    assert.equal(r.logged(GONE_EVICTED).length, 1);
    assert.equal(r.logged(GONE_EVICTED)[0].key, r.ledger.keys(gone.start).log);
    assert.equal(r.logged(GONE_LOCAL).length, 1);
  } finally {
    await r.cleanup();
  }
});

Deno.test("eviction: one NotFound (answered once) while proving a copy keeps the segment, journals no dangling, raises nothing; the next pass evicts it", async () => {
  const kinds: { name: string; times: number; kind?: StoreErrorKind }[] = [
    { name: "one HEAD NotFound", times: 1 },
  ];
  for (const k of kinds) {
    const { r, w, missing } = await rig();
    try {
      await copyAll(r);
      const [first] = await r.local();
      const key = r.ledger.keys(first.start).log;
      w.waver({ op: "head", key: exactly(key), times: k.times });
      const out = await evict(r, keepAllBut(r, 2));
      assert.equal(w.failed, k.times, `${k.name}: the store wavered`);
      assert.equal(out.evicted, 0, `${k.name}: evicted past an unproven copy`);
      assert.ok(await exists(first.logPath), `${k.name}: the local segment stays`);
      assert.deepEqual(await danglingEvents(r), [], `${k.name}: a dangling record`);
      assert.equal(getSegment(r.ledger.state, 0n, first.start)!.state, "COPY_SEGMENT_FINISHED");
      assert.equal(missing(), 0, `${k.name}: the missing-objects observer was raised`);
      assert.deepEqual(r.logged(EVICT_DAMAGED), [], k.name);
      assert.equal(r.logged(EVICT_UNVERIFIED).length, 1, k.name);
      // The store answers again: the next pass evicts as retention wants.
      const again = await evict(r, keepAllBut(r, 2));
      assert.deepEqual(again.problems, [], k.name);
      assert.equal(again.evicted, 2, k.name);
      assert.equal(missing(), 0, k.name);
    } finally {
      await r.cleanup();
    }
  }
});

Deno.test("eviction: a copy really deleted is DANGLING, counted missing, its segment kept", async () => {
  const { r, missing } = await rig();
  try {
    await copyAll(r);
    const [first] = await r.local();
    await r.sim.deleteMany([r.ledger.keys(first.start).log]);
    const out = await evict(r, keepAllBut(r, 2));
    assert.equal(out.evicted, 0);
    assert.ok(await exists(first.logPath));
    assert.equal(getSegment(r.ledger.state, 0n, first.start)!.state, "DANGLING");
    assert.equal((await danglingEvents(r)).length, 1);
    assert.equal(missing(), 1);
    assert.equal(r.logged(EVICT_DAMAGED).length, 1);
  } finally {
    await r.cleanup();
  }
});

Deno.test("a copy the store lists but will not HEAD: copied again where the broker has it, never counted missing", async () => {
  // Two HEADs NotFound while the listing shows the object: the store contradicts itself. The
  // copy cannot be proven, so a segment still local is copied again (cheap, and it repairs a
  // copy that really is damaged); nothing is counted as missing, since nothing is confirmed gone.
  {
    const { r, w, missing } = await rig();
    try {
      await copyAll(r);
      const [first] = await r.local();
      w.waver({ op: "head", key: exactly(r.ledger.keys(first.start).log), times: 2 });
      const out = await evict(r, keepAllBut(r, 2));
      assert.equal(out.evicted, 0);
      assert.ok(await exists(first.logPath), "the local segment stays");
      assert.equal(getSegment(r.ledger.state, 0n, first.start)!.state, "DANGLING");
      assert.equal(missing(), 0, "not counted missing");
    } finally {
      await r.cleanup();
    }
  }
  {
    const { r, w, missing } = await rig();
    try {
      await copyAll(r);
      await evict(r, keepAllBut(r, 2));
      const copies = segmentsOf(r.ledger.state).filter((s) => s.state === "COPY_SEGMENT_FINISHED");
      const local = copies.find((s) => !s.evicted && s.meta!.endOffset <= r.ledger.state.floor)!;
      w.waver({ op: "head", key: exactly(r.ledger.keys(local.start).log), times: 2 });
      const out = await verifyPass(r);
      assert.deepEqual(out.problems, []);
      assert.equal(out.counts.unreadable, 1);
      assert.equal(out.counts.missing, 0);
      assert.equal(out.counts.recopy, 1);
      assert.equal(missing(), 0, "not counted missing");
      assert.equal(getSegment(r.ledger.state, 0n, local.start)!.state, "DANGLING");
    } finally {
      await r.cleanup();
    }
  }
});
