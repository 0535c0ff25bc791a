// Boot reconciliation alone: the incarnation (first sight, a recreated directory), copies and
// cleanups a crash cut off, and the `.remote` markers beside the journal.
import assert from "node:assert/strict";
import { access, readdir, rm, writeFile } from "node:fs/promises";
import { markerOf } from "../../src/layout/segment_facts.ts";
import { markerPaths, quarantineDir } from "../../src/layout/state_paths.ts";
import { writeMarker } from "../../src/state/marker.ts";
import { getSegment, segmentsOf } from "../../src/state/segment_state.ts";
import { reconcileAtBoot } from "../../src/tier/boot.ts";
import { factsOf, phaseRig, recordCopied, recordDangling } from "./_phase_rig.ts";
import { copyFinishedEvent } from "../../src/state/events.ts";

async function exists(path: string): Promise<boolean> {
  return await access(path).then(() => true, () => false);
}

Deno.test("boot: first sight (nothing in the bucket) records an incarnation; a second boot keeps it", async () => {
  const r = await phaseRig({ incarnation: false });
  try {
    assert.equal(r.ledger.state.incarnation, undefined);
    const first = await reconcileAtBoot(r.ctx, r.ledger, r.part, r.keySpace);
    assert.equal(first.incarnation.kind, "new");
    const incarnation = first.incarnation.kind === "new" ? first.incarnation.incarnation : 0n;
    assert.equal(r.ledger.state.incarnation, incarnation);
    assert.equal(r.ledger.state.device, r.part.device);
    assert.equal(r.ledger.state.inode, r.part.inode);
    // Asked about the partition: its objects, and its manifests (who wrote them, retired ones).
    assert.equal(r.sim.requestCount("list"), 2, "the bucket was asked about the partition");
    assert.deepEqual(r.logged("partition directory was recreated: new incarnation"), []);
    await r.reopen();
    const second = await reconcileAtBoot(r.ctx, r.ledger, r.part, r.keySpace);
    assert.deepEqual(second.incarnation, { kind: "kept" }, "nothing new recorded");
    assert.equal(r.ledger.state.incarnation, incarnation);
    assert.equal(r.sim.requestCount("list"), 2, "a known directory needs no store call");
  } finally {
    await r.cleanup();
  }
});

Deno.test("boot: a directory with another inode whose segments match the journal keeps its incarnation", async () => {
  const r = await phaseRig();
  try {
    const old = r.ledger.state.incarnation!;
    await recordCopied(r, r.segments[0]);
    await recordCopied(r, r.segments[1]);
    const out = await reconcileAtBoot(
      r.ctx,
      r.ledger,
      { ...r.part, inode: r.part.inode + 1 },
      r.keySpace,
    );
    assert.equal(out.incarnation.kind, "moved");
    assert.equal(r.ledger.state.incarnation, old);
    assert.equal(r.ledger.state.inode, r.part.inode + 1, "the new directory is recorded");
    assert.equal(segmentsOf(r.ledger.state).length, 2, "its records stay");
    assert.deepEqual(r.logged("partition directory was recreated: new incarnation"), []);
  } finally {
    await r.cleanup();
  }
});

Deno.test("boot: a directory with another inode and other bytes at the same offsets is a new partition", async () => {
  const r = await phaseRig();
  try {
    const old = r.ledger.state.incarnation!;
    const facts = await factsOf(r.segments[0]);
    // The journal remembers other bytes at offset 0: the topic was deleted and recreated.
    await r.ledger.record(
      { type: "copy_started", segment: 0n, generation: 0n, at: 1 },
      copyFinishedEvent(0n, 0n, { ...facts, checksum: facts.checksum ^ 1n }, 1),
    );
    const oldKey = r.ledger.keys(0n).log;
    const out = await reconcileAtBoot(
      r.ctx,
      r.ledger,
      { ...r.part, inode: r.part.inode + 1 },
      r.keySpace,
    );
    assert.equal(out.incarnation.kind, "new");
    assert.notEqual(r.ledger.state.incarnation, old);
    assert.equal(r.ledger.state.inode, r.part.inode + 1);
    assert.deepEqual(
      segmentsOf(r.ledger.state),
      [],
      "the old partition's records are not this one's",
    );
    assert.equal(r.ledger.state.floor, -1n);
    assert.notEqual(r.ledger.keys(0n).log, oldKey);
    const line = r.logged("partition directory was recreated: new incarnation");
    assert.equal(line.length, 1);
    assert.match(String(line[0].evidence), /segment 0: the local bytes differ/);
  } finally {
    await r.cleanup();
  }
});

