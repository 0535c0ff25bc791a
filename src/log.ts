// Structured log lines (one JSON object per line on stderr). Secrets are kept out of messages
// and fields where they are written; the only text scrubbed here is foreign text — the message
// and detail of an Error in a line's fields, which is how store and broker answers reach a log —
// and only for secrets long enough to be distinctive (`scrub.ts`). The rest of a line (object
// keys, the prefix, paths) is written as it is, so a short password never blots it out.

import { withoutRuntimeHint } from "../providers/http.ts";
import { type Clock, systemClock } from "./base/clock.ts";
import { foreignTextScrubber, type Scrub, scrubDeep } from "./scrub.ts";
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
   * Secret values replaced by `***` in the message and detail of every Error in a line's fields
   * (foreign text); values shorter than `MIN_SCRUB_LENGTH` are not scrubbed. A function is read
   * on every line (credentials that rotate: temporary keys, tokens).
   */
  secrets?: string[] | (() => string[]);
  /** Where lines go. @default stderr */
  write?: (line: string) => void;
  /** Where `ts` comes from. @default systemClock */
  clock?: Clock;
}

/** A JSON replacer: bigints as decimal text, Errors as name, scrubbed message and detail. */
function jsonValue(scrub: Scrub): (key: string, value: unknown) => unknown {
  return (_key, value) => {
    if (typeof value === "bigint") return value.toString();
    if (value instanceof Error) {
      const detail = (value as { detail?: unknown }).detail;
      return {
        name: value.name,
        message: scrub(withoutRuntimeHint(value.message)),
        ...(detail ? { detail: scrubDeep(detail, scrub) } : {}),
      };
    }
    return value;
  };
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
    write(JSON.stringify(
      { ts: new Date(clock.now()).toISOString(), level, msg, ...base, ...fields },
      jsonValue(foreignTextScrubber(secrets())),
    ));
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
 * `text` with every secret long enough to be distinctive (`MIN_SCRUB_LENGTH`) replaced by
 * `***`: raw, as it appears inside a JSON string and URL-encoded; the longest first. For text
 * that came from outside and leaves the process (a command's stderr).
 */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  return foreignTextScrubber(secrets)(text);
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
