// The eviction phase alone, through a fake evictor that records what it is asked: only a
// verified prefix under the floor goes while local retention is exceeded, markers first; only
// what the directory shows gone is recorded. And the two real evictors of the port.
import assert from "node:assert/strict";
import { access, mkdir, open, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { PartitionId } from "../../../src/layout/partition.ts";
import { markerPaths } from "../../../src/layout/state_paths.ts";
import type { SegmentFiles } from "../../../src/partition/segments.ts";
import { readMarker } from "../../../src/state/marker.ts";
import { getSegment, segmentsOf } from "../../../src/state/segment_state.ts";
import type { BrokerClient } from "../../../src/tier/broker_client.ts";
import { BrokerEvictor, type Evictor, UnlinkEvictor } from "../../../src/tier/evictor.ts";
import { describeProblem } from "../../../src/tier/problem.ts";
import { copyPhase } from "../../../src/tier/phases/copy.ts";
import { evictPhase } from "../../../src/tier/phases/evict.ts";
import { advanceFloor } from "../../../src/tier/phases/floor.ts";
import { ID, type PhaseRig, phaseRig, recordDangling } from "../_phase_rig.ts";

async function exists(path: string): Promise<boolean> {
  return await access(path).then(() => true, () => false);
}

/** What the fake evictor saw on one call. */
interface EvictCall {
  id: PartitionId;
  starts: bigint[];
  /** Each segment's marker was on disk (and decoded to its end offset) when it was called. */
  markers: boolean[];
  /** Each segment's kept index copy was on disk when it was called. */
  indexCopies: boolean[];
}

/**
 * An evictor that records its calls and removes the files of the segments `removes` picks
 * (all of them by default), or throws `fails`.
 */
function fakeEvictor(
  r: PhaseRig,
  o: { removes?: (segs: readonly SegmentFiles[]) => readonly SegmentFiles[]; fails?: Error } = {},
): Evictor & { calls: EvictCall[] } {
  const calls: EvictCall[] = [];
  return {
    via: "fake",
    action: "fake removal",
    refused: "fake evictor refused",
    calls,
    async remove(id, _dir, segments) {
      const markers: boolean[] = [];
      const indexCopies: boolean[] = [];
      for (const s of segments) {
        const paths = markerPaths(r.ledger.stateDir, s.start);
        const m = await readMarker(paths.marker).catch(() => undefined);
        const rec = getSegment(r.ledger.state, 0n, s.start);
        markers.push(m !== undefined && m.endOffset === rec?.meta?.endOffset);
        indexCopies.push(await exists(paths.index));
      }
      calls.push({ id, starts: segments.map((s) => s.start), markers, indexCopies });
      if (o.fails) throw o.fails;
      for (const s of (o.removes ?? ((x) => x))(segments)) {
        await rm(s.logPath);
        await rm(s.indexPath, { force: true });
      }
    },
  };
}

/** Copies every sealed segment (stopping at a dangling one) and advances the floor. */
async function copyAll(r: PhaseRig, o: { advance?: boolean } = {}): Promise<void> {
  const out = await copyPhase(r.ctx, r.ledger, {
    segments: await r.local(),
    format: r.format,
    reportedGaps: new Set(),
  });
  assert.deepEqual(out.problems, []);
  if (o.advance ?? true) await advanceFloor(r.ctx, r.ledger);
}

/** Local retention that wants exactly the first `n` segments gone (by size). */
function keepAllBut(r: PhaseRig, n: number): number {
  const total = r.segments.reduce((sum, s) => sum + s.size, 0);
  return total - r.segments.slice(0, n).reduce((sum, s) => sum + s.size, 0);
}

Deno.test("evict: a verified prefix under the floor goes, while local retention is exceeded, markers first", async () => {
  const r = await phaseRig();
  try {
    await copyAll(r);
    assert.equal(r.ledger.state.floor, r.segments.at(-2)!.endOffset, "every sealed one copied");
    const evictor = fakeEvictor(r);
    const segments = await r.local();
    const out = await evictPhase(r.ctx, r.ledger, {
      dir: r.dir,
      segments,
      format: r.format,
      topic: { ...r.topic, local_retention_size: keepAllBut(r, 2) },
      evictor,
    });
    assert.deepEqual(out.problems, []);
    assert.equal(out.evicted, 2);
    assert.equal(out.pressured, false, "the floor allows everything retention wants");
    assert.deepEqual(evictor.calls.map((c) => c.starts), [
      segments.slice(0, 2).map((s) => s.start),
    ]);
    assert.deepEqual(evictor.calls[0].id, ID);
    assert.deepEqual(evictor.calls[0].markers, [true, true], "markers are durable before removal");
    assert.deepEqual(evictor.calls[0].indexCopies, [true, true], "so are the kept index copies");
    const evicted = segmentsOf(r.ledger.state).filter((s) => s.evicted).map((s) => s.start);
    assert.deepEqual(evicted, segments.slice(0, 2).map((s) => s.start));
    assert.equal(r.observer.evictedCount, 2);
    // Local retention satisfied: nothing more goes.
    const again = await evictPhase(r.ctx, r.ledger, {
      dir: r.dir,
      segments: await r.local(),
      format: r.format,
      topic: { ...r.topic, local_retention_size: keepAllBut(r, 2) },
      evictor,
    });
    assert.equal(again.evicted, 0);
    assert.equal(evictor.calls.length, 1);
  } finally {
    await r.cleanup();
  }
});

Deno.test("evict: nothing above the floor goes, copied or not; pressured says retention wants more", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2, s3] = r.segments;
    await recordDangling(r, s3.startOffset); // never copied
    await copyAll(r, { advance: false });
    // s0..s2 are copied, but the floor (as the ledger has it) covers only s0 and s1.
    await r.ledger.record({ type: "floor", generation: 0n, tieredUpTo: s1.endOffset, at: 1 });
    const evictor = fakeEvictor(r);
    const out = await evictPhase(r.ctx, r.ledger, {
      dir: r.dir,
      segments: await r.local(),
      format: r.format,
      topic: { ...r.topic, local_retention_size: 0 }, // wants every sealed segment gone
      evictor,
    });
    assert.deepEqual(out.problems, []);
    assert.equal(out.evicted, 2);
    assert.equal(out.pressured, true);
    assert.deepEqual(evictor.calls[0].starts, [s0.startOffset, s1.startOffset]);
    assert.equal(getSegment(r.ledger.state, 0n, s2.startOffset)?.evicted, false);
    for (const seg of [s2, s3, r.segments.at(-1)!]) assert.ok(await exists(seg.logPath));
    // Unlimited local retention: nothing is wanted, nothing is pressured.
    const none = await evictPhase(r.ctx, r.ledger, {
      dir: r.dir,
      segments: await r.local(),
      format: r.format,
      topic: { ...r.topic, local_retention_size: Infinity, local_retention_age: Infinity },
      evictor,
    });
    assert.deepEqual([none.evicted, none.pressured], [0, false]);
    assert.equal(evictor.calls.length, 1);
  } finally {
    await r.cleanup();
  }
});

