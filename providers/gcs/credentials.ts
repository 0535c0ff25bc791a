// Bearer tokens for Google Cloud Storage: a service-account key (an RS256 JWT assertion signed
// with crypto.subtle, exchanged at the key's token_uri), the GCE metadata server, a static token,
// or none (fake-gcs-server). Fetched tokens are cached and refreshed at 90 % of their lifetime,
// and once out of band when the store reports a 401.
import { type Clock, systemClock, untilAborted } from "../clock.ts";
import { Buffer } from "node:buffer";
import { readFile } from "node:fs/promises";
import { type FetchFn, sendHttp } from "../http.ts";
import { redactingFetch, secretRedactor } from "../_redact.ts";
import { StoreError } from "../types.ts";

/** Where the store gets its `Authorization: Bearer` token from. */
export interface TokenSource {
  /** Short description for messages (never a secret): "service account x@y", "metadata server"… */
  readonly describe: string;
  /**
   * A token to send now, or undefined to send none.
   * @throws {StoreError} `Auth` when the token endpoint refuses, `Transport`/`Throttled` when it
   *   cannot be reached
   */
  token(options?: { signal?: AbortSignal }): Promise<string | undefined>;
  /** The store got a 401 with `token`: the next `token()` fetches a fresh one (if it can). */
  invalidate(token: string): void;
  /** Tokens this source handed out that are still cached, for redaction. */
  secrets(): string[];
}

/** The scope tierd asks for: read and write objects. */
export const GCS_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write";

/** Refresh when this fraction of a token's lifetime has passed. */
const REFRESH_AT = 0.9;

