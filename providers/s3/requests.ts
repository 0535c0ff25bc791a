// Pure builders for the S3 requests tierd sends: where a bucket and key live (path or virtual
// host), and the method, raw path, query, headers and body of each operation. Signing and
// sending happen in the store; nothing here touches the network or the clock.
import { Buffer } from "node:buffer";
import type { Checksum, ChecksumAlgorithm, CompletedPart, UserMetadata } from "../types.ts";
import { xmlEscape } from "../_xml.ts";
import { bareEtag } from "../_rules.ts";
import { type ByteRange, rangeHeader } from "../_ranges.ts";
import type { QueryParam } from "./sigv4.ts";

/** How the bucket is addressed: `endpoint/bucket/key` or `bucket.endpoint/key`. */
export type AddressStyle = "path" | "virtual";

/** Where requests go. Built once from the configuration by {@link resolveLocation}. */
export interface S3Location {
  protocol: "http:" | "https:";
  /** Endpoint host with its port when not the scheme's default, e.g. `127.0.0.1:9000`. */
  endpointHost: string;
  /** Path prefix of the endpoint (`""` for a bare host), never ending in `/`. */
  basePath: string;
  bucket: string;
  style: AddressStyle;
}

/** An unsigned request. `path` is raw (not yet percent-encoded); the signer encodes it once. */
export interface S3Request {
  method: "GET" | "HEAD" | "PUT" | "POST" | "DELETE";
  host: string;
  path: string;
  query: QueryParam[];
  /** Lowercase names; all of them are signed. */
  headers: Record<string, string>;
  body?: Uint8Array;
}

/** True for AWS's own S3 hosts, where virtual-host addressing is the default. */
export function isAwsHost(hostname: string): boolean {
  return /(^|\.)amazonaws\.com(\.cn)?$/.test(hostname);
}

/** A bucket name that can be a DNS label under TLS (no dots, no uppercase). */
export function isVirtualHostable(bucket: string, protocol: string): boolean {
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) return false;
  return protocol === "http:" || !bucket.includes(".");
}

/**
 * Resolves the endpoint, bucket and address style into a {@link S3Location}.
 * `auto` is virtual-host style for AWS hosts (when the bucket name allows it), path style
 * elsewhere (MinIO, Ceph, localhost).
 * @throws {TypeError} for an endpoint that is not an http(s) URL
 */
export function resolveLocation(options: {
  endpoint?: string;
  region: string;
  bucket: string;
  urlStyle: "auto" | "path" | "virtual";
}): S3Location {
  const endpoint = options.endpoint || `https://s3.${options.region}.amazonaws.com`;
  const url = new URL(endpoint);
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`S3 endpoint must be http or https: ${endpoint}`);
  }
  const style: AddressStyle = options.urlStyle === "auto"
    ? (isAwsHost(url.hostname) && isVirtualHostable(options.bucket, url.protocol)
      ? "virtual"
      : "path")
    : options.urlStyle;
  return {
    protocol: url.protocol,
    endpointHost: url.host,
    basePath: url.pathname.replace(/\/+$/, ""),
    bucket: options.bucket,
    style,
  };
}

/**
 * Refuses keys S3 cannot address through `fetch` (empty, too long, lone surrogates, `.`/`..`
 * path segments that URL parsing would resolve): the check the GCS and Azure providers share.
 * @throws {StoreError} `Unsupported` with code `InvalidKey`
 */
export { checkPathKey as checkKey } from "../_url.ts";

function target(loc: S3Location, key?: string): { host: string; path: string } {
  const suffix = key === undefined ? "" : key;
  if (loc.style === "virtual") {
    return { host: `${loc.bucket}.${loc.endpointHost}`, path: `${loc.basePath}/${suffix}` };
  }
  return {
    host: loc.endpointHost,
    path: key === undefined
      ? `${loc.basePath}/${loc.bucket}`
      : `${loc.basePath}/${loc.bucket}/${suffix}`,
  };
}

function metadataHeaders(
  headers: Record<string, string>,
  metadata: UserMetadata | undefined,
  contentType: string | undefined,
): Record<string, string> {
  if (metadata) {
    for (const [name, value] of Object.entries(metadata)) headers[`x-amz-meta-${name}`] = value;
  }
  if (contentType) headers["content-type"] = contentType;
  return headers;
}

/**
 * How every object tierd writes is stored: its storage class and server-side encryption, sent on
 * PutObject and CreateMultipartUpload (UploadPart takes no SSE-KMS header: the parts are
 * encrypted as the upload was asked; CompleteMultipartUpload neither).
 */
export interface WriteSettings {
  /** `x-amz-storage-class`, e.g. `STANDARD_IA`. */
  storageClass?: string;
  /** `x-amz-server-side-encryption`. */
  sse?: "AES256" | "aws:kms";
  /** `x-amz-server-side-encryption-aws-kms-key-id`. */
  kmsKeyId?: string;
  /** `x-amz-server-side-encryption-bucket-key-enabled: true`. */
  bucketKey?: boolean;
  /** `x-amz-server-side-encryption-context`: base64 of the JSON. */
  context?: Record<string, string>;
}

