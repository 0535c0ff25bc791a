// Pure parsers for S3 answers: the XML bodies of listings, batch deletes and multipart calls,
// and the mapping of S3 error codes and statuses to tierd's typed `StoreError`.
import {
  type DeleteFailure,
  type ListPage,
  type MultipartUpload,
  type ObjectHead,
  type ObjectInfo,
  type StoredChecksum,
  StoreError,
  type StoreErrorKind,
  type UserMetadata,
} from "../types.ts";
import {
  children,
  childText,
  decodeText,
  errorElement,
  parseXml,
  rootElement,
  snippet,
  type XmlNode,
  XmlSyntaxError,
} from "../_xml.ts";
import { Buffer } from "node:buffer";
import { bareEtag } from "../_rules.ts";
import { answerError, answerKind, replaceFailed, where } from "../_errors.ts";

/** What an S3 error body (or a bodiless error status) says, beyond the code. */
export class S3ErrorInfo extends Error {
  override readonly name = "S3ErrorInfo";
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    /** The region the server expects (AuthorizationHeaderMalformed, redirects). */
    readonly region?: string,
    /** The endpoint the server redirects to (PermanentRedirect). */
    readonly endpoint?: string,
    /** The server's clock (RequestTimeTooSkewed): `Date` header or `<ServerTime>`. */
    readonly serverTime?: Date,
    readonly requestId?: string,
  ) {
    super(message);
  }
}

const CODE_KINDS: Record<string, StoreErrorKind> = {
  NoSuchKey: "NotFound",
  NoSuchBucket: "NotFound",
  NoSuchUpload: "NotFound",
  NotFound: "NotFound",
  PreconditionFailed: "PreconditionFailed",
  InvalidRange: "InvalidRange",
  SlowDown: "Throttled",
  Throttling: "Throttled",
  ThrottlingException: "Throttled",
  RequestLimitExceeded: "Throttled",
  TooManyRequests: "Throttled",
  RequestThrottled: "Throttled",
  ServiceUnavailable: "Throttled",
  XMinioServerNotInitialized: "Throttled",
  InternalError: "Transport",
  RequestTimeout: "Transport",
  ConditionalRequestConflict: "Transport",
  OperationAborted: "Transport",
  IncompleteBody: "Transport",
  // The body did not hash to the checksum sent with it: damaged on the way, worth another try.
  BadDigest: "Transport",
  XAmzContentChecksumMismatch: "Transport",
  AccessDenied: "Auth",
  InvalidAccessKeyId: "Auth",
  SignatureDoesNotMatch: "Auth",
  ExpiredToken: "Auth",
  InvalidToken: "Auth",
  TokenRefreshRequired: "Auth",
  AccountProblem: "Auth",
  AllAccessDisabled: "Auth",
  InvalidSecurity: "Auth",
  RequestTimeTooSkewed: "Auth",
  AuthorizationHeaderMalformed: "Auth",
  AuthorizationQueryParametersError: "Auth",
  PermanentRedirect: "Auth",
  IllegalLocationConstraintException: "Auth",
  InvalidRegion: "Auth",
  // Completion checks: the same kind the fs and sim stores give (../_rules.ts planCompletion).
  InvalidPart: "PreconditionFailed",
  InvalidPartOrder: "PreconditionFailed",
  EntityTooSmall: "PreconditionFailed",
  NotImplemented: "Unsupported",
  XNotImplemented: "Unsupported",
};

/** The error kind for an S3 code and HTTP status: the code decides when known, else the status. */
export function errorKind(code: string, status: number): StoreErrorKind {
  const known = answerKind(CODE_KINDS, code, status);
  if (known) return known;
  if (status === 301 || status === 400 && code.includes("Region")) return "Auth";
  if (status === 307 || status === 408 || status === 409) return "Transport";
  // Other 4xx: S3 refused the request as built (InvalidArgument, KeyTooLongError…): "a request
  // no store would accept", as ../_rules.ts calls it. Retrying the same request cannot help.
  return "Unsupported";
}

const STATUS_CODES: Record<number, string> = {
  301: "PermanentRedirect",
  307: "TemporaryRedirect",
  400: "BadRequest",
  401: "Unauthorized",
  403: "AccessDenied",
  404: "NotFound",
  405: "MethodNotAllowed",
  409: "Conflict",
  412: "PreconditionFailed",
  416: "InvalidRange",
  429: "TooManyRequests",
  500: "InternalError",
  501: "NotImplemented",
  503: "SlowDown",
};

