// deletableRun: what total retention may choose from is the run of verified copies, oldest first,
// that no unsettled older segment interrupts (a copy started, a copy gone bad, a hole or a
// dangling cleanup the broker can still fill), and none above the floor.
import assert from "node:assert/strict";
import fc from "fast-check";
import { SEGMENT_STATES, type SegmentRecord } from "../../../src/state/segment_record.ts";
import { deletableRun } from "../../../src/tier/phases/retention.ts";

const facts = (end: bigint) => ({
  endOffset: end,
  size: 100,
  indexSize: 16,
  startTimestamp: 0n,
  endTimestamp: 0n,
  maxTimestamp: 0n,
  checksum: 0n,
});

/** A chain of records of consecutive 10-offset segments, in any states, some local. */
const chainArb = fc.array(
  fc.record({
    state: fc.constantFrom(...SEGMENT_STATES),
    cause: fc.constantFrom("retention" as const, "dangling" as const),
    local: fc.boolean(),
  }),
  { maxLength: 12 },
).map((rows) =>
  rows.map((row, i) => {
    const start = BigInt(i * 10);
    const base = { start, generation: 0n, since: 0, evicted: !row.local };
    let r: SegmentRecord;
    switch (row.state) {
      case "COPY_SEGMENT_FINISHED":
        r = { ...base, state: row.state, meta: facts(start + 9n) };
        break;
      case "DELETE_SEGMENT_STARTED":
      case "DELETE_SEGMENT_FINISHED":
        r = row.cause === "retention"
          ? { ...base, state: row.state, deleteCause: "retention", meta: facts(start + 9n) }
          : { ...base, state: row.state, deleteCause: "dangling", danglingReason: "gone" };
        break;
      case "DANGLING":
        r = { ...base, state: row.state, danglingReason: "gone" };
        break;
      case "HOLE":
        r = { ...base, state: row.state, holeReason: "missing" };
        break;
      default:
        r = { ...base, state: row.state };
    }
    return { r, local: row.local };
  })
);

/** Whether a record leaves the chain settled for retention to pass over it. */
function settled(r: SegmentRecord, local: boolean): boolean {
  if (r.state === "LOST_BEFORE_UPLOAD") return true;
  if (r.state === "HOLE") return !local;
  if (r.state === "DELETE_SEGMENT_STARTED" || r.state === "DELETE_SEGMENT_FINISHED") {
    return r.deleteCause === "retention" || !local;
  }
  return false;
}

Deno.test("deletableRun is the verified copies before the first unsettled segment, up to the floor", () => {
  fc.assert(
    fc.property(chainArb, fc.integer({ min: -1, max: 130 }), (chain, floorN) => {
      const floor = BigInt(floorN);
      const local = new Set(chain.filter((c) => c.local).map((c) => c.r.start));
      const got = deletableRun(chain.map((c) => c.r), floor, local).map((r) => r.start);
      // The model: walk oldest first, take finished copies at or under the floor, pass over
      // settled records, stop at anything else.
      const want: bigint[] = [];
      for (const { r, local: isLocal } of chain) {
        if (r.state === "COPY_SEGMENT_FINISHED") {
          if (r.meta.endOffset > floor) break;
          want.push(r.start);
        } else if (!settled(r, isLocal)) break;
      }
      assert.deepStrictEqual(got, want);
      // What it implies: nothing chosen lies after an unsettled segment or above the floor.
      for (const start of got) {
        const before = chain.filter((c) => c.r.start < start);
        assert.ok(
          before.every((c) => c.r.state === "COPY_SEGMENT_FINISHED" || settled(c.r, c.local)),
        );
      }
    }),
    { numRuns: 500 },
  );
});