function writeHeaders(headers: Record<string, string>, w: WriteSettings | undefined) {
  if (!w) return headers;
  if (w.storageClass) headers["x-amz-storage-class"] = w.storageClass;
  if (w.sse) headers["x-amz-server-side-encryption"] = w.sse;
  if (w.sse === "aws:kms") {
    if (w.kmsKeyId) headers["x-amz-server-side-encryption-aws-kms-key-id"] = w.kmsKeyId;
    if (w.bucketKey) headers["x-amz-server-side-encryption-bucket-key-enabled"] = "true";
    if (w.context && Object.keys(w.context).length > 0) {
      const json = JSON.stringify(w.context);
      headers["x-amz-server-side-encryption-context"] = Buffer.from(json).toString("base64");
    }
  }
  return headers;
}

/** The header S3 takes (and answers) a checksum of `algorithm` in. */
export function checksumHeader(algorithm: ChecksumAlgorithm): string {
  return `x-amz-checksum-${algorithm}`;
}

/** S3's name of an algorithm (`x-amz-checksum-algorithm`, `<ChecksumCRC64NVME>`). */
export function checksumName(algorithm: ChecksumAlgorithm): string {
  return algorithm.toUpperCase();
}

/** A body's checksum as S3 takes it: `x-amz-checksum-{alg}`, or `Content-MD5` for md5. */
function checksumHeaders(headers: Record<string, string>, checksum: Checksum | undefined) {
  if (!checksum) return headers;
  const name = checksum.algorithm === "md5" ? "content-md5" : checksumHeader(checksum.algorithm);
  headers[name] = checksum.value;
  return headers;
}

/**
 * PutObject; `ifAbsent` adds `If-None-Match: *` (412 when the key exists); `ifMatch`, a bare
 * ETag, adds `If-Match: "{etag}"` (412 when the object has another ETag, 404 NoSuchKey when there
 * is none); `checksum` is sent as `x-amz-checksum-{algorithm}`, which S3 verifies on ingest and
 * keeps with the object.
 */
export function putObject(
  loc: S3Location,
  key: string,
  body: Uint8Array,
  options: {
    ifAbsent?: boolean;
    ifMatch?: string;
    metadata?: UserMetadata;
    contentType?: string;
    checksum?: Checksum;
    write?: WriteSettings;
  } = {},
): S3Request {
  const headers = checksumHeaders(
    writeHeaders(metadataHeaders({}, options.metadata, options.contentType), options.write),
    options.checksum,
  );
  if (options.ifAbsent) headers["if-none-match"] = "*";
  if (options.ifMatch !== undefined) headers["if-match"] = `"${bareEtag(options.ifMatch)}"`;
  return { method: "PUT", ...target(loc, key), query: [], headers, body };
}

/** GetObject, optionally ranged. */
export function getObject(
  loc: S3Location,
  key: string,
  range?: ByteRange,
): S3Request {
  const headers: Record<string, string> = {};
  if (range) headers["range"] = rangeHeader(range);
  return { method: "GET", ...target(loc, key), query: [], headers };
}

/** HeadObject; with `checksums`, `x-amz-checksum-mode: ENABLED` (S3 answers the stored ones). */
export function headObject(
  loc: S3Location,
  key: string,
  options: { checksums?: boolean } = {},
): S3Request {
  const headers: Record<string, string> = options.checksums
    ? { "x-amz-checksum-mode": "ENABLED" }
    : {};
  return { method: "HEAD", ...target(loc, key), query: [], headers };
}

/** DeleteObject, for keys that cannot travel in a DeleteObjects XML body. */
export function deleteObject(loc: S3Location, key: string): S3Request {
  return { method: "DELETE", ...target(loc, key), query: [], headers: {} };
}

/** S3's limit on keys per DeleteObjects request. */
export const DELETE_BATCH_MAX = 1000;

/** The `<Delete>` document for DeleteObjects, quiet mode (only failures come back). */
export function deleteObjectsBody(keys: readonly string[]): Uint8Array {
  let xml = '<?xml version="1.0" encoding="UTF-8"?>' +
    '<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet>';
  for (const key of keys) xml += `<Object><Key>${xmlEscape(key)}</Key></Object>`;
  return new TextEncoder().encode(xml + "</Delete>");
}

/**
 * DeleteObjects (`POST ?delete`) for up to {@link DELETE_BATCH_MAX} keys. S3 requires a
 * `Content-MD5` of the body; pass the base64 MD5 digest.
 */
export function deleteObjects(loc: S3Location, body: Uint8Array, contentMd5: string): S3Request {
  return {
    method: "POST",
    ...target(loc),
    query: [["delete", ""]],
    headers: { "content-md5": contentMd5, "content-type": "application/xml" },
    body,
  };
}

