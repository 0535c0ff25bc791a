// The lifecycle reducer: it accepts exactly the transitions of docs/architecture.md,
// "Segment lifecycle" (checked against an independent model), and compaction snapshots fold
// back to the same state.
import assert from "node:assert/strict";
import fc from "fast-check";
import { concatBytes } from "../../src/base/bytes.ts";
import { initHashes } from "../../src/hash.ts";
import type { JournalEvent } from "../../src/state/events.ts";
import { decodeRecords, encodeRecord } from "../../src/state/journal.ts";
import {
  applyEvent,
  checkEvent,
  emptyState,
  fold,
  getSegment,
  JournalStateError,
  type PartitionState,
  segmentsOf,
  snapshotEvents,
} from "../../src/state/segment_state.ts";
import { choice, concretize, legalEvents, LifecycleModel, U64_MAX } from "./_arbitraries.ts";

await initHashes();

const meta = {
  endOffset: 999n,
  size: 4096,
  indexSize: 160,
  startTimestamp: 10n,
  endTimestamp: 20n,
  maxTimestamp: 21n,
  checksum: 0x0123456789abcdef0123456789abcdefn,
};
const id = { segment: 0n, generation: 0n };

function stateError(fn: () => unknown): JournalStateError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof JournalStateError, `expected JournalStateError, got ${err}`);
    return err;
  }
  assert.fail("expected a JournalStateError");
}

Deno.test("the reducer accepts exactly the transitions the model allows (property, 1500 runs)", () => {
  fc.assert(
    fc.property(
      fc.bigInt({ min: 0n, max: U64_MAX - 10_000n }),
      fc.array(choice(), { maxLength: 80, size: "max" }),
      (base, choices) => {
        const model = new LifecycleModel();
        let state = emptyState();
        for (const c of choices) {
          const event = concretize(model, c, base);
          if (model.legal(event)) {
            state = applyEvent(state, event);
            model.apply(event);
          } else {
            const before = state;
            const err = stateError(() => applyEvent(state, event));
            assert.equal(err.event, event);
            if ("segment" in event) {
              assert.equal(err.segment, event.segment);
              assert.equal(err.from, model.stateOf(event.generation, event.segment));
              assert.match(err.message, new RegExp(`segment ${event.segment} `));
            }
            assert.equal(state, before);
          }
          assert.equal(state.generation, model.generation);
          assert.equal(state.floor, model.floor);
          assert.equal(state.incarnation, model.incarnation);
          for (const [key, m] of model.segments) {
            const [g, s] = key.split(":").map(BigInt);
            const r = getSegment(state, g, s);
            assert.equal(r?.state, m.state, key);
            assert.equal(r?.evicted, m.evicted, key);
          }
          const count = [...state.segments.values()].reduce((n, m) => n + m.size, 0);
          assert.equal(count, model.segments.size);
        }
      },
    ),
    { numRuns: 1500 },
  );
});

Deno.test("fold(snapshotEvents(fold(evs))) equals fold(evs) (property, 2000 runs)", () => {
  fc.assert(
    fc.property(legalEvents(), fc.maxSafeNat(), (events, at) => {
      const state = fold(events);
      const snapshot = snapshotEvents(state, at);
      assert.deepEqual(fold(snapshot), state);
      // What compaction writes must survive the journal's own encoding.
      const decoded = decodeRecords(concatRecords(snapshot));
      assert.deepEqual(decoded.events, snapshot);
      // A snapshot is never longer than the history it replaces, and is itself stable.
      assert.ok(snapshot.length <= events.length + 2);
      assert.deepEqual(snapshotEvents(fold(snapshot), at), snapshot);
    }),
    { numRuns: 2000 },
  );
});

Deno.test("applyEvent never changes the state it is given (property, 1000 runs)", () => {
  fc.assert(
    fc.property(legalEvents(), (events) => {
      const states: PartitionState[] = [emptyState()];
      for (const e of events) states.push(applyEvent(states[states.length - 1], e));
      for (let i = 0; i < states.length; i++) {
        assert.deepEqual(states[i], fold(events.slice(0, i)));
      }
    }),
    { numRuns: 1000 },
  );
});

function concatRecords(events: JournalEvent[]): Uint8Array {
  return concatBytes(events.map(encodeRecord));
}

