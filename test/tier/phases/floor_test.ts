// The floor phase alone: `tiered_up_to_offset` covers only a contiguous prefix and never moves
// back; offsets the broker deleted before a copy are recorded as lost (up to the first record
// that still means something); a purge starts a new generation.
import assert from "node:assert/strict";
import type { SegmentFiles } from "../../../src/partition/segments.ts";
import { getSegment } from "../../../src/state/segment_state.ts";
import { advanceFloor, detectPurge, recordLosses } from "../../../src/tier/phases/floor.ts";
import { phaseRig, recordCopied, recordDangling } from "../_phase_rig.ts";

Deno.test("floor: advances over the contiguous copied prefix only, and only forward", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2] = r.segments;
    assert.equal(await advanceFloor(r.ctx, r.ledger), -1n, "nothing copied: no floor");
    await recordCopied(r, s0);
    await recordCopied(r, s2); // s1 is not copied: a hole in the prefix
    assert.equal(await advanceFloor(r.ctx, r.ledger), s0.endOffset);
    assert.equal(r.ledger.state.floor, s0.endOffset);
    await recordCopied(r, s1);
    assert.equal(await advanceFloor(r.ctx, r.ledger), s2.endOffset, "the hole closed");
    // Nothing new: nothing journaled.
    const size = r.ledger.journalSize;
    assert.equal(await advanceFloor(r.ctx, r.ledger), s2.endOffset);
    assert.equal(r.ledger.journalSize, size);
    // Never backwards, whatever the records say.
    await r.ledger.record({ type: "floor", generation: 0n, tieredUpTo: 100_000n, at: 1 });
    assert.equal(await advanceFloor(r.ctx, r.ledger), 100_000n);
    assert.equal(r.ledger.journalSize > size, true);
    assert.equal((await r.reopen()).state.floor, 100_000n, "the floor is durable");
  } finally {
    await r.cleanup();
  }
});

Deno.test("floor: offsets below the first local segment that nothing covers are recorded lost_before_upload, once", async () => {
  const r = await phaseRig();
  try {
    const local = await r.local();
    const [, , s2] = r.segments;
    // The broker's retention deleted the first two segments before any copy.
    const remaining = local.slice(2);
    assert.equal(await recordLosses(r.ctx, r.ledger, remaining), 1);
    const rec = getSegment(r.ledger.state, 0n, 0n)!;
    assert.equal(rec.state, "LOST_BEFORE_UPLOAD");
    assert.equal(rec.lostEndOffset, s2.startOffset - 1n);
    assert.equal(r.observer.lost, 1);
    assert.equal(
      await advanceFloor(r.ctx, r.ledger),
      s2.startOffset - 1n,
      "the floor passes the loss",
    );
    assert.equal(await recordLosses(r.ctx, r.ledger, remaining), 0, "recorded once");
    assert.equal(r.observer.lost, 1);
    const warned = r.logged("offsets deleted by the broker before they were copied");
    assert.equal(warned.length, 1);
    assert.equal(warned[0].lost_to, String(s2.startOffset - 1n));
    // With every segment local there is nothing lost.
    const r2 = await phaseRig();
    try {
      assert.equal(await recordLosses(r2.ctx, r2.ledger, await r2.local()), 0);
      assert.equal(await recordLosses(r2.ctx, r2.ledger, []), 0);
      assert.equal(r2.observer.lost, 0);
    } finally {
      await r2.cleanup();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("floor: a loss stops at a record that still means something (a dangling copy awaiting cleanup)", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2, s3] = r.segments;
    await recordCopied(r, s0);
    await recordDangling(r, s2.startOffset);
    // s1, s2 gone from the broker; s2's failed copy still needs its cleanup.
    const remaining = (await r.local()).filter((s) => s.start >= s3.startOffset);
    assert.equal(await recordLosses(r.ctx, r.ledger, remaining), 1);
    const lost = getSegment(r.ledger.state, 0n, s1.startOffset)!;
    assert.equal(lost.state, "LOST_BEFORE_UPLOAD");
    assert.equal(lost.lostEndOffset, s2.startOffset - 1n, "not past the dangling record");
    assert.equal(getSegment(r.ledger.state, 0n, s2.startOffset)?.state, "DANGLING");
    assert.equal(await advanceFloor(r.ctx, r.ledger), s2.startOffset - 1n);
    // The dangling record right above the floor blocks any further loss until it is cleaned.
    assert.equal(await recordLosses(r.ctx, r.ledger, remaining), 0);
  } finally {
    await r.cleanup();
  }
});

Deno.test("floor: a purge (the active segment at or below the floor) starts a new generation", async () => {
  const r = await phaseRig();
  try {
    const local = await r.local();
    const activeAt = (start: bigint): SegmentFiles[] => [{ ...local.at(-1)!, start }];
    // A fresh partition whose only segment starts at 0 is not a purge.
    assert.equal(await detectPurge(r.ctx, r.ledger, activeAt(0n)), undefined);
    assert.equal(await detectPurge(r.ctx, r.ledger, []), undefined);
    for (const seg of r.segments.slice(0, 2)) await recordCopied(r, seg);
    const floor = await advanceFloor(r.ctx, r.ledger);
    assert.equal(await detectPurge(r.ctx, r.ledger, local), undefined, "the chain goes on");
    assert.equal(await detectPurge(r.ctx, r.ledger, activeAt(floor + 1n)), undefined);
    assert.equal(r.ledger.state.generation, 0n);
    assert.equal(await detectPurge(r.ctx, r.ledger, activeAt(floor)), 1n, "at the floor");
    assert.equal(r.ledger.state.generation, 1n);
    assert.equal(r.ledger.state.floor, -1n, "the new generation has no floor yet");
    assert.equal(
      getSegment(r.ledger.state, 0n, 0n)?.state,
      "COPY_SEGMENT_FINISHED",
      "the old generation's records stay",
    );
    assert.notEqual(r.ledger.keys(0n).log, r.ledger.keys(0n, 0n).log, "new keys");
    // The new generation has no floor yet: the same restart is not a purge again.
    assert.equal(await detectPurge(r.ctx, r.ledger, activeAt(0n)), undefined);
    assert.equal((await r.reopen()).state.generation, 1n);
  } finally {
    await r.cleanup();
  }
});
