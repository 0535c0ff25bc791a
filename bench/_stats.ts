// Small helpers every benchmark uses: medians, progress lines, sizes (the seeded PRNG is
// ../src/base/rng.ts).

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

/**
 * `TIERD_BENCH_SEGMENT_MIB` as bytes, or undefined when unset: the segment size a smoke run
 * uses instead of the real one (the upload and read benchmarks), to check that a benchmark works
 * end to end in seconds. Figures measured so are not comparable and say so.
 * @throws {Error} when it is set to something other than a positive number
 */
export function smokeSegmentSize(): number | undefined {
  const raw = Deno.env.get("TIERD_BENCH_SEGMENT_MIB");
  if (raw === undefined || raw === "") return undefined;
  const mib = Number(raw);
  if (!Number.isFinite(mib) || mib <= 0) {
    throw new Error(`TIERD_BENCH_SEGMENT_MIB must be a positive number of MiB, got ${raw}`);
  }
  return Math.round(mib * MiB);
}

/** The segment size of a benchmark: {@link smokeSegmentSize} when set, else `real` bytes. */
export function benchSegmentSize(real: number): number {
  return smokeSegmentSize() ?? real;
}
