// Pure parsers for GCS JSON API answers: object resources (`size` and `generation` arrive as
// strings), list pages, and the mapping of GCS errors (`{"error": {code, message, errors:
// [{reason}]}}`, or a bare status from a media download) to `StoreError`.
import {
  type ListPage,
  type ObjectHead,
  type ObjectInfo,
  type StoredChecksum,
  StoreError,
  type StoreErrorKind,
  type UserMetadata,
} from "../types.ts";
import { childText, decodeText, parseXml, rootElement, snippet } from "../_xml.ts";
import { answerError, answerKind, malformed, replaceFailed } from "../_errors.ts";

/** What a GCS error answer says. */
export class GcsErrorInfo extends Error {
  override readonly name = "GcsErrorInfo";
  constructor(readonly code: string, message: string, readonly status: number) {
    super(message);
  }
}

const REASON_KINDS: Record<string, StoreErrorKind> = {
  notFound: "NotFound",
  conditionNotMet: "PreconditionFailed",
  requestedRangeNotSatisfiable: "InvalidRange",
  InvalidRange: "InvalidRange",
  rateLimitExceeded: "Throttled",
  userRateLimitExceeded: "Throttled",
  backendError: "Throttled",
  internalError: "Transport",
  authError: "Auth",
  unauthorized: "Auth",
  forbidden: "Auth",
  insufficientPermissions: "Auth",
  accountDisabled: "Auth",
  userProjectMissing: "Auth",
  notImplemented: "Unsupported",
};

/** The error kind for a GCS reason and HTTP status: the reason decides when known. */
export function errorKind(code: string, status: number): StoreErrorKind {
  const known = answerKind(REASON_KINDS, code, status);
  if (known) return known;
  if (status === 408 || status === 409) return "Transport";
  return "Unsupported";
}

const STATUS_CODES: Record<number, string> = {
  400: "invalid",
  401: "authError",
  403: "forbidden",
  404: "notFound",
  408: "requestTimeout",
  409: "conflict",
  412: "conditionNotMet",
  416: "requestedRangeNotSatisfiable",
  429: "rateLimitExceeded",
  500: "internalError",
  502: "badGateway",
  503: "backendError",
  504: "gatewayTimeout",
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Reads an error answer: the JSON API's error object, an XML `<Error>` (media downloads), or
 * just the status (a HEAD-like empty body, a plain-text "Not Found").
 */
export function parseErrorInfo(status: number, body: Uint8Array): GcsErrorInfo {
  let code = "";
  let message = "";
  const text = body.byteLength > 0 ? decodeText(body).trim() : "";
  if (text.startsWith("{")) {
    try {
      const json: unknown = JSON.parse(text);
      const error = isRecord(json) ? json.error : undefined;
      if (isRecord(error)) {
        message = typeof error.message === "string" ? error.message : "";
        const first = Array.isArray(error.errors) ? error.errors[0] : undefined;
        if (isRecord(first) && typeof first.reason === "string") code = first.reason;
        // OAuth-style errors: {"error": "invalid_token", "error_description": …}
      } else if (isRecord(json) && typeof json.error === "string") {
        code = json.error;
        message = typeof json.error_description === "string" ? json.error_description : "";
      }
    } catch {
      message = `unexpected error body: ${snippet(text)}`;
    }
  } else if (text.startsWith("<")) {
    try {
      const error = rootElement(parseXml(text), "Error");
      if (error) {
        code = childText(error, "Code")?.trim() ?? "";
        message = childText(error, "Message")?.trim() ?? "";
      }
    } catch {
      message = `unexpected error body: ${snippet(text)}`;
    }
  } else if (text) {
    message = snippet(text);
  }
  code ||= STATUS_CODES[status] ?? `Http${status}`;
  return new GcsErrorInfo(code, message || `HTTP ${status}`, status);
}

/** Builds the typed error for a GCS error answer. `redact` scrubs secrets from the message. */
export function gcsError(
  info: GcsErrorInfo,
  op: string,
  key: string | undefined,
  redact: (text: string) => string = (t) => t,
  hint = "",
): StoreError {
  return answerError(errorKind(info.code, info.status), info, {
    op,
    key,
    redact,
    hint,
    cause: new GcsErrorInfo(info.code, redact(info.message), info.status),
  });
}

/**
 * The typed error for an upload with `ifGenerationMatch={generation}` that GCS refused for its
 * condition: a 412 conditionNotMet (another generation, or no live object) and a 404 (no object
 * to replace) are both `PreconditionFailed`. Undefined for any other answer (a 404 for a missing
 * bucket included), which means what it means elsewhere.
 * @param options.redact scrubs secrets out of the message
 * @returns the error to throw, or undefined for an answer the condition did not decide
 */
export function replaceRefusal(
  info: GcsErrorInfo,
  key: string,
  options: { redact?: (text: string) => string } = {},
): StoreError | undefined {
  const { redact = (t: string) => t } = options;
  const absent = info.status === 404 && !/bucket does not exist/i.test(info.message);
  if (info.status !== 412 && !absent) return undefined;
  return replaceFailed(
    gcsError(info, "put", key, redact),
    "ifGenerationMatch: no object to replace",
  );
}

/**
 * The generation of the object a media download read, from `x-goog-generation` (the JSON API
 * and the XML API both send it).
 */
export function generationOf(headers: Headers): string | undefined {
  const generation = headers.get("x-goog-generation")?.trim();
  return generation ? generation : undefined;
}

/** Parses a JSON body. @throws {StoreError} `Malformed` */
export function parseJson(body: Uint8Array, op: string, key?: string): Record<string, unknown> {
  const text = decodeText(body);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw malformed(op, key, "not JSON", text);
  }
  if (!isRecord(json)) throw malformed(op, key, "not a JSON object", text);
  return json;
}

