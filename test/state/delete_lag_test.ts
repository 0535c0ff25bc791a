// The remote-deletion lag of a partition, from its journal state and what retention chose: a
// deletion counts from the moment tierd decides it until its objects are gone, and the oldest
// one's due time follows its grace (delete_grace, orphan_grace plus a sweep interval, none for
// a dangling copy).
import assert from "node:assert/strict";
import { deleteLag } from "../../src/state/delete_lag.ts";
import type { JournalEvent } from "../../src/state/events.ts";
import { copyFinishedEvent } from "../../src/state/events.ts";
import { fold } from "../../src/state/segment_state.ts";

const T0 = 1_750_000_000_000;
const HOUR = 3_600_000;
const INC = 0xabcn;
const sweep = { orphanGraceMs: 24 * HOUR, orphanSweepIntervalMs: HOUR };

/** Events that journal segment `start` of `generation` as copied, with a `.log` of `size`. */
function copied(start: bigint, generation: bigint, size: number, at: number): JournalEvent[] {
  const facts = {
    endOffset: start + 9n,
    size,
    indexSize: 16,
    startTimestamp: 1n,
    endTimestamp: 2n,
    maxTimestamp: 2n,
    checksum: 7n,
  };
  return [
    { type: "copy_started", segment: start, generation, at },
    copyFinishedEvent(start, generation, facts, at),
  ];
}

Deno.test("nothing to delete: no lag, nothing due", () => {
  const state = fold([
    { type: "incarnation", incarnation: INC, device: 1, inode: 2, at: T0 },
    ...copied(0n, 0n, 100, T0),
  ]);
  assert.deepEqual(deleteLag(state, sweep), { segments: 0, bytes: 0 });
});

Deno.test("retention deletions count from their choice until delete_finished", () => {
  const events: JournalEvent[] = [
    { type: "incarnation", incarnation: INC, device: 1, inode: 2, at: T0 },
    ...copied(0n, 0n, 100, T0),
    ...copied(10n, 0n, 200, T0),
    ...copied(20n, 0n, 400, T0),
  ];
  // Chosen, waiting for delete_grace: counted, due when the grace ends.
  const chosen = [
    { generation: 0n, start: 0n, size: 100, dueAt: T0 + 5 * HOUR },
    { generation: 0n, start: 10n, size: 200, dueAt: T0 + 6 * HOUR },
  ];
  assert.deepEqual(deleteLag(fold(events), { ...sweep, chosen }), {
    segments: 2,
    bytes: 300,
    oldestDueAt: T0 + 5 * HOUR,
  });
  // Its deletion journaled (a store failure left it started): counted once, due since then.
  events.push({
    type: "delete_started",
    segment: 0n,
    generation: 0n,
    cause: "retention",
    at: T0 + 7 * HOUR,
  });
  assert.deepEqual(deleteLag(fold(events), { ...sweep, chosen }), {
    segments: 2,
    bytes: 300,
    oldestDueAt: T0 + 6 * HOUR,
  });
  // Finished: gone from the lag, even while the pass's list still names it.
  events.push({ type: "delete_finished", segment: 0n, generation: 0n, at: T0 + 8 * HOUR });
  assert.deepEqual(deleteLag(fold(events), { ...sweep, chosen }), {
    segments: 1,
    bytes: 200,
    oldestDueAt: T0 + 6 * HOUR,
  });
});

Deno.test("a dangling copy counts with its local size until cleaned up, due at once", () => {
  const events: JournalEvent[] = [
    { type: "incarnation", incarnation: INC, device: 1, inode: 2, at: T0 },
    { type: "copy_started", segment: 0n, generation: 0n, at: T0 },
    { type: "dangling", segment: 0n, generation: 0n, reason: "timeout", at: T0 + HOUR },
  ];
  const localSize = (start: bigint) => (start === 0n ? 500 : undefined);
  assert.deepEqual(deleteLag(fold(events), { ...sweep, localSize }), {
    segments: 1,
    bytes: 500,
    oldestDueAt: T0 + HOUR,
  });
  // The broker's files gone too: still owed to the store, its bytes unknown.
  assert.deepEqual(deleteLag(fold(events), sweep), {
    segments: 1,
    bytes: 0,
    oldestDueAt: T0 + HOUR,
  });
  events.push(
    { type: "delete_started", segment: 0n, generation: 0n, cause: "dangling", at: T0 + 2 * HOUR },
    { type: "delete_finished", segment: 0n, generation: 0n, at: T0 + 2 * HOUR },
  );
  assert.deepEqual(deleteLag(fold(events), { ...sweep, localSize }), { segments: 0, bytes: 0 });
});

Deno.test("a retired generation's copies count until swept, due after orphan_grace and a sweep interval", () => {
  const retiredAt = T0 + HOUR;
  const events: JournalEvent[] = [
    { type: "incarnation", incarnation: INC, device: 1, inode: 2, at: T0 },
    ...copied(0n, 0n, 100, T0),
    ...copied(10n, 0n, 200, T0),
    { type: "generation", generation: 1n, at: retiredAt },
    { type: "retired", incarnation: INC, generation: 0n, reason: "purged", at: retiredAt },
    ...copied(0n, 1n, 50, retiredAt), // the new generation's copy is not owed
  ];
  assert.deepEqual(deleteLag(fold(events), sweep), {
    segments: 2,
    bytes: 300,
    oldestDueAt: retiredAt + 25 * HOUR,
  });
  // Sweeps off: still owed, never due.
  assert.equal(
    deleteLag(fold(events), { ...sweep, orphanSweepIntervalMs: Infinity }).oldestDueAt,
    Infinity,
  );
  events.push({ type: "retired_swept", incarnation: INC, generation: 0n, at: T0 + 30 * HOUR });
  assert.deepEqual(deleteLag(fold(events), sweep), { segments: 0, bytes: 0 });
});

Deno.test("a recreated topic's old incarnation is due for its sweep though its records are gone", () => {
  const at = T0 + 2 * HOUR;
  const state = fold([
    { type: "incarnation", incarnation: INC, device: 1, inode: 2, at: T0 },
    ...copied(0n, 0n, 100, T0),
    { type: "incarnation", incarnation: INC + 1n, device: 1, inode: 3, at },
    { type: "retired", incarnation: INC, generation: 0n, reason: "recreated", at },
  ]);
  assert.deepEqual(deleteLag(state, sweep), {
    segments: 0,
    bytes: 0,
    oldestDueAt: at + 25 * HOUR,
  });
});

Deno.test("a choice from before a purge no longer counts", () => {
  const state = fold([
    { type: "incarnation", incarnation: INC, device: 1, inode: 2, at: T0 },
    ...copied(0n, 0n, 100, T0),
    { type: "generation", generation: 1n, at: T0 },
    ...copied(0n, 1n, 100, T0),
  ]);
  const chosen = [{ generation: 0n, start: 0n, size: 100, dueAt: T0 }];
  assert.deepEqual(deleteLag(state, { ...sweep, chosen }), { segments: 0, bytes: 0 });
});
