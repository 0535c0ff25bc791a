// Where the GCS store and Azure's bearer auth get their `Authorization: Bearer` token: the
// contract, no token, a fixed token, and the base of every source that fetches one — its token
// kept fresh by a `Refresher` (background refresh at 90 % of the lifetime, single-flight,
// jittered retry, one rate-limited refresh when the store answers 401/403).
import { type Clock, systemClock } from "../../src/base/clock.ts";
import { type FetchFn } from "../http.ts";
import { redactingFetch, secretRedactor } from "../_redact.ts";
import { ChainSupplier, type CredentialSource } from "./chain.ts";
import {
  callEndpoint,
  type EndpointContext,
  expiryFrom,
  jsonAnswer,
  requireField,
} from "./endpoint.ts";
import type { CredentialObserver, CredentialReport, Expiring } from "./types.ts";

/** Where a store gets its `Authorization: Bearer` token from. */
export interface TokenSource {
  /** Short description for messages (never a secret): "service account x@y", "metadata server"… */
  readonly describe: string;
  /**
   * A token to send now, or undefined to send none.
   * @throws {StoreError} `Auth` when the token endpoint refuses, `Transport`/`Throttled` when it
   *   cannot be reached (a `CredentialError` naming the source)
   */
  token(options?: { signal?: AbortSignal }): Promise<string | undefined>;
  /**
   * The store answered 401/403 to `token`: refresh out of band (rate-limited).
   * @returns true when one retry may succeed
   */
  refused(token: string, options?: { signal?: AbortSignal }): Promise<boolean>;
  /** Tokens this source handed out and secrets it read, for redaction. */
  secrets(): string[];
  /** Which source answered and why the others did not. */
  report?(): CredentialReport;
  /** Stops background refreshes. */
  close?(): void;
}

/** No token at all (fake-gcs-server, public buckets). */
export class NoTokenSource implements TokenSource {
  readonly describe = "no credentials";
  token(): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }
  refused(): Promise<boolean> {
    return Promise.resolve(false);
  }
  secrets(): string[] {
    return [];
  }
}

/** A fixed token (from the config or `TIERD_GCS_TOKEN`); it cannot be refreshed. */
export class StaticTokenSource implements TokenSource {
  readonly describe = "static token";
  readonly #token: string;
  constructor(token: string) {
    this.#token = token;
  }
  token(): Promise<string | undefined> {
    return Promise.resolve(this.#token);
  }
  refused(): Promise<boolean> {
    return Promise.resolve(false);
  }
  secrets(): string[] {
    return [this.#token];
  }
  report(): CredentialReport {
    return { source: "static", steps: [{ source: "static", outcome: "used", reason: "" }] };
  }
  [Symbol.for("Deno.customInspect")](): string {
    return "StaticTokenSource { [redacted] }";
  }
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return "StaticTokenSource { [redacted] }";
  }
}

/** A fetched token and how long it lives. */
export interface FetchedToken {
  accessToken: string;
  /** Seconds from when it was fetched. */
  expiresIn: number;
}

/** Options shared by the token sources that fetch. */
export interface FetchingTokenOptions {
  /** @default globalThis.fetch */
  fetch?: FetchFn;
  /** Token lifetimes and refresh timers run on it. @default systemClock */
  clock?: Clock;
  /** Per-request timeout. @default 30000 */
  requestTimeoutMs?: number;
  observer?: CredentialObserver;
  /** Jitter of refresh retries. @default Math.random */
  rng?: () => number;
  /** Fewest ms between two refreshes after refusals. @default 10000 */
  refusalIntervalMs?: number;
}

/**
 * The base of every token source that fetches: `fetchToken` says how, the base keeps the token
 * fresh and scrubs it (and `extraSecrets`) from every message.
 */
export abstract class FetchingTokenSource implements TokenSource {
  /** The source's name for metrics and messages: `service_account`, `metadata`… */
  abstract readonly name: string;
  abstract readonly describe: string;
  protected readonly fetchFn: FetchFn;
  protected readonly timeoutMs: number;
  protected readonly redact: (text: string) => string;
  protected readonly clock: Clock;
  readonly #options: FetchingTokenOptions;
  #supplier?: ChainSupplier<string>;