Deno.test("boot: copies and dangling cleanups a crash cut off become DANGLING; nothing else changes", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2, s3] = r.segments;
    await r.ledger.record({ type: "copy_started", segment: s0.startOffset, generation: 0n, at: 1 });
    await recordDangling(r, s1.startOffset);
    await r.ledger.record({
      type: "delete_started",
      segment: s1.startOffset,
      generation: 0n,
      cause: "dangling",
      at: 2,
    });
    await recordCopied(r, s2);
    await recordCopied(r, s3);
    await r.ledger.record({
      type: "delete_started",
      segment: s3.startOffset,
      generation: 0n,
      cause: "retention",
      at: 3,
    });
    await r.reopen(); // the restart
    const out = await reconcileAtBoot(r.ctx, r.ledger, r.part, r.keySpace);
    assert.equal(out.interrupted, 2);
    assert.deepEqual(out.incarnation, { kind: "kept" });
    const at = (seg: typeof s0) => getSegment(r.ledger.state, 0n, seg.startOffset)!;
    assert.equal(at(s0).state, "DANGLING");
    assert.match(
      at(s0).danglingReason!,
      /^copy interrupted \(found in COPY_SEGMENT_STARTED at boot\)/,
    );
    assert.equal(at(s1).state, "DANGLING");
    assert.match(at(s1).danglingReason!, /^cleanup interrupted/);
    assert.equal(at(s2).state, "COPY_SEGMENT_FINISHED");
    assert.equal(
      at(s3).state,
      "DELETE_SEGMENT_STARTED",
      "a retention delete is resumed, not undone",
    );
    // It is durable: a second boot finds nothing to do.
    await r.reopen();
    assert.equal((await reconcileAtBoot(r.ctx, r.ledger, r.part, r.keySpace)).interrupted, 0);
    assert.equal(getSegment(r.ledger.state, 0n, s0.startOffset)?.state, "DANGLING");
  } finally {
    await r.cleanup();
  }
});

Deno.test("boot: untrusted markers are quarantined (moved, never deleted) and reported", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2] = r.segments;
    await recordCopied(r, s0);
    await recordCopied(r, s1);
    await recordCopied(r, s2);
    const facts = await factsOf(s0);
    const foreign = markerPaths(r.ledger.stateDir, s0.startOffset).marker;
    await writeMarker(
      foreign,
      markerOf(s0.startOffset, facts, { incarnation: 42n, generation: 0n }),
    );
    const garbage = markerPaths(r.ledger.stateDir, s1.startOffset).marker;
    await writeFile(garbage, new Uint8Array(128).fill(9));
    const trusted = markerPaths(r.ledger.stateDir, s2.startOffset).marker;
    await r.ledger.writeMarker(getSegment(r.ledger.state, 0n, s2.startOffset)!);
    const out = await reconcileAtBoot(r.ctx, r.ledger, r.part, r.keySpace);
    assert.deepEqual(out.quarantined.map((q) => q.path).sort(), [foreign, garbage].sort());
    assert.match(out.quarantined.find((q) => q.path === foreign)!.reason, /incarnation 2a/);
    assert.equal(await exists(foreign), false);
    assert.equal(await exists(garbage), false);
    const moved = await readdir(quarantineDir(r.ledger.stateDir));
    assert.equal(moved.length, 2, "both kept in quarantine");
    for (const q of out.quarantined) assert.ok(await exists(q.movedTo));
    assert.deepEqual(r.observer.quarantined.map((q) => q.path).sort(), [foreign, garbage].sort());
    assert.ok(await exists(trusted), "a trusted marker stays");
    assert.equal(out.evictionsRecorded, 0, "every .log is still local");
    assert.ok(segmentsOf(r.ledger.state).every((s) => !s.evicted));
  } finally {
    await r.cleanup();
  }
});

