// Human units in the config file: durations ("90 s", "2 h 30 m") and byte sizes ("64 MiB"),
// parsed into milliseconds and bytes, and formatted back for `tierd config show`.

/** A duration or size literal that could not be read; names the text and what was expected. */
export class UnitError extends Error {
  /** The text as written. */
  readonly text: string;
  /** What would have been accepted, phrased to follow "expected". */
  readonly expected: string;

  /**
   * @param text the offending literal
   * @param expected what would have been accepted
   */
  constructor(text: string, expected: string) {
    super(`${JSON.stringify(text)}: expected ${expected}`);
    this.name = "UnitError";
    this.text = text;
    this.expected = expected;
  }
}

/** What `parseDuration` accepts, for error messages. */
export const DURATION_EXPECTED =
  'a duration with a unit, like "250 ms", "90 s", "5 m", "2 h 30 m", "1 d", or "unlimited"';

/** What `parseSize` accepts, for error messages. */
export const SIZE_EXPECTED =
  'a size like "512 KiB", "64 MiB", "4 GiB", "1 MB", "100 B" (or a bare byte count), or "unlimited"';

const MS_PER: Record<string, number> = {};
for (
  const [ms, names] of [
    [1, ["ms", "msec", "msecs", "millisecond", "milliseconds"]],
    [1_000, ["s", "sec", "secs", "second", "seconds"]],
    [60_000, ["m", "min", "mins", "minute", "minutes"]],
    [3_600_000, ["h", "hr", "hrs", "hour", "hours"]],
    [86_400_000, ["d", "day", "days"]],
    [604_800_000, ["w", "week", "weeks"]],
  ] as const
) {
  for (const name of names) MS_PER[name] = ms;
}

const UNLIMITED = new Set(["unlimited", "none"]);

/**
 * Parses a duration into milliseconds.
 *
 * Accepts one or more `<integer> <unit>` terms, summed (`"2 h 30 m"`, `"2h30m"`), with units
 * ms, s, m, h, d, w (and their long forms: sec, min, hour, day, week, ...). `"unlimited"` and
 * `"none"` give `Infinity`. A bare number is refused (is `"90"` seconds or milliseconds?) except
 * `"0"`, which is unambiguous.
 *
 * @param text the duration as written in the config file
 * @returns milliseconds, a non-negative safe integer, or `Infinity`
 * @throws {UnitError} when the text is not a duration
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * assert.equal(parseDuration("1 m 30 s"), 90_000);
 * assert.equal(parseDuration("unlimited"), Infinity);
 * assert.throws(() => parseDuration("90"), UnitError); // seconds or milliseconds?
 * ```
 */
export function parseDuration(text: string): number {
  const t = text.trim().toLowerCase();
  if (UNLIMITED.has(t)) return Infinity;
  if (t === "0") return 0;
  if (/^\d+$/.test(t)) {
    throw new UnitError(text, `a unit after the number (${DURATION_EXPECTED})`);
  }
  const term = /(\d+)\s*([a-z]+)\s*/y;
  let total = 0;
  let pos = 0;
  while (pos < t.length) {
    term.lastIndex = pos;
    const m = term.exec(t);
    const per = m ? MS_PER[m[2]] : undefined;
    if (!m || per === undefined) throw new UnitError(text, DURATION_EXPECTED);
    total += Number(m[1]) * per;
    pos = term.lastIndex;
  }
  if (pos === 0) throw new UnitError(text, DURATION_EXPECTED);
  if (!Number.isSafeInteger(total)) throw new UnitError(text, "a duration below 285,000 years");
  return total;
}

const DURATION_UNITS: readonly [number, string][] = [
  [86_400_000, "d"],
  [3_600_000, "h"],
  [60_000, "m"],
  [1_000, "s"],
];

/**
 * Formats milliseconds as the duration text `parseDuration` reads back exactly: one term in the
 * largest unit that divides it (`"90 s"`, `"5 m"`, `"1 d"`), else milliseconds.
 *
 * @param ms milliseconds (rounded to an integer) or `Infinity`
 * @returns e.g. `"90 s"`, `"250 ms"`, `"0 s"`, `"unlimited"`
 */
