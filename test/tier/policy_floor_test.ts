import assert from "node:assert/strict";
import fc from "fast-check";
import { computeFloor, floorBeforeFirstCopy, type FloorSegment } from "../../src/tier/policy.ts";

/** Contiguous chain of segments with random statuses. */
const chain = fc.array(
  fc.record({
    len: fc.integer({ min: 1, max: 50 }),
    status: fc.constantFrom("copied", "lost", "local"),
  }),
  { maxLength: 20 },
).map((parts) => {
  let start = 0n;
  return parts.map(({ len, status }) => {
    const s: FloorSegment = {
      start,
      endOffset: status === "local" ? undefined : start + BigInt(len) - 1n,
      copied: status === "copied",
      lost: status === "lost",
    };
    start += BigInt(len);
    return s;
  });
});

Deno.test("floor is the end of the longest copied-or-lost prefix, in any input order", () => {
  fc.assert(
    fc.property(chain, fc.infiniteStream(fc.nat()), (segments, seeds) => {
      let expected = -1n;
      for (const s of segments) {
        if (!(s.copied || s.lost)) break;
        expected = s.endOffset!;
      }
      const shuffled = [...segments].sort(() => (seeds.next().value % 3) - 1);
      assert.equal(computeFloor(shuffled, -1n), expected);
    }),
    { numRuns: 500 },
  );
});

Deno.test("floor never moves backwards and stops at an unrecorded hole", () => {
  const segs: FloorSegment[] = [
    { start: 0n, endOffset: 9n, copied: true, lost: false },
    { start: 20n, endOffset: 29n, copied: true, lost: false }, // 10..19 missing, not recorded
  ];
  assert.equal(computeFloor(segs, -1n), 9n);
  assert.equal(computeFloor(segs, 15n), 15n);
});

Deno.test("floor never crosses offsets before the first record that nothing covers", () => {
  // Offsets 0..12 were deleted by the broker before their copy and the loss is not recorded
  // yet (the bucket could not be asked): the copy of 13..25 must not carry the floor over them.
  const copied: FloorSegment[] = [{ start: 13n, endOffset: 25n, copied: true, lost: false }];
  assert.equal(computeFloor(copied, -1n), -1n);
  // Once 0..12 is recorded lost, or the floor starts at 12, it moves on.
  const lost: FloorSegment = { start: 0n, endOffset: 12n, copied: false, lost: true };
  assert.equal(computeFloor([...copied, lost], -1n), 25n);
  assert.equal(computeFloor(copied, 12n), 25n);
});

Deno.test("a rebuilt floor starts right before the bucket's first copy, never below the current one", () => {
  assert.equal(floorBeforeFirstCopy([300n, 100n, 200n], -1n), 99n);
  assert.equal(floorBeforeFirstCopy([0n, 100n], -1n), -1n, "copies from offset 0: nothing below");
  assert.equal(floorBeforeFirstCopy([100n], 250n), 250n, "never moves back");
  assert.equal(floorBeforeFirstCopy([], 7n), 7n, "no copy: as it was");
});
