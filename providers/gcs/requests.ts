// Pure builders for the GCS JSON API requests tierd sends: media and multipart (related)
// uploads with `ifGenerationMatch` (0 to create, a generation to replace), media downloads with
// `Range`, object metadata, deletes, listings, and compose. Authorization and sending happen in
// the store.
// https://cloud.google.com/storage/docs/json_api/v1/objects
import { parseEndpoint, type QueryParam, queryString } from "../_url.ts";
import { type ByteRange, rangeHeader } from "../_ranges.ts";
import type { Checksum, UserMetadata } from "../types.ts";

/** Most sources one compose request takes. */
export const MAX_COMPOSE_SOURCES = 32;

/** Most names in one list page. */
export const MAX_LIST_RESULTS = 1000;

/** Where requests go. Built once by {@link resolveLocation}. */
export interface GcsLocation {
  /** `https://storage.googleapis.com` or the emulator's origin. */
  origin: string;
  /** Path prefix of the endpoint (`""` normally). */
  basePath: string;
  bucket: string;
}

/** An unauthorized request; `url` is complete. */
export interface GcsRequest {
  method: "GET" | "POST" | "DELETE";
  url: string;
  /** Lowercase names. `authorization` is added by the store. */
  headers: Record<string, string>;
  body?: Uint8Array;
}

/**
 * Resolves bucket and endpoint (empty = `https://storage.googleapis.com`).
 * @throws {TypeError} for an endpoint that is not an http(s) URL
 */
export function resolveLocation(options: { bucket: string; endpoint?: string }): GcsLocation {
  const { origin, basePath } = parseEndpoint(
    options.endpoint || "https://storage.googleapis.com",
    "GCS",
  );
  return { origin, basePath, bucket: options.bucket };
}

/** An object name as one path segment: `/` is `%2F` (encodeURIComponent). */
export function encodeObjectName(name: string): string {
  return encodeURIComponent(name);
}

function api(loc: GcsLocation, path: string, query: QueryParam[] = []): string {
  return `${loc.origin}${loc.basePath}/storage/v1/b/${encodeURIComponent(loc.bucket)}${path}${
    queryString(query)
  }`;
}

function objectUrl(loc: GcsLocation, name: string, query: QueryParam[] = []): string {
  return api(loc, `/o/${encodeObjectName(name)}`, query);
}

function uploadUrl(loc: GcsLocation, query: QueryParam[]): string {
  return `${loc.origin}${loc.basePath}/upload/storage/v1/b/${encodeURIComponent(loc.bucket)}/o${
    queryString(query)
  }`;
}

const OCTET_STREAM = "application/octet-stream";

/**
 * How the objects tierd writes are stored: the final objects' storage class, and the Cloud KMS key
 * (CMEK) of every object written, staged parts included.
 */
export interface GcsWriteSettings {
  /** The object resource's `storageClass`, e.g. `NEARLINE`. */
  storageClass?: string;
  /** `kmsKeyName`: `projects/P/locations/L/keyRings/R/cryptoKeys/K`. */
  kmsKeyName?: string;
}

/**
 * An upload in one request. Without metadata or checksum a media upload (`uploadType=media`,
 * the body as is); with either a multipart/related upload (`uploadType=multipart`: a JSON part
 * with the name, metadata and `crc32c`/`md5Hash`, then the bytes), the only one-request upload
 * that carries them. GCS checks the bytes against the hash given and refuses them (400) if they
 * differ. `ifAbsent` adds `ifGenerationMatch=0`: 412 when the object exists; `ifMatch`, a
 * generation, adds `ifGenerationMatch={generation}`: 412 when the live object has another one or
 * there is none.
 */
