// The total-retention phase alone: expired remote copies are deleted oldest first, never at or
// after a consumer's stored offset, within the pass's shared budget, once deletable for
// delete_grace; a journaled deletion is finished; an unreadable offset file pauses everything;
// deleted segments lose their markers.
import assert from "node:assert/strict";
import { access } from "node:fs/promises";
import { decorateStore } from "../../../providers/decorate.ts";
import { StoreError } from "../../../providers/types.ts";
import { markerPaths } from "../../../src/layout/state_paths.ts";
import { getSegment } from "../../../src/state/segment_state.ts";
import { describeProblem } from "../../../src/tier/problem.ts";
import { copyPhase } from "../../../src/tier/phases/copy.ts";
import { advanceFloor } from "../../../src/tier/phases/floor.ts";
import { type RetentionInput, retentionPhase } from "../../../src/tier/phases/retention.ts";
import { writeConsumerOffset } from "../../_model/tier_harness.ts";
import { type PhaseRig, phaseRig } from "../_phase_rig.ts";

async function exists(path: string): Promise<boolean> {
  return await access(path).then(() => true, () => false);
}

/** A rig whose sealed segments are all copied, and a store that logs the keys it deletes. */
async function copiedRig(o: { failDeletes?: () => boolean } = {}) {
  const deleted: string[][] = [];
  const r = await phaseRig({
    wrap: (sim) =>
      decorateStore(sim, (call) => {
        if (call.op !== "delete") return call.run(call.signal);
        if (o.failDeletes?.()) {
          return Promise.reject(new StoreError("Transport", "connection refused"));
        }
        return call.run(call.signal).then((result) => {
          deleted.push([call.key]);
          return result;
        });
      }),
  });
  const out = await copyPhase(r.ctx, r.ledger, {
    segments: await r.local(),
    format: r.format,
    reportedGaps: new Set(),
  });
  assert.deepEqual(out.problems, []);
  await advanceFloor(r.ctx, r.ledger);
  return { r, deleted, sealed: r.segments.slice(0, -1) };
}

/** Retention inputs where every message has expired (generated timestamps are from 2025). */
async function expired(r: PhaseRig, budget = 300): Promise<RetentionInput> {
  return {
    dir: r.dir,
    segments: await r.local(),
    topic: { ...r.topic, message_expiry: 1000 },
    partitionsInTopic: 1,
    budget: { remaining: budget },
    deletableSince: new Map(),
  };
}

function stateOf(r: PhaseRig, start: bigint) {
  return getSegment(r.ledger.state, 0n, start);
}

Deno.test("retention: expired remote copies are deleted oldest first, stopping below the lowest consumer offset", async () => {
  const { r, deleted, sealed } = await copiedRig();
  try {
    const barrier = sealed[2].startOffset + 3n; // a consumer reads inside the third segment
    await writeConsumerOffset(r.dir, { id: 1, offset: barrier, format: r.format });
    await writeConsumerOffset(r.dir, {
      kind: "groups",
      id: 2,
      offset: barrier + 50n,
      format: r.format,
    });
    const out = await retentionPhase(r.ctx, r.ledger, await expired(r));
    assert.deepEqual(out.problems, []);
    assert.equal(out.remoteDeleted, 2);
    assert.deepEqual(deleted, [[r.ledger.keys(sealed[0].startOffset).log], [
      r.ledger.keys(sealed[1].startOffset).log,
    ]], "oldest first");
    for (const [i, seg] of sealed.entries()) {
      const keys = r.ledger.keys(seg.startOffset);
      const gone = i < 2;
      assert.equal(r.sim.objects.has(keys.log), !gone, `segment ${seg.startOffset} .log`);
      assert.equal(r.sim.objects.has(keys.index), !gone, `segment ${seg.startOffset} .index`);
      const rec = stateOf(r, seg.startOffset)!;
      assert.equal(rec.state, gone ? "DELETE_SEGMENT_FINISHED" : "COPY_SEGMENT_FINISHED");
      if (gone) assert.equal(rec.deleteCause, "retention");
    }
    assert.equal(r.observer.remoteDeletedCount, 2);
    assert.equal(r.ledger.state.floor, sealed.at(-1)!.endOffset, "the floor does not move back");
  } finally {
    await r.cleanup();
  }
});

