// Parsing a command's flags (the options every command shares, parseArgs' errors as usage
// errors) and small helpers turning flags into typed values with errors that name the flag.
import { parseArgs, type ParseArgsOptionsConfig } from "node:util";
import { parseSize } from "../config/units.ts";

/** A bad command line; the message names the flag and the value. Exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** Options every command understands. */
export const COMMON_OPTIONS = {
  config: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** Parses a command's flags, turning parseArgs' errors into usage errors. */
export function parseFlags(
  args: string[],
  options: ParseArgsOptionsConfig,
  allowPositionals = false,
): { values: Record<string, string | boolean | undefined>; positionals: string[] } {
  try {
    const r = parseArgs({ args, options: { ...COMMON_OPTIONS, ...options }, allowPositionals });
    return {
      values: r.values as Record<string, string | boolean | undefined>,
      positionals: r.positionals,
    };
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** Reads a required flag. */
export function required(values: Record<string, unknown>, flag: string): string {
  const v = values[flag];
  if (typeof v !== "string" || v === "") throw new UsageError(`missing --${flag}`);
  return v;
}

/** Parses a non-negative integer flag (ids, counts). */
export function intFlag(values: Record<string, unknown>, flag: string, fallback?: number): number {
  const v = values[flag];
  if (v === undefined) {
    if (fallback === undefined) throw new UsageError(`missing --${flag}`);
    return fallback;
  }
  if (typeof v !== "string" || !/^\d+$/.test(v) || !Number.isSafeInteger(Number(v))) {
    throw new UsageError(`--${flag} must be a non-negative integer, got ${JSON.stringify(v)}`);
  }
  return Number(v);
}

/** Parses a size flag such as "64 MiB" or "1048576". */
export function sizeFlag(values: Record<string, unknown>, flag: string, fallback?: number): number {
  const v = values[flag];
  if (v === undefined) {
    if (fallback === undefined) throw new UsageError(`missing --${flag}`);
    return fallback;
  }
  try {
    const n = parseSize(String(v));
    if (!Number.isFinite(n) || n <= 0) throw new Error("must be a positive size");
    return n;
  } catch (err) {
    throw new UsageError(`--${flag}: ${(err as Error).message} (got ${JSON.stringify(v)})`);
  }
}
