// A command's flags, declared once: the table each command exports is both what `parseArgs`
// (node:util) parses and what `tierd <command> --help` prints, so usage cannot drift from the
// flags. Parse errors become usage errors (exit 2); helpers turn flags into typed values with
// errors that name the flag.
import { parseArgs, type ParseArgsOptionsConfig } from "node:util";
import { parseSize } from "../config/units.ts";

/** A bad command line; the message names the flag and the value. Exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** One flag of a command. */
export interface FlagSpec {
  /** `string` takes a value (`--stream 1` or `--stream=1`); `boolean` does not. */
  type: "string" | "boolean";
  /** A one-letter alias (`-q`). */
  short?: string;
  /** The value's placeholder in usage (`F`, `N`, `SIZE`); string flags only. @default "V" */
  value?: string;
  /** What the flag does, one line; defaults and units included. */
  help: string;
  /** Shown without brackets in the synopsis; the command itself checks it. */
  required?: boolean;
}

/** A command: its name, what `tierd --help` and `tierd <name> --help` say, and its flags. */
export interface CommandSpec {
  /** The word after `tierd`. */
  name: string;
  /** One line for the command list of `tierd --help`. */
  summary: string;
  /**
   * What follows `tierd <name>` in the usage line, as groups never broken across lines
   * (`["check|show", "[--config F]"]`); built from the flags, in order, when omitted.
   */
  synopsis?: string[];
  /** What the command does, after the usage line; wrapped to the width, `\n\n` between paragraphs. */
  description?: string;
  /** Every flag but `--help`, which every command has. */
  flags: Record<string, FlagSpec>;
  /** Positional arguments allowed (`config check|show`). @default false */
  positionals?: boolean;
}

/** What a command gets: its flags by name, and positionals. */
export interface ParsedArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/** A command: its spec, and what it does with the parsed arguments (the exit code). */
export interface Command {
  spec: CommandSpec;
  run(args: ParsedArgs): Promise<number>;
}

/** `--config F`, for the commands that read a config file. */
export const CONFIG_FLAG: FlagSpec = {
  type: "string",
  value: "F",
  help: "the config file (default ./tierd.toml)",
};

/** The filter flags of `ls`, `restore` (and, required, `read`). */
export const PARTITION_FLAGS: Record<string, FlagSpec> = {
  stream: { type: "string", value: "S", help: "only this stream id" },
  topic: { type: "string", value: "T", help: "only this topic id" },
  partition: { type: "string", value: "P", help: "only this partition id" },
};

/** Which partitions the {@link PARTITION_FLAGS} select: undefined fields match any. */
export interface PartitionFilter {
  stream?: number;
  topic?: number;
  partition?: number;
}

/**
 * Reads `--stream`, `--topic` and `--partition` (each optional).
 * @throws {UsageError} for a value that is not a non-negative integer
 */
export function partitionFilter(values: Record<string, unknown>): PartitionFilter {
  return {
    stream: optionalIntFlag(values, "stream"),
    topic: optionalIntFlag(values, "topic"),
    partition: optionalIntFlag(values, "partition"),
  };
}

/** True when `filter` selects partition `id`. */
export function filterAccepts(
  filter: PartitionFilter,
  id: { stream: number; topic: number; partition: number },
): boolean {
  return (filter.stream === undefined || filter.stream === id.stream) &&
    (filter.topic === undefined || filter.topic === id.topic) &&
    (filter.partition === undefined || filter.partition === id.partition);
}

const HELP_FLAG: FlagSpec = { type: "boolean", short: "h", help: "print this help and exit" };

/**
 * Parses a command's arguments. `--help`/`-h` anywhere before `--` wins over everything else,
 * even a flag the command does not know: the caller prints the usage and does nothing else.
 *
 * @returns `"help"` when help was asked for, else the flags
 * @throws {UsageError} for an unknown flag, a missing value, a value given to a boolean flag, or
 *   a positional argument where none is allowed
 */