Deno.test("retention: the pass's shared budget bounds the deletions; the rest wait, unjournaled", async () => {
  const { r, sealed } = await copiedRig();
  try {
    const input = await expired(r, 2); // two objects: one segment
    const out = await retentionPhase(r.ctx, r.ledger, input);
    assert.equal(out.remoteDeleted, 1);
    assert.equal(input.budget.remaining, 0, "the budget is spent for every partition");
    assert.equal(stateOf(r, sealed[0].startOffset)?.state, "DELETE_SEGMENT_FINISHED");
    assert.equal(
      stateOf(r, sealed[1].startOffset)?.state,
      "COPY_SEGMENT_FINISHED",
      "a segment left for a later pass is not journaled as started",
    );
    // Another partition of the same pass gets nothing from the spent budget.
    const spent = await retentionPhase(r.ctx, r.ledger, { ...input, segments: await r.local() });
    assert.equal(spent.remoteDeleted, 0);
    // The next pass goes on with the next oldest.
    const next = await retentionPhase(r.ctx, r.ledger, await expired(r, 2));
    assert.equal(next.remoteDeleted, 1);
    assert.equal(stateOf(r, sealed[1].startOffset)?.state, "DELETE_SEGMENT_FINISHED");
    assert.equal(stateOf(r, sealed[2].startOffset)?.state, "COPY_SEGMENT_FINISHED");
  } finally {
    await r.cleanup();
  }
});

Deno.test("retention: a journaled DELETE_SEGMENT_STARTED is finished, even with retention since turned off", async () => {
  const { r, sealed } = await copiedRig();
  try {
    const [s0, s1] = sealed;
    await r.ledger.record({
      type: "delete_started",
      segment: s0.startOffset,
      generation: 0n,
      cause: "retention",
      at: r.clock.now(),
    });
    const out = await retentionPhase(r.ctx, r.ledger, {
      ...(await expired(r)),
      topic: { ...r.topic, message_expiry: Infinity, max_topic_size: Infinity },
    });
    assert.deepEqual(out.problems, []);
    assert.equal(out.remoteDeleted, 1);
    assert.equal(stateOf(r, s0.startOffset)?.state, "DELETE_SEGMENT_FINISHED");
    assert.equal(r.sim.objects.has(r.ledger.keys(s0.startOffset).log), false);
    assert.equal(stateOf(r, s1.startOffset)?.state, "COPY_SEGMENT_FINISHED", "nothing new chosen");
  } finally {
    await r.cleanup();
  }
});

Deno.test("retention: a failed delete stays journaled as started and is resumed next pass", async () => {
  let down = true;
  const { r, sealed } = await copiedRig({ failDeletes: () => down });
  try {
    const out = await r.clock.runUntil(retentionPhase(r.ctx, r.ledger, await expired(r)));
    assert.equal(out.remoteDeleted, 0);
    assert.equal(out.problems.length, 1, "the first failure stops the phase");
    const [failed] = out.problems;
    assert.deepEqual([failed.kind, failed.segment, failed.storeFault], [
      "retention_delete",
      sealed[0].startOffset,
      true,
    ]);
    assert.match(
      describeProblem(failed),
      new RegExp(`^retention delete of segment ${sealed[0].startOffset}: `),
    );
    assert.equal(stateOf(r, sealed[0].startOffset)?.state, "DELETE_SEGMENT_STARTED");
    assert.equal(stateOf(r, sealed[1].startOffset)?.state, "COPY_SEGMENT_FINISHED");
    down = false;
    const next = await retentionPhase(r.ctx, r.ledger, await expired(r));
    assert.deepEqual(next.problems, []);
    assert.equal(next.remoteDeleted, sealed.length);
  } finally {
    await r.cleanup();
  }
});

Deno.test("retention: an unreadable consumer offset file pauses every deletion, even one already started", async () => {
  const { r, sealed } = await copiedRig();
  try {
    await r.ledger.record({
      type: "delete_started",
      segment: sealed[0].startOffset,
      generation: 0n,
      cause: "retention",
      at: r.clock.now(),
    });
    await writeConsumerOffset(r.dir, { id: 1, offset: 0n, format: r.format, corrupt: true });
    r.sim.resetCounts();
    const out = await retentionPhase(r.ctx, r.ledger, await expired(r));
    assert.equal(out.remoteDeleted, 0);
    assert.equal(r.sim.requestCount("deleteMany"), 0, "nothing was sent");
    assert.equal(stateOf(r, sealed[0].startOffset)?.state, "DELETE_SEGMENT_STARTED");
    for (const seg of sealed.slice(1)) {
      assert.equal(stateOf(r, seg.startOffset)?.state, "COPY_SEGMENT_FINISHED");
    }
    const warned = r.logged("unreadable consumer offset file: remote deletion paused");
    assert.equal(warned.length, 1);
    assert.match(JSON.stringify(warned[0].files), /offsets\/consumers\/1/);
  } finally {
    await r.cleanup();
  }
});