Deno.test("a dangling copy is cleaned up, then copied again, then adopted", () => {
  const s = fold([
    { type: "incarnation", incarnation: 5n, device: 1, inode: 2, at: 1 },
    { type: "copy_started", ...id, at: 10 },
    { type: "multipart_started", ...id, key: "p/0.log", uploadId: "up-1", at: 11 },
    { type: "dangling", ...id, reason: "connection reset", at: 12 },
    { type: "delete_started", ...id, cause: "dangling", at: 13 },
    { type: "dangling", ...id, reason: "abort failed", at: 14 },
  ]);
  assert.deepEqual(getSegment(s, 0n, 0n), {
    start: 0n,
    generation: 0n,
    state: "DANGLING",
    since: 14,
    evicted: false,
    uploadId: "up-1",
    multipartKey: "p/0.log",
    danglingReason: "abort failed",
  });
  const cleaned = fold([
    { type: "delete_started", ...id, cause: "dangling", at: 15 },
    { type: "delete_finished", ...id, at: 16 },
  ], s);
  assert.equal(getSegment(cleaned, 0n, 0n)?.state, "DELETE_SEGMENT_FINISHED");
  assert.equal(getSegment(cleaned, 0n, 0n)?.uploadId, undefined);
  const retried = fold([
    { type: "copy_started", ...id, at: 17 },
    { type: "dangling", ...id, reason: "timeout", at: 18 },
    { type: "copy_finished", ...id, ...meta, at: 19 }, // adopted: the object was complete
  ], cleaned);
  assert.deepEqual(getSegment(retried, 0n, 0n), {
    start: 0n,
    generation: 0n,
    state: "COPY_SEGMENT_FINISHED",
    since: 19,
    evicted: false,
    meta,
  });
});

Deno.test("eviction and retention: evicted only once, only after a verified copy", () => {
  const started = fold([{ type: "copy_started", ...id, at: 1 }]);
  const early = stateError(() => applyEvent(started, { type: "evicted", ...id, at: 2 }));
  assert.equal(early.from, "COPY_SEGMENT_STARTED");
  assert.match(early.message, /segment 0 \(generation 0\) in state COPY_SEGMENT_STARTED/);

  const evicted = fold([
    { type: "copy_finished", ...id, ...meta, at: 2 },
    { type: "evicted", ...id, at: 3 },
  ], started);
  assert.equal(getSegment(evicted, 0n, 0n)?.evicted, true);
  stateError(() => applyEvent(evicted, { type: "evicted", ...id, at: 4 }));
  // A retention delete is not a dangling cleanup: it cannot go DANGLING, nor be copied again.
  const deleting = applyEvent(evicted, {
    type: "delete_started",
    ...id,
    cause: "retention",
    at: 5,
  });
  stateError(() => applyEvent(deleting, { type: "dangling", ...id, reason: "x", at: 6 }));
  const deleted = applyEvent(deleting, { type: "delete_finished", ...id, at: 6 });
  assert.deepEqual(getSegment(deleted, 0n, 0n)?.meta, meta);
  const again = stateError(() => applyEvent(deleted, { type: "copy_started", ...id, at: 7 }));
  assert.equal(again.from, "DELETE_SEGMENT_FINISHED");
  assert.throws(
    () => checkEvent(deleted, { type: "copy_started", ...id, at: 7 }),
    JournalStateError,
  );
});

Deno.test("generations: a purge keeps old records, resets the floor, takes copies only in the new one", () => {
  const s = fold([
    { type: "copy_started", ...id, at: 1 },
    { type: "copy_finished", ...id, ...meta, at: 2 },
    { type: "floor", generation: 0n, tieredUpTo: 999n, at: 3 },
    { type: "generation", generation: 1n, at: 4 },
  ]);
  assert.equal(s.floor, -1n);
  assert.equal(s.generation, 1n);
  assert.equal(getSegment(s, 0n, 0n)?.state, "COPY_SEGMENT_FINISHED");
  assert.deepEqual(segmentsOf(s), []);
  assert.deepEqual(segmentsOf(s, 0n).map((r) => r.start), [0n]);
  // Old-generation objects are still deleted by retention.
  const t = applyEvent(s, { type: "delete_started", ...id, cause: "retention", at: 5 });
  assert.equal(getSegment(t, 0n, 0n)?.state, "DELETE_SEGMENT_STARTED");
  stateError(() => applyEvent(s, { type: "copy_started", ...id, at: 5 }));
  stateError(() => applyEvent(s, { type: "copy_started", segment: 0n, generation: 2n, at: 5 }));
  stateError(() => applyEvent(s, { type: "generation", generation: 0n, at: 5 }));
  stateError(() => applyEvent(s, { type: "floor", generation: 0n, tieredUpTo: 2000n, at: 5 }));
  const floored = applyEvent(s, { type: "floor", generation: 1n, tieredUpTo: 50n, at: 5 });
  const back = stateError(() =>
    applyEvent(floored, { type: "floor", generation: 1n, tieredUpTo: 49n, at: 6 })
  );
  assert.equal(back.from, "PARTITION");
});

Deno.test("a recreated partition directory (new incarnation) starts from scratch", () => {
  const s = fold([
    { type: "incarnation", incarnation: 1n, device: 1, inode: 10, at: 1 },
    { type: "generation", generation: 3n, at: 2 },
    { type: "copy_started", segment: 0n, generation: 3n, at: 3 },
    { type: "incarnation", incarnation: 1n, device: 1, inode: 10, at: 4 }, // restated: no change
  ]);
  assert.equal(getSegment(s, 3n, 0n)?.state, "COPY_SEGMENT_STARTED");
  const t = applyEvent(s, { type: "incarnation", incarnation: 2n, device: 1, inode: 11, at: 5 });
  assert.deepEqual(t, {
    incarnation: 2n,
    device: 1,
    inode: 11,
    generation: 0n,
    floor: -1n,
    segments: new Map(),
  });
});

