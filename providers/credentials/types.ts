// What every credential source in providers/ shares, whatever the cloud: a value that may
// expire, the typed error that names the source that failed, the "not configured here" signal a
// chain walks past, the report `tierd probe` prints, and the observer hook metrics attach to.
import { StoreError, type StoreErrorKind } from "../types.ts";

/** A credential and when it stops being valid (ms since the epoch; undefined: never). */
export interface Expiring<T> {
  value: T;
  expiresAt?: number;
}

/** Reads one environment variable; tests pass a map instead of the process environment. */
export type Env = (name: string) => string | undefined;

/** The process environment (empty values count as unset). */
export const processEnv: Env = (name) => {
  const value = globalThis.process?.env?.[name];
  return value === "" ? undefined : value;
};

/** An {@link Env} over a plain record (tests, or a config's overrides). */
export function envFrom(vars: Readonly<Record<string, string | undefined>>): Env {
  return (name) => (vars[name] === "" ? undefined : vars[name]);
}

/**
 * Thrown by a source that is not configured in this environment (its variable is unset, its
 * file is absent, no metadata server answers): a chain records the reason and tries the next.
 */
export class SourceSkipped extends Error {
  override readonly name = "SourceSkipped";
}

/**
 * A credential source that is configured but failed: a `StoreError` (so the retry layer reads
 * its kind) whose message starts with `credentials from {source}`. `Auth` when the source
 * refused, `Transport`/`Throttled` when it could not be reached, `Malformed` when its answer
 * made no sense.
 */
export class CredentialError extends StoreError {
  /** The source that failed, e.g. `web_identity`. */
  readonly source: string;
  constructor(
    kind: StoreErrorKind,
    source: string,
    message: string,
    detail: { status?: number; code?: string } = {},
    options?: ErrorOptions,
  ) {
    super(kind, `credentials from ${source}: ${message}`, {
      op: "credentials",
      ...detail,
    }, options);
    this.source = source;
  }
}

/** One source a chain looked at, and what came of it. */
export interface ChainStep {
  source: string;
  outcome: "used" | "skipped" | "failed";
  /** Why it was skipped or failed, or what it is (`role arn:…`, a file path); never a secret. */
  reason: string;
}

/** Which source answered and why the others did not, for `tierd probe`. */
export interface CredentialReport {
  /** The source in use, once one answered. */
  source?: string;
  steps: ChainStep[];
  /** When the credential in use expires (ms since the epoch), if it does. */
  expiresAt?: number;
}

/** Hooks credential providers call; the metrics layer implements them. Every hook is optional. */
export interface CredentialObserver {
  /** `source` now holds a credential expiring at `expiresAt` (undefined: it never expires). */
  expiry?(source: string, expiresAt: number | undefined): void;
  /** A refresh of `source` ended: `ok`, or `failed` (the old credential stays while valid). */
  refresh?(
    source: string,
    outcome: "ok" | "failed",
    why: "scheduled" | "refused" | "expired",
  ): void;
}

/**
 * What a store asks of its credentials: the one to sign with now, a refresh after the store
 * refused it, and every secret to scrub from text.
 */
export interface CredentialSupplier<T> {
  /** Short description for messages: the source in use, or the chain. Never a secret. */
  readonly describe: string;
  /**
   * The credential to use now (fetched or refreshed first when there is none valid).
   * @throws {CredentialError} naming the source when none can be had
   */
  get(options?: { signal?: AbortSignal }): Promise<T>;
  /**
   * The store answered 401/403 to `used`: refresh out of band (rate-limited) so one retry can
   * use a fresh credential.
   * @returns true when the caller should retry once
   */
  refused(used: T, options?: { signal?: AbortSignal }): Promise<boolean>;
  /** Every secret handed out or read (key ids, secrets, tokens, subject tokens), for scrubbing. */
  secrets(): string[];
  /** Which source answered and why the others did not. */
  report(): CredentialReport;
  /** Stops background refreshes. */
  close(): void;
}
