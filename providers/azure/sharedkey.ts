// Azure Storage SharedKey signing (service version 2015-02-21 and later), in stages that tests
// check one by one: canonicalized headers, canonicalized resource, string to sign, signature.
// Pure; the clock lives in the caller (the `x-ms-date` header). The HMAC is `node:crypto`'s
// synchronous one, as for SigV4 (providers/s3/sigv4.ts): an async `crypto.subtle.sign` cost each
// request about a quarter of a millisecond of waiting in the shipped binary.
// https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key
import { Buffer } from "node:buffer";
import { createHmac } from "node:crypto";

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
 * The characters of a (lowercased) header name in the order the service's culture-aware sort
 * (.NET, en-US) weighs them first: punctuation, then digits, then letters. `'` and `-` are
 * absent: they weigh nothing at first and only break ties (see {@link compareHeaderNames}).
 */
const PRIMARY_ORDER = "!#$%&*.^_`|~+0123456789abcdefghijklmnopqrstuvwxyz";
const PRIMARY_RANK = new Map([...PRIMARY_ORDER].map((c, i) => [c, i + 1]));
/** The characters that only break ties, lighter first. */
const TIE_BREAKERS = "'-";

function primaryRanks(name: string): number[] {
  const out: number[] = [];
  for (const c of name) {
    const rank = PRIMARY_RANK.get(c);
    if (rank !== undefined) out.push(rank);
  }
  return out;
}

/**
 * Orders two lowercased header names the way Azure Storage does when it checks a SharedKey
 * signature: culture-aware, not by bytes. First by the weights of their characters, `'` and `-`
 * left out (so `_` sorts before digits, and `i-x` sorts as if it were `ix`); names equal there
 * are ordered by where their first `'` or `-` differs: at the first position where one name has
 * one and the other has not, the other comes first (`ix-` before `i-x`), and `'` before `-`.
 * Byte order breaks a remaining tie.
 */
export function compareHeaderNames(a: string, b: string): number {
  const ra = primaryRanks(a), rb = primaryRanks(b);
  for (let i = 0; i < Math.min(ra.length, rb.length); i++) {
    if (ra[i] !== rb[i]) return ra[i] - rb[i];
  }
  if (ra.length !== rb.length) return ra.length - rb.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const ta = i < a.length ? TIE_BREAKERS.indexOf(a[i]) : -2;
    const tb = i < b.length ? TIE_BREAKERS.indexOf(b[i]) : -2;
    if (ta === tb) continue;
    if (ta === -2 || tb === -2) return ta === -2 ? -1 : 1; // a name that ended comes first
    if (ta === -1 || tb === -1) return ta === -1 ? -1 : 1; // no tie-breaker here: first
    return ta - tb;
  }
  return ordinal(a, b);
}

/**
 * The CanonicalizedHeaders part: every `x-ms-*` header, name lowercased, sorted as the service
 * sorts them ({@link compareHeaderNames}), `name:value\n`, the value trimmed (as an HTTP server
 * receives it).
 */
export function canonicalizedHeaders(headers: Readonly<Record<string, string>>): string {
  const names = Object.keys(headers)
    .map((name) => [name.toLowerCase(), headers[name]] as const)
    .filter(([name]) => name.startsWith("x-ms-"))
    .sort((a, b) => compareHeaderNames(a[0], b[0]));
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
 * Decodes an account key (base64, as the portal shows it) for HMAC-SHA256.
 * @throws {TypeError} when the key is not base64
 */
export function importAccountKey(base64Key: string): Uint8Array {
  const trimmed = base64Key.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed) || trimmed.length % 4 !== 0) {
    throw new TypeError("the Azure shared key is not base64");
  }
  return Uint8Array.from(Buffer.from(trimmed, "base64"));
}

/** Base64 HMAC-SHA256 of the string to sign. */
export function signature(key: Uint8Array, toSign: string): string {
  return createHmac("sha256", key).update(toSign).digest("base64");
}

/** The `Authorization` header value: `SharedKey {account}:{signature}`. */
export function authorization(account: string, key: Uint8Array, input: SharedKeyInput): string {
  return `SharedKey ${account}:${signature(key, stringToSign(account, input))}`;
}
