// A credential chain: sources tried in order until one answers, the others' reasons kept for
// `tierd probe`. The source that answered first is kept for every refresh after (a chain is not
// walked again unless no source ever answered), and its credential is kept fresh by a
// `Refresher`. A single explicit source is a chain of one.
import type { Clock } from "../../src/base/clock.ts";
import { StoreError } from "../types.ts";
import { Refresher } from "./refresher.ts";
import {
  type ChainStep,
  CredentialError,
  type CredentialObserver,
  type CredentialReport,
  type CredentialSupplier,
  type Expiring,
  SourceSkipped,
} from "./types.ts";

/** One place credentials can come from. */
export interface CredentialSource<T> {
  /** Its name in messages, reports and the metric's `source` label: `env`, `imds`… */
  readonly name: string;
  /**
   * Fetches a credential.
   * @throws {SourceSkipped} when this source is not configured here
   * @throws {CredentialError} (or any error, wrapped into one) when it is configured but failed
   */
  load(signal?: AbortSignal): Promise<Expiring<T>>;
  /** What it is, for the report (a role ARN, a file path); never a secret. */
  detail?(): string;
  /** Secrets it read beyond the credential (a web identity token, a client secret). */
  secrets?(): string[];
}

/** Options of a {@link ChainSupplier}. */
export interface ChainOptions<T> {
  /** The chain's name for messages when no source answered: `aws auto chain`. */
  chain: string;
  sources: CredentialSource<T>[];
  /** The secret strings inside a credential (key id, secret, token). */
  secretsOf(value: T): (string | undefined)[];
  clock?: Clock;
  observer?: CredentialObserver;
  rng?: () => number;
  /** @default 10000 */
  refusalIntervalMs?: number;
}

/** How many past credentials stay in the scrub list after they were replaced. */
const REMEMBERED = 4;

/** A {@link CredentialSupplier} over a chain of sources. */
export class ChainSupplier<T> implements CredentialSupplier<T> {
  readonly #o: ChainOptions<T>;
  readonly #refresher: Refresher<T>;
  #chosen?: CredentialSource<T>;
  #steps: ChainStep[] = [];
  readonly #seen: T[] = [];

  constructor(options: ChainOptions<T>) {
    this.#o = options;
    this.#refresher = new Refresher<T>({
      source: () => this.#chosen?.name ?? options.chain,
      fetch: (signal) => this.#fetch(signal),
      clock: options.clock,
      observer: options.observer,
      rng: options.rng,
      refusalIntervalMs: options.refusalIntervalMs,
    });
  }

  get describe(): string {
    const chosen = this.#chosen;
    if (!chosen) return this.#o.chain;
    const detail = chosen.detail?.();
    return detail ? `${chosen.name} (${detail})` : chosen.name;
  }

  get(options: { signal?: AbortSignal } = {}): Promise<T> {
    return this.#refresher.get(options);
  }

  refused(used: T, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    return this.#refresher.refused(used, options);
  }

  secrets(): string[] {
    const out = new Set<string>();
    for (const value of this.#seen) {
      for (const s of this.#o.secretsOf(value)) if (s) out.add(s);
    }
    for (const source of this.#o.sources) for (const s of source.secrets?.() ?? []) out.add(s);
    return [...out];
  }

  report(): CredentialReport {
    return {
      source: this.#chosen?.name,
      steps: this.#steps.map((s) => ({ ...s })),
      expiresAt: this.#refresher.current?.expiresAt,
    };
  }

  close(): void {
    this.#refresher.close();
  }

  async #fetch(signal?: AbortSignal): Promise<Expiring<T>> {
    const chosen = this.#chosen;
    const fresh = chosen ? await this.#load(chosen, signal) : await this.#walk(signal);
    this.#seen.push(fresh.value);
    if (this.#seen.length > REMEMBERED) this.#seen.shift();
    return fresh;
  }

  async #load(source: CredentialSource<T>, signal?: AbortSignal): Promise<Expiring<T>> {
    try {
      return await source.load(signal);
    } catch (err) {
      throw asCredentialError(source.name, err);
    }
  }

  async #walk(signal?: AbortSignal): Promise<Expiring<T>> {
    const steps: ChainStep[] = [];
    this.#steps = steps;
    for (const source of this.#o.sources) {
      signal?.throwIfAborted();
      try {
        const fresh = await source.load(signal);
        steps.push({ source: source.name, outcome: "used", reason: source.detail?.() ?? "" });
        this.#chosen = source;
        return fresh;
      } catch (err) {
        if (err instanceof SourceSkipped) {
          steps.push({ source: source.name, outcome: "skipped", reason: err.message });
          continue;
        }
        if (signal?.aborted) throw err;
        const failure = asCredentialError(source.name, err);
        steps.push({ source: source.name, outcome: "failed", reason: failure.message });
        throw failure;
      }
    }
    const why = steps.map((s) => `${s.source}: ${s.reason}`).join("; ");
    throw new CredentialError(
      "Auth",
      this.#o.chain,
      `no source has credentials${why ? ` (${why})` : ""}`,
      { code: "NoCredentials" },
    );
  }
}

/** `err` as a {@link CredentialError} naming `source` (a `StoreError` keeps its kind). */
export function asCredentialError(source: string, err: unknown): CredentialError {
  if (err instanceof CredentialError) return err;
  if (err instanceof StoreError) {
    return new CredentialError(err.kind, source, err.message, {
      status: err.detail.status,
      code: err.detail.code,
    });
  }
  if (err instanceof SourceSkipped) {
    return new CredentialError("Auth", source, `not configured: ${err.message}`, {
      code: "NotConfigured",
    });
  }
  const message = err instanceof Error ? err.message : String(err);
  return new CredentialError("Auth", source, message, { code: "SourceFailed" });
}

/** A supplier of one fixed credential (config keys, a static token): nothing to refresh. */
export class StaticSupplier<T> implements CredentialSupplier<T> {
  readonly describe: string;
  readonly #value: T;
  readonly #secrets: string[];
  constructor(source: string, value: T, secrets: (string | undefined)[]) {
    this.describe = source;
    this.#value = value;
    this.#secrets = secrets.filter((s): s is string => !!s);
  }
  get(): Promise<T> {
    return Promise.resolve(this.#value);
  }
  refused(): Promise<boolean> {
    return Promise.resolve(false);
  }
  secrets(): string[] {
    return [...this.#secrets];
  }
  report(): CredentialReport {
    return {
      source: this.describe,
      steps: [{ source: this.describe, outcome: "used", reason: "" }],
    };
  }
  close(): void {}
}