export function insertObject(
  loc: GcsLocation,
  name: string,
  body: Uint8Array,
  options: {
    ifAbsent?: boolean;
    /** The generation the live object must have (a positive decimal; see {@link isGeneration}). */
    ifMatch?: string;
    metadata?: UserMetadata;
    contentType?: string;
    /** A CRC-32C or MD5 of the body, for GCS to verify and keep. */
    checksum?: Checksum;
    /** Storage class and KMS key. */
    write?: GcsWriteSettings;
    /** For tests: the multipart boundary. @default random */
    boundary?: string;
  } = {},
): GcsRequest {
  const contentType = options.contentType || OCTET_STREAM;
  const hasMetadata = options.metadata !== undefined && Object.keys(options.metadata).length > 0;
  const storageClass = options.write?.storageClass;
  const related = hasMetadata || options.checksum !== undefined || storageClass !== undefined;
  const query: QueryParam[] = [["uploadType", related ? "multipart" : "media"]];
  if (!related) query.push(["name", name]);
  if (options.write?.kmsKeyName) query.push(["kmsKeyName", options.write.kmsKeyName]);
  if (options.ifAbsent) query.push(["ifGenerationMatch", "0"]);
  if (options.ifMatch !== undefined) {
    // `0` means "no live object" to GCS: a replacement must never turn into a create.
    if (!isGeneration(options.ifMatch)) {
      throw new RangeError(`ifMatch ${JSON.stringify(options.ifMatch)} is not a generation`);
    }
    query.push(["ifGenerationMatch", options.ifMatch]);
  }
  if (!related) {
    return {
      method: "POST",
      url: uploadUrl(loc, query),
      headers: { "content-type": contentType },
      body,
    };
  }
  const resource: Record<string, unknown> = { name, contentType };
  if (hasMetadata) resource.metadata = options.metadata;
  if (options.checksum) resource[hashField(options.checksum)] = options.checksum.value;
  if (storageClass) resource.storageClass = storageClass;
  const parts = multipartRelated(JSON.stringify(resource), body, contentType, options.boundary);
  return {
    method: "POST",
    url: uploadUrl(loc, query),
    headers: { "content-type": `multipart/related; boundary=${parts.boundary}` },
    body: parts.body,
  };
}

/** The object resource's field for a checksum. */
function hashField(checksum: Checksum): string {
  if (checksum.algorithm === "crc32c") return "crc32c";
  if (checksum.algorithm === "md5") return "md5Hash";
  throw new RangeError(`GCS keeps no ${checksum.algorithm} checksum`);
}

function randomBoundary(): string {
  return "tierd-" +
    Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0"))
      .join("");
}

function includes(haystack: Uint8Array, needle: Uint8Array): boolean {
  const first = needle[0];
  for (
    let i = haystack.indexOf(first);
    i >= 0 && i <= haystack.length - needle.length;
    i = haystack.indexOf(first, i + 1)
  ) {
    let j = 1;
    while (j < needle.length && haystack[i + j] === needle[j]) j++;
    if (j === needle.length) return true;
  }
  return false;
}

/**
 * A `multipart/related` body: the JSON resource, then the media. The boundary is random and
 * checked against the media, so it never occurs inside it.
 */
export function multipartRelated(
  resourceJson: string,
  media: Uint8Array,
  mediaType: string,
  boundary?: string,
): { boundary: string; body: Uint8Array } {
  const encoder = new TextEncoder();
  let chosen = boundary ?? randomBoundary();
  while (includes(media, encoder.encode(`--${chosen}`))) chosen = randomBoundary();
  const head = encoder.encode(
    `--${chosen}\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n${resourceJson}\r\n` +
      `--${chosen}\r\ncontent-type: ${mediaType}\r\n\r\n`,
  );
  const tail = encoder.encode(`\r\n--${chosen}--\r\n`);
  const body = new Uint8Array(head.length + media.length + tail.length);
  body.set(head, 0);
  body.set(media, head.length);
  body.set(tail, head.length + media.length);
  return { boundary: chosen, body };
}

