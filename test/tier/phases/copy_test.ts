// The copy phase alone: sealed segments go to the store oldest first, journaled before they
// start and when verified; a failed or unreadable segment holds back the ones after it.
import assert from "node:assert/strict";
import { readFile, rm, truncate, writeFile } from "node:fs/promises";
import { decorateStore } from "../../../providers/decorate.ts";
import { getSegment } from "../../../src/state/segment_state.ts";
import { describeProblem } from "../../../src/tier/problem.ts";
import { copyPhase } from "../../../src/tier/phases/copy.ts";
import { factsOf, type PhaseRig, phaseRig, recordDangling } from "../_phase_rig.ts";

/** The error line of a damaged segment. */
const DAMAGED = "sealed segment is damaged: not copied, not evicted, later segments wait";

/** The bytes of an object in the store, or undefined. */
function stored(r: PhaseRig, key: string): Uint8Array | undefined {
  const o = r.sim.objects.get(key);
  return o && new Uint8Array(o.bytes);
}

Deno.test("copy: sealed segments are copied oldest first, each journaled copy_started → copy_finished with the facts of its bytes", async () => {
  const r = await phaseRig();
  try {
    const sealed = r.segments.slice(0, -1);
    const active = r.segments.at(-1)!;
    assert.ok(sealed.length >= 3, `${sealed.length} sealed segments`);
    const before = (await r.events()).length;
    const out = await copyPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
      reportedGaps: new Set(),
    });
    assert.deepEqual(out.problems, []);
    assert.equal(out.copied, sealed.length);
    assert.equal(out.failed, 0);
    assert.deepEqual(out.gaps, []);

    // The journal: one started → finished pair per segment, in offset order, no interleaving.
    const events = (await r.events()).slice(before);
    const expected = [];
    for (const seg of sealed) {
      expected.push({ type: "copy_started", segment: seg.startOffset });
      expected.push({ type: "copy_finished", segment: seg.startOffset });
    }
    assert.deepEqual(
      events.map((e) => ({ type: e.type, segment: "segment" in e && e.segment })),
      expected,
    );
    for (const seg of sealed) {
      const finished = events.find((e) =>
        e.type === "copy_finished" && e.segment === seg.startOffset
      );
      assert.ok(finished?.type === "copy_finished");
      const { type: _t, segment: _s, generation: _g, at: _a, ...facts } = finished;
      assert.deepEqual(facts, await factsOf(seg), `facts of segment ${seg.startOffset}`);
      const rec = getSegment(r.ledger.state, 0n, seg.startOffset)!;
      assert.equal(rec.state, "COPY_SEGMENT_FINISHED");
      // The bytes in the store are the local bytes.
      const keys = r.ledger.keys(seg.startOffset);
      assert.deepEqual(stored(r, keys.log), new Uint8Array(await readFile(seg.logPath)));
      assert.deepEqual(stored(r, keys.index), new Uint8Array(await readFile(seg.indexPath)));
    }
    // Never the active segment.
    assert.equal(getSegment(r.ledger.state, 0n, active.startOffset), undefined);
    const activeKeys = r.ledger.keys(active.startOffset);
    assert.equal(r.sim.objects.has(activeKeys.log), false);
    assert.equal(r.sim.objects.size, 2 * sealed.length);
    assert.equal(r.observer.stalls.at(-1), 0, "a finished copy sets the stall gauge to 0");

    // A second call finds nothing to do and sends nothing.
    r.sim.resetCounts();
    const again = await copyPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
      reportedGaps: new Set(),
    });
    assert.equal(again.copied + again.adopted + again.failed, 0);
    assert.equal(r.sim.requestCount(), 0);
  } finally {
    await r.cleanup();
  }
});

