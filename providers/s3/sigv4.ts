// AWS Signature Version 4 for S3, written out stage by stage (canonical request, string to sign,
// signing key, signature, header) so each stage can be checked against the published vectors.
// Pure but for the clock and the signing-key cache, which are passed in. The HMACs run in
// `node:crypto`'s synchronous HMAC (Deno and Bun both have it), the canonical-request digest in
// hash-wasm's synchronous SHA-256: in the shipped binary an async `crypto.subtle.sign` took about
// 0.27 ms of wall time per signature (it runs off the main thread), which every cold read's first
// fetch waited for. The derived signing key is kept as bytes; the secret it comes from is in
// memory as text anyway, so a non-extractable CryptoKey hid nothing more.
import { createHmac } from "node:crypto";
import { createSHA256, type IHasher } from "hash-wasm";

/** Static or temporary AWS credentials. The secret and the session token are never logged. */
export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** The payload hash S3 accepts in place of a body digest. */
export const UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD";
/** SHA-256 of the empty string, hex. */
export const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const ALGORITHM = "AWS4-HMAC-SHA256";

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

function toHex(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i++) out += HEX[bytes[i]];
  return out;
}

const UNRESERVED_PATH = /^[A-Za-z0-9\-_.~/]*$/;
const UNRESERVED = /^[A-Za-z0-9\-_.~]*$/;
const SUB_DELIMS = /[!'()*]/g;
const hexUpper = (c: string) => "%" + c.charCodeAt(0).toString(16).toUpperCase();

/**
 * Percent-encodes `text` the S3 way: RFC 3986 unreserved characters (`A-Za-z0-9-_.~`) stay,
 * everything else becomes `%XX` of its UTF-8 bytes (`+` → `%2B`, space → `%20`).
 * @param keepSlash keep `/` as a path separator (paths) or encode it (query keys and values)
 * @throws {URIError} when `text` holds a lone surrogate (it has no UTF-8 form)
 */
export function uriEncode(text: string, keepSlash: boolean): string {
  if ((keepSlash ? UNRESERVED_PATH : UNRESERVED).test(text)) return text;
  const encoded = encodeURIComponent(text).replace(SUB_DELIMS, hexUpper);
  return keepSlash ? encoded.replaceAll("%2F", "/") : encoded;
}

/** A query parameter; an empty value is written `key=`. */
export type QueryParam = readonly [name: string, value: string];

/**
 * The canonical query string: names and values encoded like {@link uriEncode}, sorted by
 * encoded name then value, joined with `&`. It is also the query string tierd sends.
 */
export function canonicalQueryString(params: readonly QueryParam[]): string {
  if (params.length === 0) return "";
  const encoded = params.map(([k, v]) => uriEncode(k, false) + "=" + uriEncode(v, false));
  // `=` (0x3D) sorts after every unreserved character but before letters, so compare names
  // first; encoded strings are ASCII, so code-unit order is byte order.
  if (encoded.length > 1) {
    encoded.sort((a, b) => {
      const ia = a.indexOf("="), ib = b.indexOf("=");
      const ka = a.slice(0, ia), kb = b.slice(0, ib);
      if (ka !== kb) return ka < kb ? -1 : 1;
      const va = a.slice(ia + 1), vb = b.slice(ib + 1);
      return va < vb ? -1 : va > vb ? 1 : 0;
    });
  }
  return encoded.join("&");
}

const FOLD_SPACE = /[ \t\r\n\v\f]{2,}|[\t\r\n\v\f]/;

/** A header value as SigV4 signs it: trimmed, runs of whitespace folded to one space. */
export function canonicalHeaderValue(value: string): string {
  const trimmed = value.trim();
  return FOLD_SPACE.test(trimmed) ? trimmed.replace(/[ \t\r\n\v\f]+/g, " ") : trimmed;
}

/** Signed headers in canonical form: the `name:value\n` block and the `;`-joined name list. */
export interface CanonicalHeaders {
  block: string;
  signedHeaders: string;
}

/**
 * Canonicalizes headers: names lowercased and sorted, values trimmed and folded.
 * Every header given is signed; pass only the ones the request must bind.
 */
export function canonicalHeaders(headers: Readonly<Record<string, string>>): CanonicalHeaders {
  const names = Object.keys(headers);
  const entries: [string, string][] = new Array(names.length);
  for (let i = 0; i < names.length; i++) {
    entries[i] = [names[i].toLowerCase(), canonicalHeaderValue(headers[names[i]])];
  }
  entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  let block = "";
  let signedHeaders = "";
  for (let i = 0; i < entries.length; i++) {
    block += entries[i][0] + ":" + entries[i][1] + "\n";
    signedHeaders += (i === 0 ? "" : ";") + entries[i][0];
  }
  return { block, signedHeaders };
}

/** The inputs of a canonical request, already in canonical form. */
export interface CanonicalRequestInput {
  method: string;
  /** The URI-encoded path, e.g. from `uriEncode(path, true)`. */
  canonicalPath: string;
  /** From {@link canonicalQueryString}. */
  canonicalQuery: string;
  headers: CanonicalHeaders;
  /** Hex SHA-256 of the body, or {@link UNSIGNED_PAYLOAD}. */
  payloadHash: string;
}

/** Stage 1: the canonical request text. */
export function canonicalRequest(input: CanonicalRequestInput): string {
  return input.method + "\n" + input.canonicalPath + "\n" + input.canonicalQuery + "\n" +
    input.headers.block + "\n" + input.headers.signedHeaders + "\n" + input.payloadHash;
}

/** `20130524T000000Z` for a Date. */
export function amzDate(now: Date): string {
  const iso = now.toISOString(); // 2013-05-24T00:00:00.000Z
  return iso.slice(0, 4) + iso.slice(5, 7) + iso.slice(8, 13) + iso.slice(14, 16) +
    iso.slice(17, 19) + "Z";
}

/** The credential scope `yyyymmdd/region/service/aws4_request`. */
export function credentialScope(date: string, region: string, service: string): string {
  return date + "/" + region + "/" + service + "/aws4_request";
}

let sha256: IHasher | undefined;
let sha256Loading: Promise<IHasher> | undefined;

function sha256HexSync(hasher: IHasher, text: string): string {
  hasher.init();
  hasher.update(text);
  return hasher.digest("hex");
}

/** Hex SHA-256 of a UTF-8 string. */
export async function sha256Hex(text: string): Promise<string> {
  sha256 ??= await (sha256Loading ??= createSHA256());
  return sha256HexSync(sha256, text);
}

function stringToSignOver(datetime: string, scope: string, canonicalHash: string): string {
  return ALGORITHM + "\n" + datetime + "\n" + scope + "\n" + canonicalHash;
}

/** Stage 2: the string to sign, over the SHA-256 of the canonical request. */
export async function stringToSign(
  datetime: string,
  scope: string,
  canonical: string,
): Promise<string> {
  return stringToSignOver(datetime, scope, await sha256Hex(canonical));
}

/** Stage 2 without an await once the hasher is loaded (the common case). */
function stringToSignFast(
  datetime: string,
  scope: string,
  canonical: string,
): string | Promise<string> {
  return sha256
    ? stringToSignOver(datetime, scope, sha256HexSync(sha256, canonical))
    : stringToSign(datetime, scope, canonical);
}

/** A cache of derived signing keys; a `Map` will do. Keys are per (access key, date, region, service). */
export interface SigningKeyCache {
  get(id: string): SigningKeyEntry | undefined;
  set(id: string, entry: SigningKeyEntry): unknown;
  delete(id: string): unknown;
  readonly size: number;
  clear(): void;
}

/** A cached signing key with the secret it was derived from (so a rotated secret misses). */
export interface SigningKeyEntry {
  secret: string;
  key: Uint8Array;
}

/** HMAC-SHA256 of `data` under `key`. */
function hmac(key: Uint8Array | string, data: string): Uint8Array {
  return createHmac("sha256", key).update(data).digest();
}

function deriveSigningKey(
  secret: string,
  date: string,
  region: string,
  service: string,
): Uint8Array {
  const kDate = hmac("AWS4" + secret, date);
  const kRegion = hmac(kDate, region);
  const kService = hmac(kRegion, service);
  return hmac(kService, "aws4_request");
}

const MAX_CACHED_KEYS = 32;

/**
 * Stage 3: the signing key HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date), region), service),
 * "aws4_request"), derived once and cached per (access key, date, region, service).
 */
export function signingKey(
  credentials: Credentials,
  date: string,
  region: string,
  service: string,
  cache?: SigningKeyCache,
): Uint8Array {
  if (!cache) return deriveSigningKey(credentials.secretAccessKey, date, region, service);
  const id = credentials.accessKeyId + "/" + date + "/" + region + "/" + service;
  const hit = cache.get(id);
  if (hit && hit.secret === credentials.secretAccessKey) return hit.key;
  if (cache.size >= MAX_CACHED_KEYS) cache.clear(); // old dates; cheap to rebuild
  const key = deriveSigningKey(credentials.secretAccessKey, date, region, service);
  cache.set(id, { secret: credentials.secretAccessKey, key });
  return key;
}

/** Stage 4: the hex HMAC-SHA256 of the string to sign under the signing key. */
export function signature(key: Uint8Array, toSign: string): string {
  return toHex(hmac(key, toSign));
}

/** Stage 5: the `Authorization` header value. */
export function authorizationHeader(
  accessKeyId: string,
  scope: string,
  signedHeaders: string,
  sig: string,
): string {
  return ALGORITHM + " Credential=" + accessKeyId + "/" + scope + ", SignedHeaders=" +
    signedHeaders + ", Signature=" + sig;
}

/** What to sign. `path` is the raw (decoded) path, e.g. `/bucket/my key+1`; it is encoded once. */
export interface SignRequestInput {
  method: string;
  /** `https:` or `http:`. */
  protocol: string;
  /** Host name with its port when the port is not the scheme's default. */
  host: string;
  path: string;
  query?: readonly QueryParam[];
  /** Extra headers to send and sign (`x-amz-meta-*`, `range`, `if-none-match`, `content-md5`…). */
  headers?: Readonly<Record<string, string>>;
  credentials: Credentials;
  region: string;
  /** @default "s3" */
  service?: string;
  now: Date;
  /** @default UNSIGNED_PAYLOAD */
  payloadHash?: string;
  cache?: SigningKeyCache;
}

/** A signed request: send exactly this URL (its path and query are what was signed). */
export interface SignedRequest {
  url: string;
  /** The headers to send, `authorization` included, `host` excluded (fetch sets it). */
  headers: Record<string, string>;
  /** Intermediate stages, for tests and debugging; never contains the secret. */
  canonicalRequest: string;
  stringToSign: string;
}

/** Signs a request with an `Authorization` header. */
export async function signRequest(input: SignRequestInput): Promise<SignedRequest> {
  const service = input.service ?? "s3";
  const datetime = amzDate(input.now);
  const date = datetime.slice(0, 8);
  const payloadHash = input.payloadHash ?? UNSIGNED_PAYLOAD;
  const send: Record<string, string> = { ...input.headers };
  send["x-amz-content-sha256"] = payloadHash;
  send["x-amz-date"] = datetime;
  if (input.credentials.sessionToken) send["x-amz-security-token"] = input.credentials.sessionToken;
  const headers = canonicalHeaders({ host: input.host, ...send });
  const canonicalPath = uriEncode(input.path, true);
  const canonicalQuery = canonicalQueryString(input.query ?? []);
  const canonical = canonicalRequest({
    method: input.method,
    canonicalPath,
    canonicalQuery,
    headers,
    payloadHash,
  });
  const scope = credentialScope(date, input.region, service);
  const toSign = await stringToSignFast(datetime, scope, canonical);
  const key = signingKey(input.credentials, date, input.region, service, input.cache);
  const sig = signature(key, toSign);
  send["authorization"] = authorizationHeader(
    input.credentials.accessKeyId,
    scope,
    headers.signedHeaders,
    sig,
  );
  const url = input.protocol + "//" + input.host + canonicalPath +
    (canonicalQuery ? "?" + canonicalQuery : "");
  return { url, headers: send, canonicalRequest: canonical, stringToSign: toSign };
}

/** What to presign: a GET of `path` that anyone holding the URL may run until it expires. */
export interface PresignInput {
  protocol: string;
  host: string;
  path: string;
  query?: readonly QueryParam[];
  credentials: Credentials;
  region: string;
  /** @default "s3" */
  service?: string;
  now: Date;
  /** Lifetime in seconds, 1 to 604800 (7 days). */
  expiresSeconds: number;
  cache?: SigningKeyCache;
}

/**
 * A presigned GET URL (query-string authentication, `X-Amz-Expires`), signing only `host`.
 * @throws {RangeError} when `expiresSeconds` is outside 1..604800
 */
export async function presignGetUrl(input: PresignInput): Promise<string> {
  const seconds = input.expiresSeconds;
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 604800) {
    throw new RangeError(`expiresSeconds must be an integer in 1..604800, got ${seconds}`);
  }
  const service = input.service ?? "s3";
  const datetime = amzDate(input.now);
  const date = datetime.slice(0, 8);
  const scope = credentialScope(date, input.region, service);
  const query: QueryParam[] = [
    ...(input.query ?? []),
    ["X-Amz-Algorithm", ALGORITHM],
    ["X-Amz-Credential", input.credentials.accessKeyId + "/" + scope],
    ["X-Amz-Date", datetime],
    ["X-Amz-Expires", String(seconds)],
    ["X-Amz-SignedHeaders", "host"],
  ];
  if (input.credentials.sessionToken) {
    query.push(["X-Amz-Security-Token", input.credentials.sessionToken]);
  }
  const canonicalPath = uriEncode(input.path, true);
  const canonicalQuery = canonicalQueryString(query);
  const canonical = canonicalRequest({
    method: "GET",
    canonicalPath,
    canonicalQuery,
    headers: canonicalHeaders({ host: input.host }),
    payloadHash: UNSIGNED_PAYLOAD,
  });
  const toSign = await stringToSignFast(datetime, scope, canonical);
  const key = signingKey(input.credentials, date, input.region, service, input.cache);
  const sig = signature(key, toSign);
  return input.protocol + "//" + input.host + canonicalPath + "?" + canonicalQuery +
    "&X-Amz-Signature=" + sig;
}

/** What to send without signing: the same URL encoding as a signed request. */
export interface UnsignedRequestInput {
  protocol: string;
  host: string;
  path: string;
  query?: readonly QueryParam[];
  headers?: Readonly<Record<string, string>>;
}

/**
 * An unsigned request (`credentials_source = "none"`: public buckets, anonymous MinIO): the URL
 * encoded exactly as {@link signRequest} would, the headers as given, and no Authorization,
 * `x-amz-date` or `x-amz-content-sha256` at all.
 */
export function unsignedRequest(
  input: UnsignedRequestInput,
): { url: string; headers: Record<string, string> } {
  const canonicalPath = uriEncode(input.path, true);
  const canonicalQuery = canonicalQueryString(input.query ?? []);
  return {
    url: input.protocol + "//" + input.host + canonicalPath +
      (canonicalQuery ? "?" + canonicalQuery : ""),
    headers: { ...input.headers },
  };
}
