// Google service-account keys: the JSON key file, its PKCS#8 private key, and tokens from an
// RS256 JWT assertion (signed with crypto.subtle) exchanged at the key's token_uri.
import { Buffer } from "node:buffer";
import { readFile } from "node:fs/promises";
import { CredentialError } from "../credentials/types.ts";
import {
  type FetchedToken,
  type FetchingTokenOptions,
  FetchingTokenSource,
  GCS_SCOPE,
} from "./token_source.ts";

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
export class ServiceAccountTokenSource extends FetchingTokenSource {
  readonly name = "service_account";
  readonly describe: string;
  readonly #key: ServiceAccountKey;
  readonly #scope: string;
  #privateKey?: Promise<CryptoKey>;

  constructor(key: ServiceAccountKey, options: FetchingTokenOptions & { scope?: string } = {}) {
    super(options);
    this.#key = checkServiceAccountKey(key);
    this.#scope = options.scope ?? GCS_SCOPE;
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
      throw new CredentialError("Auth", this.name, `${this.describe}: ${(err as Error).message}`, {
        code: "InvalidPrivateKey",
      });
    }
    const claims = assertionClaims(this.#key, Math.floor(this.clock.now() / 1000), this.#scope);
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