export function formatDuration(ms: number): string {
  if (ms === Infinity) return "unlimited";
  if (!Number.isFinite(ms) || ms < 0) return String(ms);
  const n = Math.round(ms);
  if (n === 0) return "0 s";
  for (const [per, unit] of DURATION_UNITS) {
    if (n % per === 0) return `${n / per} ${unit}`;
  }
  return `${n} ms`;
}

const BYTES_PER = new Map<string, bigint>([
  ["", 1n],
  ["b", 1n],
  ["kb", 1000n],
  ["mb", 1000n ** 2n],
  ["gb", 1000n ** 3n],
  ["tb", 1000n ** 4n],
  ["pb", 1000n ** 5n],
  ["kib", 1024n],
  ["mib", 1024n ** 2n],
  ["gib", 1024n ** 3n],
  ["tib", 1024n ** 4n],
  ["pib", 1024n ** 5n],
]);

/**
 * Parses a byte size. Binary units (KiB, MiB, GiB, TiB, PiB) are powers of 1024; decimal units
 * (KB, MB, GB, TB, PB) powers of 1000; units are case-insensitive. A bare integer is a byte count.
 * A decimal fraction is allowed when the result is a whole number of bytes (`"1.5 GiB"`).
 * `"unlimited"` gives `Infinity`.
 *
 * @param text the size as written in the config file
 * @returns bytes, a non-negative safe integer, or `Infinity`
 * @throws {UnitError} when the text is not a size
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * assert.equal(parseSize("64 MiB"), 67_108_864);
 * assert.equal(parseSize("1.5 KB"), 1_500);
 * ```
 */
export function parseSize(text: string): number {
  const t = text.trim().toLowerCase();
  if (t === "unlimited") return Infinity;
  const m = /^(\d+)(?:\.(\d+))?\s*([a-z]*)$/.exec(t);
  const per = m ? BYTES_PER.get(m[3]) : undefined;
  if (!m || per === undefined) throw new UnitError(text, SIZE_EXPECTED);
  const fraction = m[2] ?? "";
  const scale = 10n ** BigInt(fraction.length);
  const scaled = BigInt(m[1] + fraction) * per;
  if (scaled % scale !== 0n) throw new UnitError(text, "a whole number of bytes");
  const bytes = scaled / scale;
  if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new UnitError(text, "a size below 8 PiB");
  }
  return Number(bytes);
}

const SIZE_UNITS: readonly [number, string][] = [
  [1024 ** 5, "PiB"],
  [1000 ** 5, "PB"],
  [1024 ** 4, "TiB"],
  [1000 ** 4, "TB"],
  [1024 ** 3, "GiB"],
  [1000 ** 3, "GB"],
  [1024 ** 2, "MiB"],
  [1000 ** 2, "MB"],
  [1024, "KiB"],
  [1000, "KB"],
];

/**
 * Formats bytes as the size text `parseSize` reads back exactly: the exact unit that gives the
 * smallest number (binary on a tie), else bytes.
 *
 * @param bytes a byte count (rounded to an integer) or `Infinity`
 * @returns e.g. `"64 MiB"`, `"1 MB"`, `"100 B"`, `"unlimited"`
 */
export function formatSize(bytes: number): string {
  if (bytes === Infinity) return "unlimited";
  if (!Number.isFinite(bytes) || bytes < 0) return String(bytes);
  const n = Math.round(bytes);
  if (n === 0) return "0 B";
  let best: [number, string] = [n, "B"];
  for (const [per, unit] of SIZE_UNITS) {
    if (n % per === 0 && n / per < best[0]) best = [n / per, unit];
  }
  return `${best[0]} ${best[1]}`;
}

/**
 * Formats bytes for people, rounded: `"1.2 GiB"`, `"340 KiB"`, `"17 B"` (status lines, `ls`).
 * Not for config files: use {@linkcode formatSize} where the text must read back exactly.
 */
export function humanSize(bytes: number): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let n = Math.max(0, bytes);
  let u = 0;
  while (n >= 1024 && u < units.length - 1) {
    n /= 1024;
    u++;
  }
  const text = u === 0 ? String(Math.round(n)) : n >= 100 ? n.toFixed(0) : n.toFixed(1);
  return `${text} ${units[u]}`;
}
