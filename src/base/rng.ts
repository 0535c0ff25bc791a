// A small seeded PRNG (mulberry32), so fault injection, jitter, generated segments and
// benchmark workloads replay exactly from a seed. The one generator of the repository.

/**
 * A deterministic generator of unsigned 32-bit integers from a 32-bit seed (mulberry32).
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const a = seededUint32(7);
 * const b = seededUint32(7);
 * assert.deepEqual([a(), a(), a()], [b(), b(), b()]); // the same sequence on every run
 * ```
 */
export function seededUint32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/**
 * A deterministic generator of numbers in [0, 1) from a 32-bit seed: {@link seededUint32}'s
 * integers over 2^32.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const rng = seededRandom(42);
 * const x = rng();
 * assert.ok(x >= 0 && x < 1);
 * assert.equal(seededRandom(42)(), x); // the same sequence on every run
 * ```
 */
export function seededRandom(seed: number): () => number {
  const next = seededUint32(seed);
  return () => next() / 4294967296;
}