  constructor(options: FetchingTokenOptions) {
    this.#options = options;
    this.redact = secretRedactor(() => this.secrets());
    this.fetchFn = redactingFetch(
      options.fetch ?? ((input, init) => fetch(input, init)),
      this.redact,
    );
    this.clock = options.clock ?? systemClock;
    this.timeoutMs = options.requestTimeoutMs ?? 30_000;
  }

  /** Fetches a new token. */
  protected abstract fetchToken(signal?: AbortSignal): Promise<FetchedToken>;

  /** Secrets beyond the tokens that must never reach a message (a private key, a subject token). */
  protected extraSecrets(): string[] {
    return [];
  }

  /** This source as a chain link (ADC walks several). */
  asSource(): CredentialSource<string> {
    return {
      name: this.name,
      load: (signal) => this.load(signal),
      detail: () => this.describe,
      secrets: () => this.extraSecrets(),
    };
  }

  /** One fetch, as a credential with its expiry. */
  async load(signal?: AbortSignal): Promise<Expiring<string>> {
    const started = this.clock.now();
    const fetched = await this.fetchToken(signal);
    return {
      value: fetched.accessToken,
      expiresAt: started + Math.max(0, fetched.expiresIn) * 1000,
    };
  }

  #tokens(): ChainSupplier<string> {
    return this.#supplier ??= new ChainSupplier<string>({
      chain: this.name,
      sources: [this.asSource()],
      secretsOf: (token) => [token],
      clock: this.clock,
      observer: this.#options.observer,
      rng: this.#options.rng,
      refusalIntervalMs: this.#options.refusalIntervalMs,
    });
  }

  token(options: { signal?: AbortSignal } = {}): Promise<string | undefined> {
    return this.#tokens().get(options);
  }

  refused(token: string, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    return this.#tokens().refused(token, options);
  }

  secrets(): string[] {
    return [...(this.#supplier?.secrets() ?? []), ...this.extraSecrets()];
  }

  report(): CredentialReport {
    return this.#tokens().report();
  }

  close(): void {
    this.#supplier?.close();
  }

  /** The endpoint context of one request. */
  protected endpoint(signal?: AbortSignal): EndpointContext {
    return {
      source: this.name,
      fetch: this.fetchFn,
      clock: this.clock,
      timeoutMs: this.timeoutMs,
      redact: this.redact,
      signal,
    };
  }

  /**
   * POSTs or GETs an OAuth token endpoint and reads `{access_token, expires_in}` (`expires_on`
   * epoch seconds, or `expireTime`, for the services that answer that way).
   * @throws {CredentialError} naming this source: `Auth` when refused, `Throttled`/`Transport`
   *   by status, `Malformed` without a token
   */
  protected async exchange(
    what: string,
    request: {
      method: "GET" | "POST";
      url: string;
      headers: Record<string, string>;
      body?: Uint8Array | string;
    },
    signal?: AbortSignal,
    timeoutMs?: number,
  ): Promise<FetchedToken> {
    const ctx = { ...this.endpoint(signal), ...(timeoutMs ? { timeoutMs } : {}) };
    const answer = await callEndpoint(ctx, request);
    const json = jsonAnswer(ctx, what, answer);
    const accessToken = requireField(
      this.name,
      what,
      json,
      json.accessToken ? "accessToken" : "access_token",
    );
    const now = this.clock.now();
    let expiresIn = 3600;
    if (json.expires_in !== undefined) expiresIn = Number(json.expires_in);
    else if (json.expires_on !== undefined) {
      expiresIn = (expiryFrom(this.name, json.expires_on, "epoch-seconds", now) - now) / 1000;
    } else if (json.expireTime !== undefined) {
      expiresIn = (expiryFrom(this.name, json.expireTime, "date", now) - now) / 1000;
    }
    if (!Number.isFinite(expiresIn)) expiresIn = 3600;
    return { accessToken, expiresIn };
  }
}