/** No token at all (fake-gcs-server, public buckets). */
export class NoTokenSource implements TokenSource {
  readonly describe = "no credentials";
  token(): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }
  invalidate(): void {}
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
  invalidate(): void {}
  secrets(): string[] {
    return [this.#token];
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
  /** Token lifetimes run on it. @default systemClock */
  clock?: Clock;
  /** Per-request timeout. @default 30000 */
  requestTimeoutMs?: number;
}

/**
 * Caches a fetched token until 90 % of its lifetime, with one fetch in flight at a time;
 * `invalidate` drops the cached token if it is the one given.
 */
abstract class CachingTokenSource implements TokenSource {
  abstract readonly describe: string;
  protected readonly fetchFn: FetchFn;
  protected readonly timeoutMs: number;
  protected readonly redact: (text: string) => string;
  readonly #clock: Clock;
  #cached?: { token: string; refreshAt: number };
  #inFlight?: Promise<string>;

  constructor(options: FetchingTokenOptions) {
    this.redact = secretRedactor(() => this.secretsForRedaction());
    this.fetchFn = redactingFetch(
      options.fetch ?? ((input, init) => fetch(input, init)),
      this.redact,
    );
    this.#clock = options.clock ?? systemClock;
    this.timeoutMs = options.requestTimeoutMs ?? 30_000;
  }

  /** Fetches a new token. */
  protected abstract fetchToken(signal?: AbortSignal): Promise<FetchedToken>;

  /** Secrets beyond the cached token that must never reach a message. */
  protected extraSecrets(): string[] {
    return [];
  }

  protected secretsForRedaction(): string[] {
    return [...this.secrets(), ...this.extraSecrets()];
  }

  async token(options: { signal?: AbortSignal } = {}): Promise<string | undefined> {
    options.signal?.throwIfAborted();
    const cached = this.#cached;
    if (cached && this.#clock.now() < cached.refreshAt) return cached.token;
    // One refresh at a time, shared by every caller and bounded by its own timeout; a caller
    // that gives up stops waiting without cancelling the others' refresh.
    this.#inFlight ??= (async () => {
      try {
        const started = this.#clock.now();
        const fetched = await this.fetchToken();
        const lifetimeMs = Math.max(0, fetched.expiresIn) * 1000;
        this.#cached = { token: fetched.accessToken, refreshAt: started + lifetimeMs * REFRESH_AT };
        return fetched.accessToken;
      } finally {
        this.#inFlight = undefined;
      }
    })();
    return await untilAborted(this.#inFlight, options.signal);
  }

  invalidate(token: string): void {
    if (this.#cached?.token === token) this.#cached = undefined;
  }

  secrets(): string[] {
    return this.#cached ? [this.#cached.token] : [];
  }

  /** POSTs or GETs a token endpoint and reads `{access_token, expires_in}`. */
  protected async exchange(
    what: string,
    request: {
      method: "GET" | "POST";
      url: string;
      headers: Record<string, string>;
      body?: Uint8Array;
    },
    signal?: AbortSignal,
  ): Promise<FetchedToken> {
    const op = "token";
    const response = await sendHttp(
      this.fetchFn,
      { ...request, signal, timeoutMs: this.timeoutMs },
      { op, redact: this.redact, clock: this.#clock },
    );
    const text = new TextDecoder().decode(response.body);
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    const body = (typeof json === "object" && json !== null ? json : {}) as Record<string, unknown>;
    if (response.status < 200 || response.status >= 300) {
      const code = typeof body.error === "string" ? body.error : `Http${response.status}`;
      const description = typeof body.error_description === "string" ? body.error_description : "";
      const kind = response.status === 429 || response.status === 503
        ? "Throttled"
        : response.status >= 500
        ? "Transport"
        : "Auth";
      throw new StoreError(
        kind,
        this.redact(
          `${op}: ${what} refused the token request: ${response.status} ${code}${
            description ? `: ${description}` : ""
          }`,
        ),
        { op, status: response.status, code },
      );
    }
    const accessToken = body.access_token;
    const expiresIn = Number(body.expires_in ?? 3600);
    if (typeof accessToken !== "string" || accessToken === "" || !Number.isFinite(expiresIn)) {
      throw new StoreError("Malformed", `${op}: ${what} answered without an access_token`, {
        op,
        status: response.status,
        code: "Malformed",
      });
    }
    return { accessToken, expiresIn };
  }
}

/** The fields of a service-account JSON key file tierd uses. */
export interface ServiceAccountKey {
  client_email: string;
  private_key: string;
  private_key_id?: string;
  /** @default "https://oauth2.googleapis.com/token" */
  token_uri?: string;
}

/**
 * Reads and checks a service-account JSON key file.
 * @throws {Error} when the file cannot be read or lacks `client_email` / `private_key` (the
 *   message names the file, never its contents)
 */
export async function loadServiceAccountKey(path: string): Promise<ServiceAccountKey> {
  const text = await readFile(path, "utf8");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`service account key ${path} is not JSON`);
  }
  return checkServiceAccountKey(parsed, path);
}

/**
 * Checks the shape of a parsed service-account key.
 * @throws {Error} naming the missing field
 */
export function checkServiceAccountKey(
  value: unknown,
  where = "service account key",
): ServiceAccountKey {
  const key = (typeof value === "object" && value !== null ? value : {}) as Record<string, unknown>;
  for (const field of ["client_email", "private_key"]) {
    if (typeof key[field] !== "string" || key[field] === "") {
      throw new Error(`${where}: "${field}" is missing`);
    }
  }
  if (key.token_uri !== undefined && typeof key.token_uri !== "string") {
    throw new Error(`${where}: "token_uri" is not a string`);
  }
  return {
    client_email: key.client_email as string,
    private_key: key.private_key as string,
    private_key_id: typeof key.private_key_id === "string" ? key.private_key_id : undefined,
    token_uri: key.token_uri as string | undefined,
  };
}

/**
 * Imports a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`) for RS256 signing.
 * @throws {TypeError} when the text is not a PKCS#8 PEM RSA key
 */
export async function importPkcs8Pem(pem: string): Promise<CryptoKey> {
  const match = /-----BEGIN PRIVATE KEY-----([\s\S]+?)-----END PRIVATE KEY-----/.exec(pem);
  if (!match) throw new TypeError("the private key is not a PKCS#8 PEM (BEGIN PRIVATE KEY)");
  const der = Uint8Array.from(Buffer.from(match[1].replace(/\s+/g, ""), "base64"));
  try {
    return await crypto.subtle.importKey(
      "pkcs8",
      der,
      { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
      false,
      ["sign"],
    );
  } catch {
    throw new TypeError("the private key could not be imported as an RSA PKCS#8 key");
  }
}

function base64url(bytes: Uint8Array | string): string {
  return Buffer.from(bytes).toString("base64url");
}

/** The claims of a token request assertion. */
export interface AssertionClaims {
  iss: string;
  scope: string;
  aud: string;
  /** Seconds since the epoch. */
  iat: number;
  exp: number;
}

/** The claims for `key` at `nowSeconds`: valid one hour, the maximum Google accepts. */
export function assertionClaims(
  key: ServiceAccountKey,
  nowSeconds: number,
  scope = GCS_SCOPE,
): AssertionClaims {
  return {
    iss: key.client_email,
    scope,
    aud: key.token_uri ?? "https://oauth2.googleapis.com/token",
    iat: nowSeconds,
    exp: nowSeconds + 3600,
  };
}

/** The signing input of a JWT: `base64url(header).base64url(claims)`. */
export function jwtSigningInput(claims: AssertionClaims, keyId?: string): string {
  const header = keyId ? { alg: "RS256", typ: "JWT", kid: keyId } : { alg: "RS256", typ: "JWT" };
  return `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
}

/** A signed RS256 JWT: the signing input and its RSASSA-PKCS1-v1_5 SHA-256 signature. */
export async function signJwt(
  claims: AssertionClaims,
  privateKey: CryptoKey,
  keyId?: string,
): Promise<string> {
  const input = jwtSigningInput(claims, keyId);
  const signature = await crypto.subtle.sign(
    "RSASSA-PKCS1-v1_5",
    privateKey,
    new TextEncoder().encode(input),
  );
  return `${input}.${base64url(new Uint8Array(signature))}`;
}

/** Tokens from a service-account key: a JWT assertion exchanged at the key's `token_uri`. */
export class ServiceAccountTokenSource extends CachingTokenSource {
  readonly describe: string;
  readonly #key: ServiceAccountKey;
  readonly #scope: string;
  readonly #clock: Clock;
  #privateKey?: Promise<CryptoKey>;

  constructor(key: ServiceAccountKey, options: FetchingTokenOptions & { scope?: string } = {}) {
    super(options);
    this.#key = checkServiceAccountKey(key);
    this.#scope = options.scope ?? GCS_SCOPE;
    this.#clock = options.clock ?? systemClock;
    this.describe = `service account ${this.#key.client_email}`;
  }

  protected override extraSecrets(): string[] {
    return [this.#key.private_key];
  }

  protected async fetchToken(signal?: AbortSignal): Promise<FetchedToken> {
    let privateKey: CryptoKey;
    try {
      privateKey = await (this.#privateKey ??= importPkcs8Pem(this.#key.private_key));
    } catch (err) {
      this.#privateKey = undefined;
      throw new StoreError("Auth", `token: ${this.describe}: ${(err as Error).message}`, {
        op: "token",
        code: "InvalidPrivateKey",
      });
    }
    const claims = assertionClaims(this.#key, Math.floor(this.#clock.now() / 1000), this.#scope);
    const assertion = await signJwt(claims, privateKey, this.#key.private_key_id);
    const body = new TextEncoder().encode(
      `grant_type=${encodeURIComponent("urn:ietf:params:oauth:grant-type:jwt-bearer")}` +
        `&assertion=${encodeURIComponent(assertion)}`,
    );
    return await this.exchange(`token endpoint ${claims.aud}`, {
      method: "POST",
      url: claims.aud,
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body,
    }, signal);
  }

  [Symbol.for("Deno.customInspect")](): string {
    return `ServiceAccountTokenSource { ${this.#key.client_email} }`;
  }
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `ServiceAccountTokenSource { ${this.#key.client_email} }`;
  }
}

/** The metadata server's default address. */
export const METADATA_ENDPOINT = "http://metadata.google.internal";

/** Tokens of the instance's default service account, from the GCE metadata server. */
export class MetadataServerTokenSource extends CachingTokenSource {
  readonly describe: string;
  readonly #url: string;

  /** @param options.endpoint the metadata server @default "http://metadata.google.internal" */
  constructor(options: FetchingTokenOptions & { endpoint?: string } = {}) {
    super(options);
    const endpoint = (options.endpoint || METADATA_ENDPOINT).replace(/\/+$/, "");
    this.#url = `${endpoint}/computeMetadata/v1/instance/service-accounts/default/token`;
    this.describe = `metadata server ${endpoint}`;
  }

  protected fetchToken(signal?: AbortSignal): Promise<FetchedToken> {
    return this.exchange(this.describe, {
      method: "GET",
      url: this.#url,
      headers: { "metadata-flavor": "Google" },
    }, signal);
  }
}

/** The `[tiered_storage.gcs]` settings that choose a token source. */
export interface GcsCredentialsConfig {
  credentials_source: "service_account" | "metadata" | "static" | "none";
  /** Path of the JSON key file (service_account). */
  service_account_key: string;
  /** The bearer token (static). */
  token: string;
}

/**
 * The token source a GCS config names.
 * @throws {Error} when the key file is missing or unreadable, or a static token is empty
 */
export async function tokenSourceFromConfig(
  config: GcsCredentialsConfig,
  options: FetchingTokenOptions & { metadataEndpoint?: string } = {},
): Promise<TokenSource> {
  switch (config.credentials_source) {
    case "none":
      return new NoTokenSource();
    case "static":
      if (!config.token) throw new Error('gcs: credentials_source = "static" needs a token');
      return new StaticTokenSource(config.token);
    case "metadata":
      return new MetadataServerTokenSource({ ...options, endpoint: options.metadataEndpoint });
    case "service_account":
      if (!config.service_account_key) {
        throw new Error('gcs: credentials_source = "service_account" needs service_account_key');
      }
      return new ServiceAccountTokenSource(
        await loadServiceAccountKey(config.service_account_key),
        options,
      );
  }
}
