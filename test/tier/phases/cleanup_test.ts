// The dangling-cleanup phase alone: a failed copy whose object in the store is complete and
// matches is adopted (with the local files gone, any complete object is); anything else under
// its keys is deleted and its uploads aborted; a store fault leaves it DANGLING for the next pass.
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { decorateStore } from "../../../providers/decorate.ts";
import { StoreError } from "../../../providers/types.ts";
import { getSegment } from "../../../src/state/segment_state.ts";
import { copySegment, segmentSource } from "../../../src/tier/copy_segment.ts";
import { describeProblem } from "../../../src/tier/problem.ts";
import { cleanupPhase } from "../../../src/tier/phases/cleanup.ts";
import { factsOf, type PhaseRig, phaseRig, recordDangling } from "../_phase_rig.ts";

/** Puts a real, complete copy of segment `i` into the store, bypassing the tier code. */
async function storeCopyOf(r: PhaseRig, i: number): Promise<void> {
  const local = (await r.local())[i];
  const src = await segmentSource(
    local,
    r.format,
    r.ledger.keys(local.start),
    r.config.tiered_storage.part_size,
  );
  await copySegment(r.sim, src, { concurrency: 1 });
}

Deno.test("cleanup: a DANGLING segment whose complete, matching copy is in the store is adopted without a new upload", async () => {
  const r = await phaseRig();
  try {
    const seg = r.segments[0];
    await recordDangling(r, seg.startOffset, "connection reset after the upload");
    await storeCopyOf(r, 0);
    r.sim.resetCounts();
    const out = await cleanupPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
    });
    assert.deepEqual(out.problems, []);
    assert.equal(out.adopted, 1);
    assert.equal(out.cleaned, 0);
    const rec = getSegment(r.ledger.state, 0n, seg.startOffset)!;
    assert.equal(rec.state, "COPY_SEGMENT_FINISHED");
    assert.deepEqual(rec.meta, await factsOf(seg));
    assert.equal(r.sim.requestCount("put"), 0, "no new upload");
    assert.equal(r.sim.requestCount("createMultipart"), 0);
    assert.equal(r.sim.requestCount("deleteMany"), 0, "an adopted copy is not deleted");
    assert.ok(r.sim.objects.has(r.ledger.keys(seg.startOffset).log));
    // What the journal holds is what memory holds.
    const reopened = await r.reopen();
    assert.equal(getSegment(reopened.state, 0n, seg.startOffset)?.state, "COPY_SEGMENT_FINISHED");
  } finally {
    await r.cleanup();
  }
});

Deno.test("cleanup: a mismatching object is deleted, and the journaled (and any unknown) multipart upload aborted", async () => {
  const r = await phaseRig();
  try {
    const seg = r.segments[0];
    const keys = r.ledger.keys(seg.startOffset);
    await r.ledger.record({
      type: "copy_started",
      segment: seg.startOffset,
      generation: 0n,
      at: 1,
    });
    const journaled = await r.sim.createMultipart(keys.log);
    await r.ledger.record({
      type: "multipart_started",
      segment: seg.startOffset,
      generation: 0n,
      key: keys.log,
      uploadId: journaled,
      at: 2,
    });
    // An upload the journal never heard of (a crash before its id was recorded), and an object
    // that is not this segment under its keys.
    await r.sim.createMultipart(keys.log);
    await r.sim.put(keys.log, new Uint8Array(seg.size).fill(7));
    await r.sim.put(keys.index, new Uint8Array(seg.indexSize));
    await r.ledger.record({
      type: "dangling",
      segment: seg.startOffset,
      generation: 0n,
      reason: "test",
      at: 3,
    });
    assert.equal(r.sim.uploads.size, 2);
    const out = await cleanupPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
    });
    assert.deepEqual(out.problems, []);
    assert.equal(out.cleaned, 1);
    assert.equal(out.adopted, 0);
    const rec = getSegment(r.ledger.state, 0n, seg.startOffset)!;
    assert.equal(rec.state, "DELETE_SEGMENT_FINISHED");
    assert.equal(rec.deleteCause, "dangling");
    assert.equal(r.sim.objects.has(keys.log), false);
    assert.equal(r.sim.objects.has(keys.index), false);
    assert.equal(r.sim.uploads.size, 0, "no open upload left");
    assert.deepEqual(await r.sim.listMultipartUploads(""), []);
    const events = (await r.events()).filter((e) => "segment" in e).map((e) => e.type);
    assert.deepEqual(events.slice(-2), ["delete_started", "delete_finished"]);
  } finally {
    await r.cleanup();
  }
});