Deno.test("retention: a deleted segment's marker and kept index copy are removed", async () => {
  const { r, sealed } = await copiedRig();
  try {
    const [s0, s1] = sealed;
    for (const seg of [s0, s1]) {
      await r.ledger.writeMarker(stateOf(r, seg.startOffset)!, seg.indexPath);
    }
    const paths0 = markerPaths(r.ledger.stateDir, s0.startOffset);
    const paths1 = markerPaths(r.ledger.stateDir, s1.startOffset);
    assert.ok(await exists(paths0.marker) && await exists(paths0.index));
    await writeConsumerOffset(r.dir, { id: 1, offset: s1.startOffset, format: r.format });
    const out = await retentionPhase(r.ctx, r.ledger, await expired(r));
    assert.equal(out.remoteDeleted, 1);
    assert.equal(await exists(paths0.marker), false);
    assert.equal(await exists(paths0.index), false);
    assert.ok(await exists(paths1.marker), "the kept segment keeps its marker");
    assert.ok(await exists(paths1.index));
  } finally {
    await r.cleanup();
  }
});

Deno.test("retention: a copy is deleted only once it has been deletable for delete_grace; one that stops being deletable starts its grace again", async () => {
  const { r, sealed } = await copiedRig();
  try {
    r.config.tiered_storage.delete_grace = 60_000;
    const since = new Map<string, number>();
    const pass = async () =>
      await retentionPhase(r.ctx, r.ledger, { ...(await expired(r)), deletableSince: since });
    const s0 = sealed[0].startOffset;
    assert.equal((await pass()).remoteDeleted, 0, "just found deletable");
    assert.equal(stateOf(r, s0)?.state, "COPY_SEGMENT_FINISHED", "nothing journaled either");
    r.clock.advance(59_000);
    assert.equal((await pass()).remoteDeleted, 0, "59 s later");
    // A consumer moves back onto segment 0: no longer deletable; its grace is forgotten.
    const offsets = await writeConsumerOffset(r.dir, { id: 1, offset: s0, format: r.format });
    assert.equal((await pass()).remoteDeleted, 0);
    await Deno.remove(offsets);
    r.clock.advance(30_000);
    assert.equal((await pass()).remoteDeleted, 0, "deletable again: the grace starts over");
    r.clock.advance(59_999);
    assert.equal((await pass()).remoteDeleted, 0);
    r.clock.advance(1);
    const out = await pass();
    assert.deepEqual(out.problems, []);
    assert.equal(out.remoteDeleted, sealed.length, "60 s deletable: every expired copy goes");
    assert.equal(stateOf(r, s0)?.state, "DELETE_SEGMENT_FINISHED");
  } finally {
    await r.cleanup();
  }
});

Deno.test("retention: copies left waiting (grace, budget) are reported chosen, due when their grace ends, which runs while the budget is spent", async () => {
  const { r, sealed } = await copiedRig();
  try {
    r.config.tiered_storage.delete_grace = 60_000;
    const since = new Map<string, number>();
    const pass = async (budget: number) =>
      await retentionPhase(r.ctx, r.ledger, {
        ...(await expired(r, budget)),
        deletableSince: since,
      });
    const t0 = r.clock.now();
    const waiting = sealed.map((s) => [s.startOffset, s.size, t0 + 60_000]);
    const first = await pass(300);
    assert.equal(first.remoteDeleted, 0, "within delete_grace");
    assert.deepEqual(first.chosen.map((c) => [c.start, c.size, c.dueAt]), waiting);
    // Other partitions spend the whole budget: nothing goes, the grace keeps running.
    r.clock.advance(60_000);
    const starved = await pass(0);
    assert.equal(starved.remoteDeleted, 0);
    assert.deepEqual(starved.chosen.map((c) => [c.start, c.size, c.dueAt]), waiting);
    // Budget for one segment: it goes at once (deletable for its grace); the rest stay chosen.
    const one = await pass(2);
    assert.equal(one.remoteDeleted, 1);
    assert.deepEqual(one.chosen.map((c) => c.start), sealed.slice(1).map((s) => s.startOffset));
    const all = await pass(300);
    assert.equal(all.remoteDeleted, sealed.length - 1);
    assert.deepEqual(all.chosen, []);
  } finally {
    await r.cleanup();
  }
});

Deno.test("retention: no newer copy is deleted past an older segment whose copy is being made again", async () => {
  // The oldest copy went bad while the broker still has the segment (it is cleaned up and copied
  // again): deleting the expired copies after it would leave it, once it lands, below a gap.
  const { r, deleted, sealed } = await copiedRig();
  try {
    await r.ledger.record({
      type: "dangling",
      segment: sealed[0].startOffset,
      generation: 0n,
      reason: "verify: the object is gone",
      at: r.ctx.clock.now(),
    });
    const out = await retentionPhase(r.ctx, r.ledger, await expired(r));
    assert.deepEqual(out.problems, []);
    assert.equal(out.remoteDeleted, 0);
    assert.deepEqual(deleted, []);
    for (const s of sealed.slice(1)) {
      assert.equal(stateOf(r, s.startOffset)?.state, "COPY_SEGMENT_FINISHED");
    }
  } finally {
    await r.cleanup();
  }
});