Deno.test("evict: only what the directory shows gone is recorded evicted", async () => {
  const r = await phaseRig();
  try {
    await copyAll(r);
    const segments = await r.local();
    // The broker keeps the second one (a consumer still reads it).
    const evictor = fakeEvictor(r, { removes: (segs) => segs.slice(0, 1) });
    const out = await evictPhase(r.ctx, r.ledger, {
      dir: r.dir,
      segments,
      format: r.format,
      topic: { ...r.topic, local_retention_size: keepAllBut(r, 2) },
      evictor,
    });
    assert.deepEqual(out.problems, []);
    assert.equal(evictor.calls[0].starts.length, 2);
    assert.equal(out.evicted, 1);
    assert.equal(getSegment(r.ledger.state, 0n, segments[0].start)?.evicted, true);
    const kept = getSegment(r.ledger.state, 0n, segments[1].start)!;
    assert.equal(kept.state, "COPY_SEGMENT_FINISHED");
    assert.equal(kept.evicted, false);
    assert.ok(await exists(segments[1].logPath));
    assert.equal(r.observer.evictedCount, 1);
    assert.equal((await r.reopen()).state.segments.get(0n)?.get(segments[1].start)?.evicted, false);
  } finally {
    await r.cleanup();
  }
});

Deno.test("evict: the log line counts exactly what left the disk, up to the highest offset that left it", async () => {
  const r = await phaseRig({ messages: 1200 });
  try {
    await copyAll(r);
    const segments = await r.local();
    assert.ok(segments.length >= 6, `${segments.length} segments`);
    assert.equal(r.ledger.state.floor, r.segments.at(-2)!.endOffset, "the floor covers them all");
    // The first one's files are gone already (the broker's own retention): recorded, not removed.
    await rm(segments[0].logPath);
    await rm(segments[0].indexPath);
    // Local retention wants the next three gone; the broker keeps the third of them.
    const evictor = fakeEvictor(r, { removes: (segs) => segs.slice(0, 2) });
    const out = await evictPhase(r.ctx, r.ledger, {
      dir: r.dir,
      segments: await r.local(),
      format: r.format,
      topic: { ...r.topic, local_retention_size: keepAllBut(r, 4) },
      evictor,
    });
    assert.deepEqual(out.problems, []);
    assert.deepEqual(evictor.calls.map((c) => c.starts), [
      segments.slice(1, 4).map((s) => s.start),
    ]);
    assert.equal(out.evicted, 3, "recorded: the one already gone and the two removed");
    const removed = segments.slice(1, 3);
    const [line] = r.logged("segments evicted locally");
    assert.deepEqual(
      { count: line.count, bytes: line.bytes, from: line.from_offset, upTo: line.up_to_offset },
      {
        count: 2,
        bytes: removed.reduce((n, s) => n + s.logSize + s.indexSize, 0),
        from: String(removed[0].start),
        upTo: String(r.segments[2].endOffset),
      },
    );
    assert.notEqual(line.up_to_offset, String(r.ledger.state.floor), "not the floor");
    const [gone] = r.logged("evictions recorded for segments already gone from the disk");
    assert.deepEqual([gone.count, gone.from_offset, gone.up_to_offset], [
      1,
      String(segments[0].start),
      String(r.segments[0].endOffset),
    ]);
    assert.equal(r.observer.evictedCount, 3);
  } finally {
    await r.cleanup();
  }
});