/** True for what GCS could hand out as a generation: a positive decimal. */
export function isGeneration(value: string): boolean {
  return /^[1-9][0-9]*$/.test(value);
}

/** The object's bytes (`alt=media`), optionally ranged. */
export function getMedia(
  loc: GcsLocation,
  name: string,
  range?: ByteRange,
): GcsRequest {
  const headers: Record<string, string> = {};
  if (range) headers["range"] = rangeHeader(range);
  return { method: "GET", url: objectUrl(loc, name, [["alt", "media"]]), headers };
}

/** The object resource (size, generation, metadata…). */
export function getObject(loc: GcsLocation, name: string): GcsRequest {
  return { method: "GET", url: objectUrl(loc, name), headers: {} };
}

/** Deletes the live generation of an object. */
export function deleteObject(loc: GcsLocation, name: string): GcsRequest {
  return { method: "DELETE", url: objectUrl(loc, name), headers: {} };
}

/** One page of objects under `prefix`. */
export function listObjects(
  loc: GcsLocation,
  prefix: string,
  options: { maxResults?: number; pageToken?: string } = {},
): GcsRequest {
  const query: QueryParam[] = [];
  if (prefix) query.push(["prefix", prefix]);
  if (options.maxResults !== undefined && Number.isFinite(options.maxResults)) {
    const n = Math.max(1, Math.min(MAX_LIST_RESULTS, Math.floor(options.maxResults)));
    query.push(["maxResults", String(n)]);
  }
  if (options.pageToken) query.push(["pageToken", options.pageToken]);
  return { method: "GET", url: api(loc, "/o", query), headers: {} };
}

/** A compose source: the name, and the generation to take when known. */
export interface ComposeSource {
  name: string;
  generation?: string;
}

/**
 * Compose (`POST …/o/{destination}/compose`): concatenates up to 32 sources of the bucket into
 * the destination, with the given metadata. `ifAbsent` adds `ifGenerationMatch=0`.
 */
export function composeObject(
  loc: GcsLocation,
  destination: string,
  sources: readonly ComposeSource[],
  options: {
    ifAbsent?: boolean;
    metadata?: UserMetadata;
    contentType?: string;
    write?: GcsWriteSettings;
  } = {},
): GcsRequest {
  if (sources.length === 0 || sources.length > MAX_COMPOSE_SOURCES) {
    throw new RangeError(`compose takes 1..${MAX_COMPOSE_SOURCES} sources, got ${sources.length}`);
  }
  const query: QueryParam[] = options.ifAbsent ? [["ifGenerationMatch", "0"]] : [];
  if (options.write?.kmsKeyName) query.push(["kmsKeyName", options.write.kmsKeyName]);
  const destinationResource: Record<string, unknown> = {
    contentType: options.contentType || OCTET_STREAM,
  };
  if (options.write?.storageClass) destinationResource.storageClass = options.write.storageClass;
  if (options.metadata && Object.keys(options.metadata).length > 0) {
    destinationResource.metadata = options.metadata;
  }
  const body = JSON.stringify({
    kind: "storage#composeRequest",
    sourceObjects: sources.map((
      s,
    ) => (s.generation ? { name: s.name, generation: s.generation } : { name: s.name })),
    destination: destinationResource,
  });
  return {
    method: "POST",
    url: api(loc, `/o/${encodeObjectName(destination)}/compose`, query),
    headers: { "content-type": "application/json; charset=UTF-8" },
    body: new TextEncoder().encode(body),
  };
}

/** Creates the bucket (test fixtures, first-time setup). */
export function createBucket(loc: GcsLocation, project: string): GcsRequest {
  return {
    method: "POST",
    url: `${loc.origin}${loc.basePath}/storage/v1/b${queryString([["project", project]])}`,
    headers: { "content-type": "application/json; charset=UTF-8" },
    body: new TextEncoder().encode(JSON.stringify({ name: loc.bucket })),
  };
}