/** ListObjectsV2 with URL-encoded keys in the answer (keys may hold characters XML cannot). */
export function listObjectsV2(
  loc: S3Location,
  prefix: string,
  options: { maxKeys?: number; continuationToken?: string } = {},
): S3Request {
  const query: QueryParam[] = [["list-type", "2"], ["encoding-type", "url"]];
  if (prefix) query.push(["prefix", prefix]);
  if (options.maxKeys !== undefined) {
    query.push(["max-keys", String(Math.max(1, Math.min(1000, Math.floor(options.maxKeys))))]);
  }
  if (options.continuationToken) query.push(["continuation-token", options.continuationToken]);
  return { method: "GET", ...target(loc), query, headers: {} };
}

/**
 * CreateMultipartUpload (`POST ?uploads`). A CRC `checksumAlgorithm` asks for a full-object
 * checksum (`x-amz-checksum-type: FULL_OBJECT`): every part must then carry one, and S3 derives
 * the object's from them; SHA-256 can only be composite (S3's default type, not sent).
 */
export function createMultipartUpload(
  loc: S3Location,
  key: string,
  options: {
    metadata?: UserMetadata;
    contentType?: string;
    checksumAlgorithm?: ChecksumAlgorithm;
    write?: WriteSettings;
  } = {},
): S3Request {
  const headers = writeHeaders(
    metadataHeaders({}, options.metadata, options.contentType),
    options.write,
  );
  if (options.checksumAlgorithm) {
    headers["x-amz-checksum-algorithm"] = checksumName(options.checksumAlgorithm);
    if (options.checksumAlgorithm !== "sha256") headers["x-amz-checksum-type"] = "FULL_OBJECT";
  }
  return { method: "POST", ...target(loc, key), query: [["uploads", ""]], headers };
}

/** UploadPart (`PUT ?partNumber=N&uploadId=…`), with the part's checksum when given. */
export function uploadPart(
  loc: S3Location,
  key: string,
  uploadId: string,
  partNumber: number,
  body: Uint8Array,
  checksum?: Checksum,
): S3Request {
  return {
    method: "PUT",
    ...target(loc, key),
    query: [["partNumber", String(partNumber)], ["uploadId", uploadId]],
    headers: checksumHeaders({}, checksum),
    body,
  };
}

/**
 * The `<CompleteMultipartUpload>` document: parts in ascending order, ETags unquoted, each part's
 * checksum (of `algorithm`) where it has one — S3 wants them back when the upload has one.
 */
export function completeMultipartBody(
  parts: readonly CompletedPart[],
  algorithm: ChecksumAlgorithm = "crc64nvme",
): Uint8Array {
  const sorted = [...parts].sort((a, b) => a.partNumber - b.partNumber);
  const element = `Checksum${checksumName(algorithm)}`;
  let xml = '<?xml version="1.0" encoding="UTF-8"?>' +
    '<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">';
  for (const part of sorted) {
    const checksum = part.checksum === undefined
      ? ""
      : `<${element}>${xmlEscape(part.checksum)}</${element}>`;
    xml += `<Part><PartNumber>${part.partNumber}</PartNumber>` +
      `<ETag>${xmlEscape(bareEtag(part.etag))}</ETag>${checksum}</Part>`;
  }
  return new TextEncoder().encode(xml + "</CompleteMultipartUpload>");
}

/** CompleteMultipartUpload (`POST ?uploadId=…`); `ifAbsent` adds `If-None-Match: *`. */
export function completeMultipartUpload(
  loc: S3Location,
  key: string,
  uploadId: string,
  parts: readonly CompletedPart[],
  options: { ifAbsent?: boolean; algorithm?: ChecksumAlgorithm } = {},
): S3Request {
  const headers: Record<string, string> = { "content-type": "application/xml" };
  if (options.ifAbsent) headers["if-none-match"] = "*";
  return {
    method: "POST",
    ...target(loc, key),
    query: [["uploadId", uploadId]],
    headers,
    body: completeMultipartBody(parts, options.algorithm),
  };
}

/** AbortMultipartUpload (`DELETE ?uploadId=…`). */
export function abortMultipartUpload(loc: S3Location, key: string, uploadId: string): S3Request {
  return { method: "DELETE", ...target(loc, key), query: [["uploadId", uploadId]], headers: {} };
}

/** ListMultipartUploads (`GET ?uploads&prefix=…`), one page from the given markers. */
export function listMultipartUploads(
  loc: S3Location,
  prefix: string,
  markers: { keyMarker?: string; uploadIdMarker?: string } = {},
): S3Request {
  const query: QueryParam[] = [["uploads", ""], ["encoding-type", "url"]];
  if (prefix) query.push(["prefix", prefix]);
  if (markers.keyMarker) query.push(["key-marker", markers.keyMarker]);
  if (markers.uploadIdMarker) query.push(["upload-id-marker", markers.uploadIdMarker]);
  return { method: "GET", ...target(loc), query, headers: {} };
}

/** CreateBucket, with a LocationConstraint outside us-east-1 (used by test fixtures and setup). */
export function createBucket(loc: S3Location, region: string): S3Request {
  const body = region === "us-east-1" ? undefined : new TextEncoder().encode(
    '<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
      `<LocationConstraint>${xmlEscape(region)}</LocationConstraint></CreateBucketConfiguration>`,
  );
  return { method: "PUT", ...target(loc), query: [], headers: {}, body };
}