Deno.test("evict: a local segment whose bytes changed after its copy is refused and never handed to the evictor", async () => {
  const r = await phaseRig();
  try {
    await copyAll(r);
    const [victim] = await r.local();
    // Same name, same size, other bytes (a purge that regrew while the agent was down).
    const fh = await open(victim.logPath, "r+");
    await fh.write(new Uint8Array([0xff, 0xfe, 0xfd]), 0, 3, 40);
    await fh.close();
    const evictor = fakeEvictor(r);
    const out = await evictPhase(r.ctx, r.ledger, {
      dir: r.dir,
      segments: await r.local(),
      format: r.format,
      topic: { ...r.topic, local_retention_size: 0 },
      evictor,
    });
    assert.equal(out.evicted, 0);
    assert.deepEqual(evictor.calls, [], "the evictor was never called");
    assert.equal(out.problems.length, 1);
    const [changed] = out.problems;
    assert.deepEqual([changed.kind, changed.segment], ["evict", victim.start]);
    assert.equal(changed.storeFault, false, "a changed file is not a store fault");
    assert.ok(
      describeProblem(changed).startsWith(
        `eviction of segment ${victim.start}: ${victim.logPath}: contents differ`,
      ),
      describeProblem(changed),
    );
    assert.equal(
      await exists(markerPaths(r.ledger.stateDir, victim.start).marker),
      false,
      "no marker",
    );
    assert.ok(segmentsOf(r.ledger.state).every((s) => !s.evicted), "the prefix stops at it");
    assert.equal(
      r.logged("local segment changed after its copy was verified; not evicting it").length,
      1,
    );
  } finally {
    await r.cleanup();
  }
});