/**
 * Reads an error answer: the `<Error>` body when there is one (HEAD answers have none), else the
 * status, plus the hints S3 puts in headers (`x-amz-bucket-region`, `Date`).
 */
export function parseErrorInfo(status: number, headers: Headers, body: Uint8Array): S3ErrorInfo {
  let code = STATUS_CODES[status] ?? `Http${status}`;
  let message = "";
  let region = headers.get("x-amz-bucket-region") ?? undefined;
  let endpoint: string | undefined;
  let serverTime: Date | undefined;
  let requestId = headers.get("x-amz-request-id") ?? undefined;
  const { error, unparsed } = errorElement(body);
  if (error) {
    code = childText(error, "Code")?.trim() || code;
    message = childText(error, "Message")?.trim() ?? "";
    region = childText(error, "Region")?.trim() || regionFromMessage(message) || region;
    endpoint = childText(error, "Endpoint")?.trim() || undefined;
    requestId = childText(error, "RequestId")?.trim() || requestId;
    const st = childText(error, "ServerTime")?.trim();
    if (st && !Number.isNaN(Date.parse(st))) serverTime = new Date(st);
  }
  const date = headers.get("date");
  if (date && !Number.isNaN(Date.parse(date))) serverTime = new Date(date);
  if (!message) message = unparsed ? `unexpected error body: ${unparsed}` : `HTTP ${status}`;
  return new S3ErrorInfo(code, message, status, region, endpoint, serverTime, requestId);
}

function regionFromMessage(message: string): string | undefined {
  // "the region 'us-east-1' is wrong; expecting 'eu-west-1'"
  return /expecting '([a-z0-9-]+)'/.exec(message)?.[1];
}

/** Builds the typed error for an S3 error answer. `redact` scrubs secrets from the message. */
export function s3Error(
  info: S3ErrorInfo,
  op: string,
  key: string | undefined,
  redact: (text: string) => string = (t) => t,
  /** Appended to the message, e.g. which credentials were refused. */
  extraHint = "",
): StoreError {
  const hint =
    (info.region && (info.code === "AuthorizationHeaderMalformed" || info.status === 301)
      ? ` (the bucket's region is '${info.region}')`
      : "") + extraHint;
  const clean = redact(info.message) === info.message ? info : new S3ErrorInfo(
    info.code,
    redact(info.message),
    info.status,
    info.region,
    info.endpoint,
    info.serverTime,
    info.requestId,
  );
  return answerError(errorKind(info.code, info.status), info, {
    op,
    key,
    redact,
    hint,
    cause: clean,
  });
}

/**
 * The typed error for a PutObject with `If-Match` that S3 refused for its condition: a 412
 * PreconditionFailed (the object has another ETag) and a 404 NoSuchKey (there is no object to
 * replace) are both `PreconditionFailed`. Undefined for any other answer, which means what it
 * means elsewhere: a 409 ConditionalRequestConflict (a concurrent write to the key) is
 * `Transport`, and another attempt gets 412 if the other write won; NoSuchBucket is `NotFound`.
 * @param options.redact scrubs secrets out of the message
 * @returns the error to throw, or undefined for an answer the condition did not decide
 */
export function replaceRefusal(
  info: S3ErrorInfo,
  key: string,
  options: { redact?: (text: string) => string } = {},
): StoreError | undefined {
  const { redact = (t: string) => t } = options;
  const absent = info.status === 404 && (info.code === "NoSuchKey" || info.code === "NotFound");
  if (info.status !== 412 && !absent) return undefined;
  return replaceFailed(s3Error(info, "put", key, redact), "If-Match: no object to replace");
}

/** A `Malformed` error for a body tierd could not read. */
export function malformed(
  op: string,
  key: string | undefined,
  why: string,
  text: string,
): StoreError {
  return new StoreError("Malformed", `${where(op, key)}: ${why}: ${snippet(text)}`, { op, key });
}

