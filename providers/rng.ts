// A small seeded PRNG, so fault injection and jitter replay exactly from a seed.

/**
 * A deterministic generator of numbers in [0, 1) from a 32-bit seed (mulberry32).
 * @example
 * const rng = seededRandom(42);
 * rng(); // the same sequence on every run
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
