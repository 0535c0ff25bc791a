// Small helpers every benchmark uses: medians, progress lines, sizes (the seeded PRNG is
// ../providers/rng.ts).

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Prints one progress line on stderr, prefixed with the benchmark's name. */
export function progress(bench: string, message: string): void {
  console.error(`[bench ${bench}] ${message}`);
}

/** 2^20. */
export const MiB = 1 << 20;

/** Rounds to `digits` decimals (for JSON). */
export function round(value: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
