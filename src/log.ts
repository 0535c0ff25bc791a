// Structured log lines (one JSON object per line on stderr), with secrets scrubbed from
// every line before it is written: a secret must never reach a log, whatever the caller passes.

import { type Clock, systemClock } from "../providers/clock.ts";
import { MIN_SCRUBBED_LENGTH } from "./config/secrets.ts";
export type LogLevel = "debug" | "info" | "warn" | "error";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type LogFields = Record<string, unknown>;

/** A logger that writes one structured line per event. */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line. */
  child(fields: LogFields): Logger;
}

export interface LoggerOptions {
  level?: LogLevel;
  /** Values replaced by `***` wherever they appear in a line. */
  secrets?: string[];
  /** Where lines go. @default stderr */
  write?: (line: string) => void;
  /** Where `ts` comes from. @default systemClock */
  clock?: Clock;
}

function jsonValue(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Error) {
    const detail = (value as { detail?: unknown }).detail;
    return { name: value.name, message: value.message, ...(detail ? { detail } : {}) };
  }
  return value;
}

/** Creates a logger; see {@link LoggerOptions}. */
export function createLogger(options: LoggerOptions = {}, base: LogFields = {}): Logger {
  const min = ORDER[options.level ?? "info"];
  // Match each secret both raw and as it appears inside a JSON string (escaped quotes etc.).
  const secrets = (options.secrets ?? []).filter((s) => s.length >= MIN_SCRUBBED_LENGTH)
    .flatMap((s) => [JSON.stringify(s).slice(1, -1), s]);
  const write = options.write ?? ((line: string) => void process.stderr.write(line + "\n"));
  const clock = options.clock ?? systemClock;
  const emit = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (ORDER[level] < min) return;
    let line = JSON.stringify(
      { ts: new Date(clock.now()).toISOString(), level, msg, ...base, ...fields },
      jsonValue,
    );
    for (const s of secrets) line = line.split(s).join("***");
    write(line);
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (fields) => createLogger(options, { ...base, ...fields }),
  };
}

/** A logger that drops everything (for tests and library use). */
export const silentLogger: Logger = createLogger({ write: () => {} });