function parseRoot(body: Uint8Array, root: string, op: string, key?: string): XmlNode {
  const text = decodeText(body);
  let doc: XmlNode;
  try {
    doc = parseXml(text);
  } catch (err) {
    if (err instanceof XmlSyntaxError) throw malformed(op, key, err.message, text);
    throw err;
  }
  const node = rootElement(doc, root);
  if (node) return node;
  const error = rootElement(doc, "Error");
  if (error) {
    // A 200 that carries <Error> (CompleteMultipartUpload, CopyObject) is a failure.
    const code = childText(error, "Code")?.trim() || "InternalError";
    const message = childText(error, "Message")?.trim() || "error in a 200 response";
    throw s3Error(new S3ErrorInfo(code, message, 200), op, key);
  }
  throw malformed(op, key, `expected <${root}>`, text);
}

/** Decodes a value S3 URL-encoded for `encoding-type=url` (`+` is a space there). */
export function decodeUrlValue(value: string, op: string): string {
  try {
    return decodeURIComponent(value.replaceAll("+", " "));
  } catch {
    throw new StoreError("Malformed", `${op}: bad URL-encoded value ${JSON.stringify(value)}`, {
      op,
    });
  }
}

function parseSize(text: string | undefined, op: string, key: string): number {
  const size = Number(text?.trim());
  if (text === undefined || !Number.isSafeInteger(size) || size < 0) {
    throw new StoreError("Malformed", `${op}: bad <Size> ${JSON.stringify(text)} for ${key}`, {
      op,
      key,
    });
  }
  return size;
}

function parseDate(text: string | undefined): Date | undefined {
  if (!text) return undefined;
  const ms = Date.parse(text.trim());
  return Number.isNaN(ms) ? undefined : new Date(ms);
}

function isTrue(text: string | undefined): boolean {
  return text?.trim().toLowerCase() === "true";
}

/** A ListObjectsV2 page (`ListBucketResult`), keys decoded when `EncodingType` is `url`. */
export function parseListObjectsV2(body: Uint8Array): ListPage {
  const op = "list";
  const result = parseRoot(body, "ListBucketResult", op);
  const urlEncoded = childText(result, "EncodingType")?.trim() === "url";
  const objects: ObjectInfo[] = children(result, "Contents").map((entry) => {
    const raw = childText(entry, "Key");
    if (raw === undefined) {
      throw new StoreError("Malformed", `${op}: <Contents> without <Key>`, { op });
    }
    const key = urlEncoded ? decodeUrlValue(raw, op) : raw;
    const info: ObjectInfo = { key, size: parseSize(childText(entry, "Size"), op, key) };
    const etag = childText(entry, "ETag");
    if (etag) info.etag = bareEtag(etag.trim());
    const modified = parseDate(childText(entry, "LastModified"));
    if (modified) info.lastModified = modified;
    return info;
  });
  const page: ListPage = { objects };
  if (isTrue(childText(result, "IsTruncated"))) {
    const token = childText(result, "NextContinuationToken")?.trim();
    if (!token) {
      throw new StoreError("Malformed", `${op}: truncated listing without NextContinuationToken`, {
        op,
      });
    }
    page.continuationToken = token;
  }
  return page;
}

/**
 * The failures in a DeleteObjects answer (`DeleteResult`). A key that did not exist is not a
 * failure (S3 reports it deleted; some servers say `NoSuchKey`).
 */
export function parseDeleteResult(body: Uint8Array): DeleteFailure[] {
  const op = "deleteMany";
  const result = parseRoot(body, "DeleteResult", op);
  const failures: DeleteFailure[] = [];
  for (const error of children(result, "Error")) {
    const key = childText(error, "Key") ?? "";
    const code = childText(error, "Code")?.trim() || "InternalError";
    if (code === "NoSuchKey") continue;
    const message = childText(error, "Message")?.trim() || code;
    failures.push({ key, error: s3Error(new S3ErrorInfo(code, message, 200), op, key) });
  }
  return failures;
}

/** The upload id from CreateMultipartUpload (`InitiateMultipartUploadResult`). */
export function parseInitiateMultipart(body: Uint8Array, key: string): string {
  const op = "createMultipart";
  const result = parseRoot(body, "InitiateMultipartUploadResult", op, key);
  const uploadId = childText(result, "UploadId")?.trim();
  if (!uploadId) throw malformed(op, key, "no <UploadId>", decodeText(body));
  return uploadId;
}

/** The ETag of the finished object from CompleteMultipartUpload; a 200 `<Error>` throws. */
export function parseCompleteMultipart(body: Uint8Array, key: string): string | undefined {
  const result = parseRoot(body, "CompleteMultipartUploadResult", "completeMultipart", key);
  const etag = childText(result, "ETag")?.trim();
  return etag ? bareEtag(etag) : undefined;
}