Deno.test("cleanup: the journaled upload is aborted even when the store's listing does not show it", async () => {
  // Listings of uploads may lag (or page): the journal is what names the upload for sure.
  const r = await phaseRig({
    wrap: (sim) =>
      decorateStore(
        sim,
        (call) =>
          call.op === "list_multipart_uploads"
            ? Promise.resolve([] as never)
            : call.run(call.signal),
      ),
  });
  try {
    const seg = r.segments[0];
    const keys = r.ledger.keys(seg.startOffset);
    await r.ledger.record({
      type: "copy_started",
      segment: seg.startOffset,
      generation: 0n,
      at: 1,
    });
    const uploadId = await r.sim.createMultipart(keys.log);
    await r.ledger.record(
      {
        type: "multipart_started",
        segment: seg.startOffset,
        generation: 0n,
        key: keys.log,
        uploadId,
        at: 2,
      },
      { type: "dangling", segment: seg.startOffset, generation: 0n, reason: "test", at: 3 },
    );
    const out = await cleanupPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
    });
    assert.deepEqual(out.problems, []);
    assert.equal(out.cleaned, 1);
    assert.equal(r.sim.uploads.has(uploadId), false, "the journaled upload was aborted");
  } finally {
    await r.cleanup();
  }
});

Deno.test("cleanup: a store fault leaves the segment DANGLING, its object in place, and says the store is unreachable", async () => {
  let failDeletes = true;
  const r = await phaseRig({
    wrap: (sim) =>
      decorateStore(sim, (call) => {
        if (call.op === "delete" && failDeletes) {
          return Promise.reject(new StoreError("Transport", "connection reset", { op: "delete" }));
        }
        return call.run(call.signal);
      }),
  });
  try {
    const seg = r.segments[0];
    const keys = r.ledger.keys(seg.startOffset);
    await recordDangling(r, seg.startOffset);
    await r.sim.put(keys.log, new Uint8Array(10)); // not the segment: to be deleted
    const out = await r.clock.runUntil(
      cleanupPhase(r.ctx, r.ledger, { segments: await r.local(), format: r.format }),
    );
    assert.equal(out.cleaned + out.adopted, 0);
    assert.equal(out.problems.length, 1);
    const [failed] = out.problems;
    assert.deepEqual([failed.kind, failed.segment, failed.storeFault], [
      "cleanup",
      seg.startOffset,
      true,
    ]);
    assert.match(
      describeProblem(failed),
      new RegExp(`^cleanup of segment ${seg.startOffset}: connection reset`),
    );
    assert.ok(r.retries.some((e) => e.op === "delete"), "the delete was retried");
    const rec = getSegment(r.ledger.state, 0n, seg.startOffset)!;
    assert.equal(rec.state, "DANGLING", "back to DANGLING, not stuck in DELETE_SEGMENT_STARTED");
    assert.match(rec.danglingReason!, /^cleanup failed: connection reset/);
    assert.ok(r.sim.objects.has(keys.log), "nothing was deleted");
    // Once the store answers, the next pass cleans it up.
    failDeletes = false;
    const next = await cleanupPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
    });
    assert.deepEqual(next.problems, []);
    assert.equal(next.cleaned, 1);
    assert.equal(r.sim.objects.has(keys.log), false);
  } finally {
    await r.cleanup();
  }
});

Deno.test("cleanup: a DANGLING segment whose local files are gone keeps a complete copy (it may be the only one) and deletes anything less", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2] = r.segments;
    // s0: a journal cut short after copy_started, the copy done and the files evicted since.
    // s1: a half-written object (no .index); s2: nothing in the store at all.
    for (const s of [s0, s1, s2]) await recordDangling(r, s.startOffset, "copy interrupted");
    await storeCopyOf(r, 0);
    const k1 = r.ledger.keys(s1.startOffset);
    await storeCopyOf(r, 1);
    await r.sim.deleteMany([k1.index]);
    const facts0 = await factsOf(s0);
    for (const s of [s0, s1, s2]) {
      await rm(s.logPath);
      await rm(s.indexPath);
    }
    const out = await cleanupPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
    });
    assert.deepEqual(out.problems, []);
    assert.equal(out.adopted, 1);
    assert.equal(out.cleaned, 2);
    const rec = getSegment(r.ledger.state, 0n, s0.startOffset)!;
    assert.equal(rec.state, "COPY_SEGMENT_FINISHED");
    assert.deepEqual(rec.meta, facts0, "the facts the object's metadata carries");
    assert.ok(r.sim.objects.has(r.ledger.keys(s0.startOffset).log), "the only copy is kept");
    assert.equal(r.sim.objects.has(k1.log), false, "an object without its .index is no copy");
    for (const s of [s1, s2]) {
      assert.equal(getSegment(r.ledger.state, 0n, s.startOffset)?.state, "DELETE_SEGMENT_FINISHED");
    }
  } finally {
    await r.cleanup();
  }
});
