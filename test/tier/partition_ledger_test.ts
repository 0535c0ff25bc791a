// The partition ledger: an event is validated, journaled and only then applied, so memory never
// runs ahead of what a restart replays — and an illegal one changes neither.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { journalPath } from "../../src/layout/state_paths.ts";
import type { JournalEvent } from "../../src/state/events.ts";
import { getSegment, JournalStateError } from "../../src/state/segment_state.ts";
import { PartitionLedger } from "../../src/tier/partition_ledger.ts";
import { copyFinishedEvent } from "../../src/state/events.ts";
import { factsOf, ID, phaseRig, recordCopied, recordDangling } from "./_phase_rig.ts";

Deno.test("ledger: an illegal event is refused; neither memory nor the journal changes", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1] = r.segments;
    const journal = () => readFile(journalPath(r.ledger.stateDir));
    /** Records `events`, expecting a refusal that leaves memory and journal as they were. */
    const refused = async (pattern: RegExp, ...events: JournalEvent[]) => {
      const state = r.ledger.state;
      const bytes = await journal();
      await assert.rejects(r.ledger.record(...events), (e) => {
        assert.ok(e instanceof JournalStateError, String(e));
        assert.match(e.message, pattern);
        return true;
      });
      assert.equal(r.ledger.state, state, "the state object is untouched");
      assert.deepEqual(await journal(), bytes, "nothing appended");
    };
    // A finished copy that never started.
    await refused(
      /illegal copy_finished/,
      copyFinishedEvent(s0.startOffset, 0n, await factsOf(s0), 1),
    );
    // A batch whose second event is illegal: the legal first one is not applied either.
    await refused(
      /illegal evicted event/,
      { type: "copy_started", segment: s1.startOffset, generation: 0n, at: 2 },
      { type: "evicted", segment: s1.startOffset, generation: 0n, at: 3 },
    );
    assert.equal(getSegment(r.ledger.state, 0n, s1.startOffset), undefined);
    // A floor that would move back.
    await recordCopied(r, s0);
    await r.ledger.record({ type: "floor", generation: 0n, tieredUpTo: s0.endOffset, at: 4 });
    await refused(/would move back/, { type: "floor", generation: 0n, tieredUpTo: 0n, at: 5 });
    // What a restart replays is what was in memory.
    const state = r.ledger.state;
    const reopened = await r.reopen();
    assert.deepEqual(reopened.state, state);
    assert.equal(getSegment(reopened.state, 0n, s1.startOffset), undefined);
  } finally {
    await r.cleanup();
  }
});

Deno.test("ledger: what is recorded survives a reopen, event for event", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2] = r.segments;
    await recordCopied(r, s0);
    await recordDangling(r, s1.startOffset, "reset");
    await r.ledger.record({ type: "floor", generation: 0n, tieredUpTo: s0.endOffset, at: 9 });
    await r.ledger.record({ type: "evicted", segment: s0.startOffset, generation: 0n, at: 10 });
    await r.ledger.record({ type: "generation", generation: 1n, at: 11 });
    await r.ledger.record({
      type: "copy_started",
      segment: s2.startOffset,
      generation: 1n,
      at: 12,
    });
    const state = r.ledger.state;
    const size = r.ledger.journalSize;
    await r.ledger.close();
    const again = await PartitionLedger.open(r.config.agent.state_dir, ID, r.keySpace);
    try {
      assert.deepEqual(again.state, state);
      assert.equal(again.journalSize, size);
      assert.equal(again.keys(s0.startOffset, 0n).log, r.ledger.keys(s0.startOffset, 0n).log);
    } finally {
      await again.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("ledger: compaction rewrites the journal smaller and keeps the state", async () => {
  const r = await phaseRig();
  try {
    const [s0, s1, s2] = r.segments;
    // Many events for few records: failed copies cleaned up and tried again.
    for (let i = 0; i < 20; i++) {
      await recordDangling(r, s1.startOffset, `attempt ${i}`);
      await r.ledger.record(
        {
          type: "delete_started",
          segment: s1.startOffset,
          generation: 0n,
          cause: "dangling",
          at: i,
        },
        { type: "delete_finished", segment: s1.startOffset, generation: 0n, at: i },
      );
    }
    await recordCopied(r, s0);
    await recordCopied(r, s2);
    await r.ledger.record({ type: "floor", generation: 0n, tieredUpTo: s0.endOffset, at: 30 });
    const state = r.ledger.state;
    const size = r.ledger.journalSize;
    await r.ledger.compact(r.clock.now());
    assert.ok(r.ledger.journalSize < size / 4, `${r.ledger.journalSize} of ${size} bytes`);
    assert.deepEqual(r.ledger.state, state);
    assert.deepEqual((await r.reopen()).state, state, "the compacted journal replays to it");
    // And it takes new events after compaction.
    await r.ledger.record({ type: "evicted", segment: s0.startOffset, generation: 0n, at: 31 });
    assert.equal((await r.reopen()).state.segments.get(0n)?.get(s0.startOffset)?.evicted, true);
  } finally {
    await r.cleanup();
  }
});

Deno.test("ledger: keys need an incarnation", async () => {
  const r = await phaseRig({ incarnation: false });
  try {
    assert.throws(() => r.ledger.keys(0n), /no incarnation recorded yet/);
  } finally {
    await r.cleanup();
  }
});
