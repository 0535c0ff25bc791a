// The one seeded PRNG (src/base/rng.ts): its sequences are pinned, because generated segments,
// fault schedules and benchmark workloads replay from them.
import assert from "node:assert/strict";
import { seededRandom, seededUint32 } from "../../src/base/rng.ts";

Deno.test("rng: mulberry32 integers are pinned for a seed", () => {
  const next = seededUint32(42);
  assert.deepEqual([next(), next(), next()], [2581720956, 1925393290, 3661312704]);
});

Deno.test("rng: seededRandom is the same sequence over 2^32, in [0, 1)", () => {
  const ints = seededUint32(1);
  const floats = seededRandom(1);
  for (let i = 0; i < 1000; i++) {
    const f = floats();
    assert.equal(f, ints() / 2 ** 32);
    assert.ok(f >= 0 && f < 1);
  }
  const again = seededRandom(1);
  assert.equal(again(), 0.6270739405881613);
});
