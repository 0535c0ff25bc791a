// Azure Storage SharedKey signing (service version 2015-02-21 and later), in stages that tests
// check one by one: canonicalized headers, canonicalized resource, string to sign, signature.
// Pure apart from `crypto.subtle`; the clock lives in the caller (the `x-ms-date` header).
// https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key
import { Buffer } from "node:buffer";

/** What a request contributes to its signature. */
export interface SharedKeyInput {
  method: string;
  /** The path exactly as sent, percent-encoded, e.g. `/container/a%20b`. */
  path: string;
  /** Query parameters, raw (decoded) values. */
  query: ReadonlyArray<readonly [string, string]>;
  /** Lowercase names. `content-length` is the body's length (absent or "0": signed as empty). */
  headers: Readonly<Record<string, string>>;
}

/** The standard headers of the string to sign, in their order. */
const STANDARD_HEADERS = [
  "content-encoding",
  "content-language",
  "content-length",
  "content-md5",
  "content-type",
  "date",
  "if-modified-since",
  "if-match",
  "if-none-match",
  "if-unmodified-since",
  "range",
] as const;

function ordinal(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The CanonicalizedHeaders part: every `x-ms-*` header, name lowercased, sorted by name,
 * `name:value\n`, the value trimmed (as an HTTP server receives it).
 */
export function canonicalizedHeaders(headers: Readonly<Record<string, string>>): string {
  const names = Object.keys(headers)
    .map((name) => [name.toLowerCase(), headers[name]] as const)
    .filter(([name]) => name.startsWith("x-ms-"))
    .sort((a, b) => ordinal(a[0], b[0]));
  return names.map(([name, value]) => `${name}:${value.trim()}\n`).join("");
}

/**
 * The CanonicalizedResource part: `/{account}{path}`, then for each query parameter (names
 * lowercased, sorted) `\n{name}:{values, sorted, comma-joined}`.
 * With a path-style endpoint (Azurite: `/devstoreaccount1/container/blob`) the account appears
 * twice: `/devstoreaccount1/devstoreaccount1/container/blob`.
 */
export function canonicalizedResource(
  account: string,
  path: string,
  query: ReadonlyArray<readonly [string, string]>,
): string {
  let out = `/${account}${path || "/"}`;
  const byName = new Map<string, string[]>();
  for (const [name, value] of query) {
    const lower = name.toLowerCase();
    const values = byName.get(lower);
    if (values) values.push(value);
    else byName.set(lower, [value]);
  }
  for (const name of [...byName.keys()].sort(ordinal)) {
    out += `\n${name}:${byName.get(name)!.sort(ordinal).join(",")}`;
  }
  return out;
}

/** The string to sign: verb, the standard headers, canonicalized headers and resource. */
export function stringToSign(account: string, input: SharedKeyInput): string {
  const header = (name: string): string => {
    const value = input.headers[name];
    if (value === undefined) return "";
    // Since 2015-02-21 a zero Content-Length is signed as the empty string.
    if (name === "content-length" && value === "0") return "";
    return value;
  };
  return [input.method.toUpperCase(), ...STANDARD_HEADERS.map(header)].join("\n") + "\n" +
    canonicalizedHeaders(input.headers) + canonicalizedResource(account, input.path, input.query);
}

/**
 * Imports an account key (base64, as the portal shows it) for HMAC-SHA256.
 * @throws {TypeError} when the key is not base64
 */
export function importAccountKey(base64Key: string): Promise<CryptoKey> {
  const trimmed = base64Key.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed) || trimmed.length % 4 !== 0) {
    throw new TypeError("the Azure shared key is not base64");
  }
  const raw = Uint8Array.from(Buffer.from(trimmed, "base64"));
  return crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

/** Base64 HMAC-SHA256 of the string to sign. */
export async function signature(key: CryptoKey, toSign: string): Promise<string> {
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(toSign));
  return Buffer.from(mac).toString("base64");
}

/** The `Authorization` header value: `SharedKey {account}:{signature}`. */
export async function authorization(
  account: string,
  key: CryptoKey,
  input: SharedKeyInput,
): Promise<string> {
  return `SharedKey ${account}:${await signature(key, stringToSign(account, input))}`;
}