Deno.test("evict: an evictor that throws leaves everything local and recorded so, and is reported", async () => {
  const r = await phaseRig();
  try {
    await copyAll(r);
    const evictor = fakeEvictor(r, { fails: new Error("broker answered 500") });
    const out = await evictPhase(r.ctx, r.ledger, {
      dir: r.dir,
      segments: await r.local(),
      format: r.format,
      topic: { ...r.topic, local_retention_size: 0 },
      evictor,
    });
    assert.equal(evictor.calls.length, 1);
    assert.equal(out.evicted, 0);
    assert.deepEqual(out.problems, [{
      kind: "evict",
      what: "fake removal",
      detail: "broker answered 500",
      storeFault: false,
    }]);
    assert.deepEqual(out.problems.map(describeProblem), ["fake removal: broker answered 500"]);
    for (const s of r.segments) assert.ok(await exists(s.logPath), `${s.logPath} stays`);
    assert.ok(segmentsOf(r.ledger.state).every((s) => !s.evicted));
    assert.equal(r.observer.evictedCount, 0);
    assert.equal(r.logged("fake evictor refused").length, 1);
  } finally {
    await r.cleanup();
  }
});

Deno.test("evict: a copied segment whose files are already gone is recorded evicted, with its marker", async () => {
  const r = await phaseRig();
  try {
    await copyAll(r);
    const [first] = await r.local();
    await rm(first.logPath); // the broker's own retention, or a crash mid-eviction
    const evictor = fakeEvictor(r);
    const out = await evictPhase(r.ctx, r.ledger, {
      dir: r.dir,
      segments: await r.local(),
      format: r.format,
      topic: r.topic, // no local retention at all
      evictor,
    });
    assert.deepEqual(out.problems, []);
    assert.equal(out.evicted, 1);
    assert.deepEqual(evictor.calls, []);
    assert.equal(getSegment(r.ledger.state, 0n, first.start)?.evicted, true);
    const marker = await readMarker(markerPaths(r.ledger.stateDir, first.start).marker);
    assert.equal(marker.endOffset, r.segments[0].endOffset);
    assert.equal(await exists(first.indexPath), false, "the leftover .index is removed");
  } finally {
    await r.cleanup();
  }
});

Deno.test("UnlinkEvictor: removes each segment's .log, then its .index", async () => {
  const r = await phaseRig();
  try {
    const [a, b, c] = await r.local();
    await new UnlinkEvictor().remove(ID, r.dir, [a, b]);
    for (const s of [a, b]) {
      assert.equal(await exists(s.logPath), false);
      assert.equal(await exists(s.indexPath), false);
    }
    assert.ok(await exists(c.logPath) && await exists(c.indexPath), "the rest stays");
    // A .log that cannot be removed stops it before the .index goes (never an orphan .log).
    await rm(c.logPath);
    await mkdir(c.logPath);
    await writeFile(join(c.logPath, "keep"), "x");
    await assert.rejects(new UnlinkEvictor().remove(ID, r.dir, [c]));
    assert.ok(await exists(c.indexPath), "the .index is still there");
    // Files already gone are not an error.
    await new UnlinkEvictor().remove(ID, r.dir, [a]);
  } finally {
    await r.cleanup();
  }
});

Deno.test("BrokerEvictor: asks the broker to delete as many oldest segments as it is given", async () => {
  const calls: { id: PartitionId; count: number }[] = [];
  const client = {
    deleteSegments: (id: PartitionId, count: number) => {
      calls.push({ id, count });
      return Promise.resolve();
    },
  } as unknown as BrokerClient;
  const r = await phaseRig();
  try {
    const segments = (await r.local()).slice(0, 3);
    const evictor = new BrokerEvictor(client);
    assert.equal(evictor.via, "broker");
    await evictor.remove(ID, r.dir, segments);
    assert.deepEqual(calls, [{ id: ID, count: 3 }]);
    for (const s of segments) assert.ok(await exists(s.logPath), "the broker, not tierd, removes");
    const refusing = new BrokerEvictor({
      deleteSegments: () => Promise.reject(new Error("HTTP 403")),
    } as unknown as BrokerClient);
    await assert.rejects(refusing.remove(ID, r.dir, segments), /HTTP 403/);
  } finally {
    await r.cleanup();
  }
});