/** An object resource as tierd reads it. */
export interface GcsObject extends ObjectHead {
  /** The object's generation (a decimal string: it does not fit a double). */
  generation: string;
  contentType?: string;
  created?: Date;
  /** The hashes GCS keeps (reported by `head` when asked for). */
  stored?: StoredChecksum[];
}

function parseCount(value: unknown, field: string, op: string, key?: string): number {
  const n = typeof value === "string" ? Number(value) : typeof value === "number" ? value : NaN;
  if ((typeof value === "string" && value.trim() === "") || !Number.isSafeInteger(n) || n < 0) {
    throw malformed(op, key, `bad ${field} ${JSON.stringify(value)}`);
  }
  return n;
}

function parseDate(value: unknown): Date | undefined {
  if (typeof value !== "string") return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : new Date(ms);
}

/** An object resource (`storage#object`). */
export function parseObject(resource: unknown, op: string, key?: string): GcsObject {
  if (!isRecord(resource)) throw malformed(op, key, "object resource is not an object");
  const name = resource.name;
  if (typeof name !== "string" || name === "") {
    throw malformed(op, key, "object resource without a name");
  }
  const generation = resource.generation;
  if (typeof generation !== "string" && typeof generation !== "number") {
    throw malformed(op, name, "object resource without a generation");
  }
  const metadata: UserMetadata = {};
  if (isRecord(resource.metadata)) {
    for (const [k, v] of Object.entries(resource.metadata)) {
      if (typeof v === "string") metadata[k] = v;
    }
  }
  const object: GcsObject = {
    key: name,
    size: parseCount(resource.size, "size", op, name),
    metadata,
    generation: String(generation),
  };
  if (typeof resource.etag === "string") object.etag = resource.etag;
  const updated = parseDate(resource.updated);
  if (updated) object.lastModified = updated;
  const created = parseDate(resource.timeCreated);
  if (created) object.created = created;
  if (typeof resource.contentType === "string") object.contentType = resource.contentType;
  const checksums = storedChecksums(resource);
  if (checksums.length > 0) object.stored = checksums;
  return object;
}

/**
 * The hashes GCS keeps with every object: `crc32c` always (for a composed object too, over the
 * whole of its bytes) and `md5Hash` except for composed objects; base64 of the big-endian digest.
 */
function storedChecksums(resource: Record<string, unknown>): StoredChecksum[] {
  const out: StoredChecksum[] = [];
  if (typeof resource.crc32c === "string" && resource.crc32c !== "") {
    out.push({ algorithm: "crc32c", value: resource.crc32c, type: "full" });
  }
  if (typeof resource.md5Hash === "string" && resource.md5Hash !== "") {
    out.push({ algorithm: "md5", value: resource.md5Hash, type: "full" });
  }
  return out;
}

/** One list page: the objects and the token of the next page. */
export interface GcsListing {
  objects: GcsObject[];
  nextPageToken?: string;
}

/** Parses an objects list answer (`storage#objects`). */
export function parseList(body: Uint8Array, op = "list"): GcsListing {
  const json = parseJson(body, op);
  const items = json.items ?? [];
  if (!Array.isArray(items)) throw malformed(op, undefined, "items is not an array");
  const objects = items.map((item) => parseObject(item, op));
  const token = json.nextPageToken;
  if (token !== undefined && typeof token !== "string") {
    throw malformed(op, undefined, "nextPageToken is not a string");
  }
  return token ? { objects, nextPageToken: token } : { objects };
}

/** A list page as a `ListPage` (object infos only). */
export function listPage(listing: GcsListing): ListPage {
  const objects = listing.objects.map((o): ObjectInfo => {
    const info: ObjectInfo = { key: o.key, size: o.size };
    if (o.etag) info.etag = o.etag;
    if (o.lastModified) info.lastModified = o.lastModified;
    return info;
  });
  return listing.nextPageToken
    ? { objects, continuationToken: listing.nextPageToken }
    : { objects };
}
