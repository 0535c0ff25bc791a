// The resident-memory guard: it asks for a collection only when read memory has come back and
// the agent is resident beyond its idle size plus the read budget — never on a steady load that
// stays under it, and at most once per quarter of the budget given back.
import assert from "node:assert/strict";
import fc from "fast-check";
import { ResidentGuard } from "../../src/runtime/memory.ts";

function guarded(allowance: number, rss: number) {
  const at = { rss, collections: 0, told: 0 };
  const guard = new ResidentGuard(allowance, {
    rss: () => at.rss,
    collect: () => at.collections++,
    collected: () => at.told++,
  });
  return { at, guard };
}

Deno.test("the guard collects when reads gave back a quarter of the budget and the agent is over idle plus the budget", () => {
  const { at, guard } = guarded(400, 1000);
  at.rss = 1500;
  guard.released(99);
  assert.equal(at.collections, 0, "less than a quarter back: not looked at");
  guard.released(1);
  assert.equal(at.collections, 1);
  at.rss = 1400;
  guard.released(100);
  assert.equal(at.collections, 1, "at idle plus the budget: within the promise");
  guard.settle(); // idle is 1400 now
  at.rss = 1700;
  guard.released(100);
  assert.equal(at.collections, 1, "under the new idle size plus the budget");
  at.rss = 1801;
  guard.released(100);
  assert.equal(at.collections, 2);
  assert.equal(guard.collections, 2);
  assert.equal(at.told, 2, "each collection is counted (the metric)");
});

Deno.test("the guard collects exactly when a quarter has come back since the last look and the agent is over (property)", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          bytes: fc.integer({ min: 0, max: 300 }),
          rss: fc.integer({ min: 0, max: 3000 }),
        }),
        { maxLength: 40 },
      ),
      (steps) => {
        const { at, guard } = guarded(400, 1000);
        let back = 0;
        let expected = 0;
        for (const s of steps) {
          at.rss = s.rss;
          guard.released(s.bytes);
          back += s.bytes;
          if (back >= 100) {
            back = 0;
            if (s.rss > 1400) expected++;
          }
          assert.equal(at.collections, expected);
        }
      },
    ),
    { numRuns: 200 },
  );
});
