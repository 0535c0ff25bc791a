// Structured log lines (one JSON object per line on stderr), with secrets scrubbed from
// every line before it is written: a secret must never reach a log, whatever the caller passes.

import { type Clock, systemClock } from "../providers/clock.ts";
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
  /**
   * Values replaced by `***` wherever they appear in a line; a function is read on every line
   * (credentials that rotate: temporary keys, tokens).
   */
  secrets?: string[] | (() => string[]);
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
  const listed = options.secrets ?? [];
  const secrets = typeof listed === "function" ? listed : () => listed;
  const write = options.write ?? ((line: string) => void process.stderr.write(line + "\n"));
  const clock = options.clock ?? systemClock;
  const emit = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (ORDER[level] < min) return;
    const line = JSON.stringify(
      { ts: new Date(clock.now()).toISOString(), level, msg, ...base, ...fields },
      jsonValue,
    );
    write(scrubSecrets(line, secrets()));
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (fields) => createLogger(options, { ...base, ...fields }),
  };
}

/**
 * `text` with every secret (at least 4 characters long) replaced by `***`: raw, as it appears
 * inside a JSON string (escaped quotes etc.) and URL-encoded; the longest first, so a secret
 * holding another is replaced whole.
 */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  const forms = new Set<string>();
  for (const s of secrets) {
    if (s.length < 4) continue;
    forms.add(s).add(JSON.stringify(s).slice(1, -1)).add(encodeURIComponent(s));
  }
  for (const form of [...forms].sort((a, b) => b.length - a.length)) {
    if (out.includes(form)) out = out.split(form).join("***");
  }
  return out;
}

const processSecrets: (() => readonly string[])[] = [];

/**
 * Registers a source of secrets for the whole process (the CLI's config and store
 * credentials), read by {@link scrubProcessSecrets}: the last line of defence for text that
 * leaves the process outside a logger (a command's stderr).
 */
export function registerProcessSecrets(secrets: () => readonly string[]): void {
  processSecrets.push(secrets);
}

/** `text` scrubbed of every secret registered with {@link registerProcessSecrets}. */
export function scrubProcessSecrets(text: string): string {
  return processSecrets.length === 0
    ? text
    : scrubSecrets(text, processSecrets.flatMap((f) => f()));
}

/** A logger that drops everything (for tests and library use). */
export const silentLogger: Logger = createLogger({ write: () => {} });