Deno.test("copy: a DANGLING segment holds back every later segment; one found mid-copy becomes DANGLING", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2] = r.segments;
    await recordDangling(r, s1.startOffset, "earlier failure");
    const input = { segments: await r.local(), format: r.format, reportedGaps: new Set<string>() };
    const out = await copyPhase(r.ctx, r.ledger, input);
    assert.deepEqual(out.problems, []);
    assert.equal(out.copied, 1, "only the segment before the dangling one");
    assert.equal(getSegment(r.ledger.state, 0n, s0.startOffset)?.state, "COPY_SEGMENT_FINISHED");
    assert.equal(getSegment(r.ledger.state, 0n, s1.startOffset)?.state, "DANGLING");
    assert.equal(getSegment(r.ledger.state, 0n, s2.startOffset), undefined);
    assert.equal(r.sim.objects.has(r.ledger.keys(s1.startOffset).log), false);
    assert.equal(r.sim.objects.has(r.ledger.keys(s2.startOffset).log), false);

    // A copy found in COPY_SEGMENT_STARTED (a crash) is made DANGLING, and still holds back.
    const r2 = await phaseRig();
    try {
      const [t0, t1] = r2.segments;
      await r2.ledger.record({
        type: "copy_started",
        segment: t0.startOffset,
        generation: 0n,
        at: 1,
      });
      const out2 = await copyPhase(r2.ctx, r2.ledger, {
        segments: await r2.local(),
        format: r2.format,
        reportedGaps: new Set(),
      });
      assert.equal(out2.copied, 0);
      const rec = getSegment(r2.ledger.state, 0n, t0.startOffset)!;
      assert.equal(rec.state, "DANGLING");
      assert.match(rec.danglingReason!, /interrupted/);
      assert.equal(getSegment(r2.ledger.state, 0n, t1.startOffset), undefined);
      assert.equal(r2.sim.requestCount(), 0, "nothing is sent for a segment awaiting cleanup");
    } finally {
      await r2.cleanup();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("copy: a cut sealed segment is reported damaged with its path and byte; nothing is journaled or sent for it", async () => {
  const r = await phaseRig();
  try {
    const [s0, victim, s2] = r.segments;
    await truncate(victim.logPath, victim.size - 7); // cut mid-record
    const before = await r.events();
    const out = await copyPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
      reportedGaps: new Set(),
    });
    assert.equal(out.copied, 1);
    assert.equal(out.failed, 0, "nothing was attempted, so nothing failed");
    assert.equal(out.problems.length, 1);
    const [damaged] = out.problems;
    assert.deepEqual([damaged.kind, damaged.segment, damaged.storeFault], [
      "segment_damaged",
      victim.startOffset,
      false,
    ]);
    const words = describeProblem(damaged);
    assert.ok(words.startsWith(`${victim.logPath} @ byte `), words);
    assert.ok(words.endsWith(`(segment ${victim.startOffset} is damaged: not copied)`), words);
    assert.deepEqual(out.damaged.map((d) => [d.segment, d.file, d.code]), [
      [victim.startOffset, victim.logPath, "straddles_eof"],
    ]);
    const after = await r.events();
    const about = after.slice(before.length).filter((e) =>
      "segment" in e && e.segment === victim.startOffset
    );
    assert.deepEqual(about, [], "no journal event for the unreadable segment");
    assert.equal(getSegment(r.ledger.state, 0n, victim.startOffset), undefined);
    assert.equal(getSegment(r.ledger.state, 0n, s2.startOffset), undefined, "oldest first");
    assert.deepEqual(
      [...r.sim.objects.keys()].sort(),
      Object.values(r.ledger.keys(s0.startOffset)).sort(),
      "only the first segment reached the store",
    );
    const line = r.logged(DAMAGED);
    assert.equal(line.length, 1);
    assert.equal(line[0].level, "error");
    assert.equal(line[0].file, victim.logPath);
    assert.equal(line[0].position, out.damaged[0].position);
  } finally {
    await r.cleanup();
  }
});

Deno.test("copy: a gap between local segments is reported in every outcome but logged once across calls", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2] = r.segments;
    await rm(s1.logPath);
    await rm(s1.indexPath);
    const gap = { afterEnd: s0.endOffset, nextStart: s2.startOffset };
    const reportedGaps = new Set<string>();
    const first = await copyPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
      reportedGaps,
    });
    assert.deepEqual(first.gaps, [gap]);
    assert.deepEqual(first.problems, []);
    assert.equal(first.copied, r.segments.length - 2, "the gap is reported, not a blocker");
    const second = await copyPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
      reportedGaps,
    });
    assert.deepEqual(second.gaps, [gap], "still reported to the pass");
    const warned = r.logged("gap in the broker's segment chain");
    assert.equal(warned.length, 1, "logged once for the partition");
    assert.equal(warned[0].previous_end_offset, String(s0.endOffset));
    assert.equal(warned[0].next_start_offset, String(s2.startOffset));
    // A partition that has not seen the gap yet logs it.
    await copyPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
      reportedGaps: new Set(),
    });
    assert.equal(r.logged("gap in the broker's segment chain").length, 2);
  } finally {
    await r.cleanup();
  }
});

Deno.test("copy: with the format unknown nothing is copied, journaled or sent", async () => {
  const r = await phaseRig();
  try {
    const before = r.ledger.journalSize;
    const out = await copyPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: undefined,
      reportedGaps: new Set(),
    });
    assert.deepEqual(out, {
      problems: [],
      copied: 0,
      adopted: 0,
      failed: 0,
      gaps: [],
      damaged: [],
    });
    assert.equal(r.ledger.journalSize, before);
    assert.equal(r.sim.requestCount(), 0);
  } finally {
    await r.cleanup();
  }
});

Deno.test("copy: the next segment is verified while one uploads; bytes that change after that are never taken as copied", async () => {
  let flipped = false;
  let next: { logPath: string; size: number } | undefined;
  const r = await phaseRig({
    wrap: (sim) =>
      decorateStore(sim, async (call) => {
        if (call.op === "put" && call.key.endsWith(".log") && !flipped && next) {
          // The first .log upload: by now the next segment's verification (a few KiB) is done.
          flipped = true;
          await new Promise((resolve) => setTimeout(resolve, 200));
          const bytes = new Uint8Array(await readFile(next.logPath));
          bytes[next.size - 1] ^= 0xff; // the last payload byte of its last record
          await writeFile(next.logPath, bytes);
        }
        return call.run(call.signal);
      }),
  });
  try {
    const [s0, s1] = r.segments;
    next = s1;
    const out = await copyPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
      reportedGaps: new Set(),
    });
    assert.ok(flipped);
    assert.equal(getSegment(r.ledger.state, 0n, s0.startOffset)?.state, "COPY_SEGMENT_FINISHED");
    // Verified before the change, read for the upload after it: the upload's own hash refuses it.
    assert.equal(out.copied, 1);
    assert.equal(out.failed, 1);
    assert.equal(getSegment(r.ledger.state, 0n, s1.startOffset)?.state, "DANGLING");
    assert.notEqual(getSegment(r.ledger.state, 0n, s1.startOffset)?.state, "COPY_SEGMENT_FINISHED");
  } finally {
    await r.cleanup();
  }
});