Deno.test("lost_before_upload records a gap and is final", () => {
  const s = fold([
    { type: "lost_before_upload", segment: 100n, generation: 0n, endOffset: 199n, at: 1 },
    { type: "lost_before_upload", segment: 200n, generation: 0n, at: 2 },
  ]);
  assert.equal(getSegment(s, 0n, 100n)?.lostEndOffset, 199n);
  assert.equal(getSegment(s, 0n, 200n)?.state, "LOST_BEFORE_UPLOAD");
  stateError(() => applyEvent(s, { type: "copy_started", segment: 100n, generation: 0n, at: 3 }));
  assert.deepEqual(fold(snapshotEvents(s, 0)), s);
});

Deno.test("a verified copy found bad while its local files remain goes DANGLING; an evicted one cannot", () => {
  const finished = fold([
    { type: "copy_started", ...id, at: 1 },
    { type: "copy_finished", ...id, ...meta, at: 2 },
  ]);
  const again = applyEvent(finished, {
    type: "dangling",
    ...id,
    reason: "verify: object missing",
    at: 3,
  });
  assert.equal(getSegment(again, 0n, 0n)?.state, "DANGLING");
  assert.equal(getSegment(again, 0n, 0n)?.danglingReason, "verify: object missing");
  const evicted = applyEvent(finished, { type: "evicted", ...id, at: 3 });
  const err = stateError(() =>
    applyEvent(evicted, { type: "dangling", ...id, reason: "x", at: 4 })
  );
  assert.equal(err.from, "COPY_SEGMENT_FINISHED");
});

Deno.test("a hole keeps its range and reason, and settles by a copy or a recorded loss", () => {
  const s = fold([
    { type: "incarnation", incarnation: 7n, device: 1, inode: 2, at: 0 },
    { type: "hole", segment: 100n, generation: 0n, endOffset: 199n, reason: "k.log: gone", at: 1 },
  ]);
  const hole = getSegment(s, 0n, 100n)!;
  assert.equal(hole.state, "HOLE");
  assert.equal(hole.lostEndOffset, 199n);
  assert.equal(hole.holeReason, "k.log: gone");
  assert.deepEqual(fold(snapshotEvents(s, 0)), s);
  // Recorded once: a second hole over it is refused.
  stateError(() =>
    applyEvent(s, { type: "hole", segment: 100n, generation: 0n, reason: "again", at: 2 })
  );
  const copied = fold([
    { type: "copy_started", segment: 100n, generation: 0n, at: 2 },
    { type: "copy_finished", segment: 100n, generation: 0n, ...meta, at: 3 },
  ], s);
  assert.equal(getSegment(copied, 0n, 100n)?.state, "COPY_SEGMENT_FINISHED");
  assert.equal(getSegment(copied, 0n, 100n)?.holeReason, undefined);
  const lost = applyEvent(s, {
    type: "lost_before_upload",
    segment: 100n,
    generation: 0n,
    endOffset: 199n,
    at: 2,
  });
  assert.equal(getSegment(lost, 0n, 100n)?.state, "LOST_BEFORE_UPLOAD");
});

Deno.test("retirement: never the current pair; kept across a new incarnation; a sweep drops its records", () => {
  const s = fold([
    { type: "incarnation", incarnation: 7n, device: 1, inode: 2, at: 0 },
    { type: "copy_started", ...id, at: 1 },
    { type: "copy_finished", ...id, ...meta, at: 2 },
    { type: "generation", generation: 1n, at: 3 },
    { type: "retired", incarnation: 7n, generation: 0n, reason: "purged", at: 4 },
  ]);
  stateError(() =>
    applyEvent(s, { type: "retired", incarnation: 7n, generation: 1n, reason: "x", at: 5 })
  );
  assert.deepEqual([...s.retired!.keys()], ["0000000000000007-0"]);
  assert.deepEqual(fold(snapshotEvents(s, 9)), s);
  // A new incarnation resets the segments but keeps what is retired.
  const recreated = fold([
    { type: "incarnation", incarnation: 9n, device: 1, inode: 3, at: 6 },
    { type: "retired", incarnation: 7n, generation: 1n, reason: "recreated", at: 6 },
  ], s);
  assert.deepEqual([...recreated.retired!.keys()].sort(), [
    "0000000000000007-0",
    "0000000000000007-1",
  ]);
  // Swept: gone from the retired list; for the current incarnation its records go too.
  const swept = applyEvent(s, { type: "retired_swept", incarnation: 7n, generation: 0n, at: 7 });
  assert.equal(swept.retired, undefined);
  assert.equal(swept.segments.has(0n), false);
  stateError(() =>
    applyEvent(swept, { type: "retired_swept", incarnation: 7n, generation: 0n, at: 8 })
  );
  // Becoming current again un-retires it: the current pair is never swept.
  const back = applyEvent(recreated, {
    type: "incarnation",
    incarnation: 7n,
    device: 1,
    inode: 4,
    at: 9,
  });
  assert.deepEqual([...back.retired!.keys()], ["0000000000000007-1"]);
});