Deno.test("boot: a trusted marker whose .log is gone records the eviction a crash left unrecorded", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2] = r.segments;
    for (const seg of [s0, s1, s2]) {
      await recordCopied(r, seg);
      await r.ledger.writeMarker(getSegment(r.ledger.state, 0n, seg.startOffset)!, seg.indexPath);
    }
    // The crash came after the unlink of s0's and s1's files, before the journal recorded it.
    for (const seg of [s0, s1]) {
      await rm(seg.logPath);
      await rm(seg.indexPath);
    }
    await r.reopen();
    const out = await reconcileAtBoot(r.ctx, r.ledger, r.part, r.keySpace);
    assert.equal(out.evictionsRecorded, 2);
    assert.deepEqual(out.quarantined, []);
    const evicted = (seg: typeof s0) => getSegment(r.ledger.state, 0n, seg.startOffset)?.evicted;
    assert.deepEqual(
      [evicted(s0), evicted(s1), evicted(s2)],
      [true, true, false],
      "s2 is still local",
    );
    await r.reopen();
    assert.deepEqual([evicted(s0), evicted(s1)], [true, true], "durably");
    assert.equal((await reconcileAtBoot(r.ctx, r.ledger, r.part, r.keySpace)).evictionsRecorded, 0);
  } finally {
    await r.cleanup();
  }
});

Deno.test("boot: the same device and inode with other bytes where the journal says it evicted is a new partition (ext4 reuses inodes)", async () => {
  const r = await phaseRig();
  try {
    const old = r.ledger.state.incarnation!;
    const [s0, s1] = r.segments;
    const facts0 = await factsOf(s0);
    // The journal evicted segment 0 holding other bytes; segment 0 is back in the directory.
    await r.ledger.record(
      { type: "copy_started", segment: 0n, generation: 0n, at: 1 },
      copyFinishedEvent(0n, 0n, { ...facts0, checksum: facts0.checksum ^ 1n }, 1),
      { type: "evicted", segment: 0n, generation: 0n, at: 2 },
    );
    await recordCopied(r, s1);
    const out = await reconcileAtBoot(r.ctx, r.ledger, r.part, r.keySpace);
    assert.equal(out.incarnation.kind, "new");
    assert.notEqual(r.ledger.state.incarnation, old);
    assert.deepEqual(segmentsOf(r.ledger.state), []);
    const line = r.logged("partition directory was recreated: new incarnation");
    assert.equal(line.length, 1);
    assert.match(String(line[0].evidence), /the local bytes differ/);
  } finally {
    await r.cleanup();
  }
});

Deno.test("boot: the same device and inode with the same bytes back where it evicted keeps the incarnation; a partition that went on is not hashed", async () => {
  const r = await phaseRig();
  try {
    const old = r.ledger.state.incarnation!;
    const [s0, s1] = r.segments;
    await recordCopied(r, s0);
    await r.ledger.record({ type: "evicted", segment: 0n, generation: 0n, at: 2 });
    await recordCopied(r, s1);
    // Segment 0's files are back (restored in place): the bytes say it is the same partition.
    const back = await reconcileAtBoot(r.ctx, r.ledger, r.part, r.keySpace);
    assert.deepEqual(back.incarnation, { kind: "kept" });
    assert.equal(r.ledger.state.incarnation, old);
    assert.equal(segmentsOf(r.ledger.state).length, 2);
    // Without files where it evicted, nothing is read to decide.
    await rm(s0.logPath);
    await rm(s0.indexPath);
    await writeFile(s1.logPath, new Uint8Array(s1.size)); // other bytes, never looked at
    await r.reopen();
    const on = await reconcileAtBoot(r.ctx, r.ledger, r.part, r.keySpace);
    assert.deepEqual(on.incarnation, { kind: "kept" });
    assert.equal(r.ledger.state.incarnation, old);
  } finally {
    await r.cleanup();
  }
});
