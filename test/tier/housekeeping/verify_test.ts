// The verify pass on the sim store. It only reads: whatever it finds, it writes and deletes
// nothing. A damaged copy of a segment whose local files remain goes DANGLING (the cleanup then
// deletes that copy and the copy phase sends it again); a damaged copy of an evicted segment —
// its only copy — is reported once and never handed to the cleanup, so nothing deletes it. Only
// copies under the floor are checked. A store fault stops a partition's pass without a verdict,
// and the next run resumes from the last copy it checked.
import assert from "node:assert/strict";
import type { SimOp } from "../../../providers/sim/store.ts";
import { StoreError } from "../../../providers/types.ts";
import { getSegment, segmentsOf } from "../../../src/state/segment_state.ts";
import { describeProblem } from "../../../src/tier/problem.ts";
import { UnlinkEvictor } from "../../../src/tier/evictor.ts";
import { verifyCopies } from "../../../src/tier/housekeeping/verify.ts";
import { cleanupPhase } from "../../../src/tier/phases/cleanup.ts";
import { copyPhase } from "../../../src/tier/phases/copy.ts";
import { evictPhase } from "../../../src/tier/phases/evict.ts";
import { advanceFloor } from "../../../src/tier/phases/floor.ts";
import { copyAll, HOUR, type HousekeepingRig, housekeepingRig, snapshot } from "./_rig.ts";

const GONE_EVICTED =
  "verify: the only copy of an evicted segment is gone or damaged; its offsets cannot be read";
const WRITES: SimOp[] = [
  "put",
  "deleteMany",
  "createMultipart",
  "putPart",
  "completeMultipart",
  "abortMultipart",
];

async function verify(r: HousekeepingRig, o: Parameters<HousekeepingRig["env"]>[0] = {}) {
  const env = r.env(o);
  try {
    return { out: await verifyCopies(env), env };
  } finally {
    env.dispose();
  }
}

/** Evicts the first `n` segments (local retention by size), as the evict phase does. */
async function evictFirst(r: HousekeepingRig, n: number): Promise<void> {
  const total = r.segments.reduce((sum, s) => sum + s.size, 0);
  const keep = total - r.segments.slice(0, n).reduce((sum, s) => sum + s.size, 0);
  const out = await evictPhase(r.ctx, r.ledger, {
    dir: r.dir,
    segments: await r.local(),
    format: r.format,
    topic: { ...r.topic, local_retention_size: keep },
    evictor: new UnlinkEvictor(),
  });
  assert.equal(out.evicted, n);
}

/** Overwrites `key` in the sim with the same bytes and metadata saying other bytes. */
async function lie(r: HousekeepingRig, key: string): Promise<void> {
  const o = r.sim.objects.get(key)!;
  await r.sim.put(key, o.bytes, { metadata: { ...o.metadata, "xxh3-128": "0".repeat(32) } });
}

const writes = (r: HousekeepingRig) => WRITES.map((op) => r.sim.requestCount(op));