/** One page of ListMultipartUploads, with the markers for the next page when truncated. */
export interface MultipartUploadsPage {
  uploads: MultipartUpload[];
  next?: { keyMarker: string; uploadIdMarker: string };
}

/** Parses `ListMultipartUploadsResult`, keys decoded when `EncodingType` is `url`. */
export function parseListMultipartUploads(body: Uint8Array): MultipartUploadsPage {
  const op = "listMultipartUploads";
  const result = parseRoot(body, "ListMultipartUploadsResult", op);
  const urlEncoded = childText(result, "EncodingType")?.trim() === "url";
  const decode = (v: string) => (urlEncoded ? decodeUrlValue(v, op) : v);
  const uploads = children(result, "Upload").map((upload) => {
    const key = childText(upload, "Key");
    const uploadId = childText(upload, "UploadId")?.trim();
    if (key === undefined || !uploadId) {
      throw new StoreError("Malformed", `${op}: <Upload> without <Key> or <UploadId>`, { op });
    }
    const entry: MultipartUpload = { key: decode(key), uploadId };
    const initiated = parseDate(childText(upload, "Initiated"));
    if (initiated) entry.initiated = initiated;
    return entry;
  });
  const page: MultipartUploadsPage = { uploads };
  if (isTrue(childText(result, "IsTruncated"))) {
    const keyMarker = childText(result, "NextKeyMarker");
    const uploadIdMarker = childText(result, "NextUploadIdMarker")?.trim();
    if (!keyMarker || !uploadIdMarker) {
      throw new StoreError("Malformed", `${op}: truncated listing without next markers`, { op });
    }
    page.next = { keyMarker: decode(keyMarker), uploadIdMarker };
  }
  return page;
}

/** `x-amz-meta-*` response headers as user metadata (names lowercased, prefix dropped). */
export function metadataFromHeaders(headers: Headers): UserMetadata {
  const metadata: UserMetadata = {};
  for (const [name, value] of headers) {
    if (name.startsWith("x-amz-meta-")) metadata[name.slice(11)] = value;
  }
  return metadata;
}

/** A HEAD answer as an `ObjectHead`. */
export function parseHead(key: string, headers: Headers): ObjectHead {
  const length = headers.get("content-length");
  const size = length === null ? NaN : Number(length);
  if (!Number.isSafeInteger(size) || size < 0) {
    throw new StoreError("Malformed", `head ${key}: no usable Content-Length`, { op: "head", key });
  }
  const head: ObjectHead = { key, size, metadata: metadataFromHeaders(headers) };
  const etag = headers.get("etag");
  // S3's version is the ETag: what If-Match compares.
  if (etag) head.etag = head.version = bareEtag(etag);
  const modified = parseDate(headers.get("last-modified") ?? undefined);
  if (modified) head.lastModified = modified;
  const checksums = storedChecksums(headers);
  // A single PUT's ETag is the MD5 of its bytes on AWS and most S3 implementations (not under
  // SSE-KMS or SSE-C, nor for a multipart upload's `…-N`): offered as one, which can prove a copy
  // and never condemns one (src/tier/verify_content.ts).
  if (head.etag && /^[0-9a-f]{32}$/i.test(head.etag)) {
    checksums.push({
      algorithm: "md5",
      value: Buffer.from(head.etag, "hex").toString("base64"),
      type: "full",
    });
  }
  if (checksums.length > 0) head.checksums = checksums;
  return head;
}

/**
 * The checksums a HEAD with `x-amz-checksum-mode: ENABLED` answers: `x-amz-checksum-{algorithm}`
 * for the algorithms tierd computes, full-object unless `x-amz-checksum-type` says COMPOSITE or
 * the value ends in `-N` (a checksum of the parts' checksums).
 */
export function storedChecksums(headers: Headers): StoredChecksum[] {
  const out: StoredChecksum[] = [];
  const declared = headers.get("x-amz-checksum-type")?.toUpperCase();
  for (const algorithm of ["crc32", "crc64nvme", "crc32c", "sha256"] as const) {
    const raw = headers.get(`x-amz-checksum-${algorithm}`)?.trim();
    if (!raw) continue;
    const composite = declared === "COMPOSITE" || /-\d+$/.test(raw);
    out.push({
      algorithm,
      value: raw.replace(/-\d+$/, ""),
      type: composite ? "composite" : "full",
    });
  }
  return out;
}