export function parseCommand(spec: CommandSpec, args: string[]): ParsedArgs | "help" {
  const end = args.indexOf("--");
  if ((end < 0 ? args : args.slice(0, end)).some((a) => a === "--help" || a === "-h")) {
    return "help";
  }
  const options: ParseArgsOptionsConfig = {};
  for (const [name, flag] of Object.entries(spec.flags)) {
    options[name] = flag.short ? { type: flag.type, short: flag.short } : { type: flag.type };
  }
  try {
    const r = parseArgs({ args, options, allowPositionals: spec.positionals ?? false });
    return {
      values: r.values as Record<string, string | boolean | undefined>,
      positionals: r.positionals,
    };
  } catch (err) {
    throw new UsageError(parseArgsMessage(err));
  }
}

/** parseArgs' message, first line only (the rest is advice about `--`). */
function parseArgsMessage(err: unknown): string {
  const code = (err as { code?: string }).code;
  const message = (err as Error).message.split("\n")[0];
  const quoted = /'([^']+)'/.exec(message)?.[1];
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && quoted) return `unknown flag ${quoted}`;
  if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL" && quoted) {
    return `unexpected argument ${JSON.stringify(quoted)}`;
  }
  return message.replace(/^Option '([^']+)'/, "flag $1").replace(/\.$/, "");
}

/** `[--config F]`, `--format iggy-0.8|iggy-0.9`: one flag as the synopsis shows it. */
function flagSynopsis(name: string, flag: FlagSpec): string {
  const text = flag.type === "string" ? `--${name} ${flag.value ?? "V"}` : `--${name}`;
  return flag.required ? text : `[${text}]`;
}

/** Joins groups into lines of at most `width` columns, continuation lines indented by `indent`. */
function wrap(groups: string[], first: string, indent: number, width = 100): string {
  const lines: string[] = [];
  let line = first;
  for (const group of groups) {
    if (line.length > indent && line.length + 1 + group.length > width) {
      lines.push(line);
      line = " ".repeat(indent) + group;
    } else {
      line += (line.length === first.length ? "" : " ") + group;
    }
  }
  lines.push(line);
  return lines.join("\n");
}

/** The synopsis groups of a spec: its own, or one per flag. */
export function synopsisOf(spec: CommandSpec): string[] {
  return spec.synopsis ??
    Object.entries(spec.flags).map(([name, flag]) => flagSynopsis(name, flag));
}

/** Usage text is wrapped to this many columns. */
const WIDTH = 96;

/** Re-wraps `text`'s paragraphs (separated by blank lines) to {@link WIDTH}, each line indented. */
function paragraphs(text: string, indent = 0): string {
  return text.split(/\n\s*\n/).map((p) =>
    wrap(p.split(/\s+/).filter((w) => w !== ""), " ".repeat(indent), indent, WIDTH)
  ).join("\n\n");
}

/**
 * The usage text `tierd <name> --help` prints: the usage line, the description, then every flag
 * with its placeholder and help.
 */
export function commandUsage(spec: CommandSpec): string {
  const head = `usage: tierd ${spec.name} `;
  const rows = [...Object.entries(spec.flags), ["help", HELP_FLAG] as const].map(
    ([name, flag]) => {
      const names = `${flag.short ? `-${flag.short}, ` : ""}--${name}` +
        (flag.type === "string" ? ` ${flag.value ?? "V"}` : "");
      return [names, flag.help + (flag.required ? " (required)" : "")] as const;
    },
  );
  const width = Math.max(...rows.map(([names]) => names.length));
  const flagLine = ([names, help]: readonly [string, string]) => {
    const first = `  ${names.padEnd(width)}  `;
    return wrap(help.split(" "), first, first.length, WIDTH);
  };
  return [
    wrap(synopsisOf(spec), head, head.length, WIDTH),
    ...(spec.description ? ["", paragraphs(spec.description)] : []),
    "",
    "flags:",
    ...rows.map(flagLine),
    "",
  ].join("\n");
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

/** Parses an optional non-negative integer flag: undefined when absent. */
export function optionalIntFlag(values: Record<string, unknown>, flag: string): number | undefined {
  return values[flag] === undefined ? undefined : intFlag(values, flag);
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