Deno.test("damaged copies: verify writes and deletes nothing; the local one goes DANGLING, the evicted one (its only copy) is reported once and left for no cleanup to delete", async () => {
  const r = await housekeepingRig();
  try {
    await copyAll(r);
    await evictFirst(r, 2);
    const copies = segmentsOf(r.ledger.state);
    const [evicted, local] = [copies[0], copies[2]];
    assert.ok(evicted.evicted && !local.evicted && local.meta!.endOffset <= r.ledger.state.floor);
    await lie(r, r.ledger.keys(evicted.start).log);
    await lie(r, r.ledger.keys(local.start).log);
    const lied = snapshot(r);
    const before = writes(r);

    const { out, env } = await verify(r);
    assert.deepEqual(out.problems, []);
    assert.equal(out.complete, true);
    assert.equal(out.counts.mismatched, 2);
    assert.equal(out.counts.recopy, 1);
    assert.deepEqual(writes(r), before, "the verify pass sent no write and no delete");
    assert.deepEqual(snapshot(r), lied);
    assert.equal(getSegment(r.ledger.state, 0n, local.start)!.state, "DANGLING");
    const e = getSegment(r.ledger.state, 0n, evicted.start)!;
    assert.equal(e.state, "COPY_SEGMENT_FINISHED", "the evicted copy is not sent to cleanup");
    assert.equal(e.evicted, true);
    assert.equal(r.logged(GONE_EVICTED).length, 1);
    assert.equal(r.logged(GONE_EVICTED)[0].problem, "mismatched");

    // The next pass's cleanup deletes the local one's copy only; the evicted one's stays.
    const cleaned = await cleanupPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
    });
    assert.deepEqual(cleaned.problems, []);
    assert.equal(cleaned.cleaned, 1);
    const after = snapshot(r);
    assert.equal(after.has(r.ledger.keys(local.start).log), false);
    assert.equal(after.has(r.ledger.keys(local.start).index), false);
    assert.equal(
      after.get(r.ledger.keys(evicted.start).log),
      lied.get(r.ledger.keys(evicted.start).log),
      "the evicted segment's only copy is still there, untouched",
    );
    assert.equal(after.size, lied.size - 2, "nothing else was deleted");

    // A later verify pass finds the same damage: not reported again.
    r.clock.advance(7 * HOUR);
    const again = await verify(r, { state: env.state });
    assert.equal(again.out.complete, true);
    assert.equal(r.logged(GONE_EVICTED).length, 1);
  } finally {
    await r.cleanup();
  }
});

Deno.test("only copies under the floor are verified", async () => {
  const r = await housekeepingRig();
  try {
    const copied = await copyPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
      reportedGaps: new Set(),
    });
    assert.ok(copied.copied >= 3);
    assert.equal(r.ledger.state.floor, -1n, "copied, the floor not yet moved");
    r.sim.resetCounts();
    const { out } = await verify(r);
    assert.equal(out.counts.checked, 0);
    assert.equal(r.sim.requestCount(), 0, "not one request");
    await advanceFloor(r.ctx, r.ledger);
    const { out: next } = await verify(r);
    assert.equal(next.counts.checked, copied.copied);
  } finally {
    await r.cleanup();
  }
});

Deno.test("a store fault mid-pass: no verdict on that copy, the cursor kept, the next run resumes there and finishes", async () => {
  const r = await housekeepingRig();
  try {
    await copyAll(r);
    const copies = segmentsOf(r.ledger.state);
    assert.ok(copies.length >= 4);
    const faulty = r.ledger.keys(copies[2].start).log;
    r.script.around = (call) =>
      call.op === "head" && call.key === faulty
        ? Promise.reject(new StoreError("Auth", "access denied (test)", { op: "head" }))
        : undefined;
    const { out, env } = await verify(r);
    assert.equal(out.complete, false);
    assert.deepEqual(out.problems.map(describeProblem), [
      `verify of ${r.ledger.label}: access denied (test)`,
    ]);
    assert.equal(out.counts.checked, 2);
    assert.equal(out.counts.missing + out.counts.mismatched + out.counts.recopy, 0);
    assert.deepEqual(
      (await r.events()).filter((e) => e.type === "dangling"),
      [],
      "a fault is not damage",
    );
    assert.equal(env.state.verify.cursor[r.ledger.label], String(copies[1].start));
    assert.equal(env.state.verify.lastCompleted, undefined);

    r.honest();
    r.sim.resetCounts();
    const { out: next } = await verify(r, { state: env.state });
    assert.deepEqual(next.problems, []);
    assert.equal(next.complete, true);
    assert.equal(next.counts.checked, copies.length - 2, "from the copy that was not checked on");
    assert.equal(r.sim.requestCount("head"), 2 * (copies.length - 2));
    assert.deepEqual(env.state.verify.cursor, {});
    assert.equal(env.state.verify.lastCompleted, r.clock.now());
  } finally {
    await r.cleanup();
  }
});
