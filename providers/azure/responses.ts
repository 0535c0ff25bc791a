// Pure parsers for Azure Blob answers: blob listings, blob properties, and the mapping of Azure
// error codes (from `x-ms-error-code`, or the `<Error>` body) and statuses to `StoreError`.
import {
  type ListPage,
  type ObjectHead,
  type ObjectInfo,
  StoreError,
  type StoreErrorKind,
  type UserMetadata,
} from "../types.ts";
import {
  children,
  childText,
  decodeText,
  errorElement,
  rootElement,
  type XmlNode,
  XmlSyntaxError,
} from "../_xml.ts";
import { parseXmlWithAttributes } from "../_xml_attributes.ts";
import { bareEtag } from "../_rules.ts";
import { answerError, answerKind, malformed, replaceFailed } from "../_errors.ts";
import { decodeMetadataName } from "./requests.ts";

/** What an Azure error answer says. */
export class AzureErrorInfo extends Error {
  override readonly name = "AzureErrorInfo";
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    /** The server's clock, from its `Date` header. */
    readonly serverTime?: Date,
    readonly requestId?: string,
  ) {
    super(message);
  }
}

const CODE_KINDS: Record<string, StoreErrorKind> = {
  BlobNotFound: "NotFound",
  ContainerNotFound: "NotFound",
  ResourceNotFound: "NotFound",
  ContainerBeingDeleted: "NotFound",
  ConditionNotMet: "PreconditionFailed",
  BlobAlreadyExists: "PreconditionFailed",
  InvalidBlockList: "PreconditionFailed",
  InvalidBlockId: "PreconditionFailed",
  InvalidRange: "InvalidRange",
  ServerBusy: "Throttled",
  TooManyRequests: "Throttled",
  InternalError: "Transport",
  OperationTimedOut: "Transport",
  Md5Mismatch: "Transport",
  Crc64Mismatch: "Transport",
  AuthenticationFailed: "Auth",
  AuthorizationFailure: "Auth",
  AuthorizationPermissionMismatch: "Auth",
  AuthorizationResourceTypeMismatch: "Auth",
  AuthorizationServiceMismatch: "Auth",
  AuthorizationSourceIPMismatch: "Auth",
  AuthorizationProtocolMismatch: "Auth",
  InsufficientAccountPermissions: "Auth",
  AccountIsDisabled: "Auth",
  InvalidAuthenticationInfo: "Auth",
  NoAuthenticationInformation: "Auth",
  KeyVaultEncryptionKeyNotFound: "Auth",
  NotImplemented: "Unsupported",
  FeatureVersionMismatch: "Unsupported",
};

/** The error kind for an Azure code and HTTP status: the code decides when known. */
export function errorKind(code: string, status: number): StoreErrorKind {
  const known = answerKind(CODE_KINDS, code, status);
  if (known) return known;
  if (status === 408) return "Transport";
  if (status === 409) return "PreconditionFailed";
  return "Unsupported"; // other 4xx: the request as built is refused; retrying cannot help
}

const STATUS_CODES: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "AuthenticationFailed",
  404: "ResourceNotFound",
  409: "Conflict",
  412: "ConditionNotMet",
  416: "InvalidRange",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServerBusy",
};

/**
 * Reads an error answer: the code from `x-ms-error-code` (the only place a HEAD answer has it),
 * else from the `<Error>` body (which may start with a BOM), else from the status.
 */
export function parseErrorInfo(status: number, headers: Headers, body: Uint8Array): AzureErrorInfo {
  let code = headers.get("x-ms-error-code")?.trim() ?? "";
  let message = "";
  const { error, unparsed } = errorElement(body);
  if (error) {
    code ||= childText(error, "Code")?.trim() ?? "";
    message = (childText(error, "Message") ?? "").replace(/\s+/g, " ").trim();
    const detail = childText(error, "AuthenticationErrorDetail")?.trim();
    if (detail) message += ` (${detail.split("\n")[0]})`;
  }
  code ||= STATUS_CODES[status] ?? `Http${status}`;
  // Azure's messages end with RequestId and Time lines; the request id is kept apart.
  message = message.replace(/\s*RequestId:\S*\s*Time:\S*/, "");
  if (!message) message = unparsed ? `unexpected error body: ${unparsed}` : `HTTP ${status}`;
  const date = headers.get("date");
  const serverTime = date && !Number.isNaN(Date.parse(date)) ? new Date(date) : undefined;
  return new AzureErrorInfo(
    code,
    message,
    status,
    serverTime,
    headers.get("x-ms-request-id") ?? undefined,
  );
}

/** Builds the typed error for an Azure error answer. `redact` scrubs secrets from the message. */
export function azureError(
  info: AzureErrorInfo,
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
    cause: new AzureErrorInfo(
      info.code,
      redact(info.message),
      info.status,
      info.serverTime,
      info.requestId,
    ),
  });
}

/**
 * The typed error for a Put Blob with `If-Match` that Azure refused for its condition: a 412
 * ConditionNotMet (the blob has another ETag) and a 404 BlobNotFound (there is no blob to
 * replace) are both `PreconditionFailed`. Undefined for any other answer (ContainerNotFound
 * included), which means what it means elsewhere.
 * @param options.redact scrubs secrets out of the message
 * @returns the error to throw, or undefined for an answer the condition did not decide
 */
export function replaceRefusal(
  info: AzureErrorInfo,
  key: string,
  options: { redact?: (text: string) => string } = {},
): StoreError | undefined {
  const { redact = (t: string) => t } = options;
  const absent = info.status === 404 && info.code === "BlobNotFound";
  if (info.status !== 412 && !absent) return undefined;
  return replaceFailed(azureError(info, "put", key, redact), "If-Match: no blob to replace");
}

function parseDate(text: string | null | undefined): Date | undefined {
  if (!text) return undefined;
  const ms = Date.parse(text.trim());
  return Number.isNaN(ms) ? undefined : new Date(ms);
}

function parseSize(text: string | null | undefined, op: string, key: string): number {
  const size = Number(text?.trim());
  if (
    text === undefined || text === null || text.trim() === "" || !Number.isSafeInteger(size) ||
    size < 0
  ) {
    throw malformed(op, key, `bad size ${JSON.stringify(text)}`);
  }
  return size;
}

/** The name of a `<Blob>`: `<Name Encoded="true">` carries a percent-encoded name. */
function blobName(blob: XmlNode, op: string): string {
  const value = blob["Name"];
  const node = Array.isArray(value) ? value[0] : value;
  if (node === undefined) throw malformed(op, undefined, "<Blob> without <Name>");
  if (typeof node === "string") return node;
  if (Array.isArray(node)) throw malformed(op, undefined, "bad <Name>");
  const text = typeof node["#text"] === "string" ? node["#text"] : "";
  if (node["@Encoded"] !== "true") return text;
  try {
    return decodeURIComponent(text);
  } catch {
    throw malformed(op, undefined, `bad encoded blob name ${JSON.stringify(text)}`);
  }
}

/** One List Blobs page with the marker of the next, raw names included (for upload markers). */
export interface BlobListing {
  blobs: ObjectInfo[];
  nextMarker?: string;
}

/** Parses `EnumerationResults` from List Blobs. */
export function parseListBlobs(body: Uint8Array, op = "list"): BlobListing {
  const text = decodeText(body);
  let doc: XmlNode;
  try {
    doc = parseXmlWithAttributes(text);
  } catch (err) {
    if (err instanceof XmlSyntaxError) throw malformed(op, undefined, err.message, text);
    throw err;
  }
  const result = rootElement(doc, "EnumerationResults");
  if (!result) throw malformed(op, undefined, "expected <EnumerationResults>", text);
  const [container] = children(result, "Blobs");
  const blobs = (container ? children(container, "Blob") : []).map((blob) => {
    const key = blobName(blob, op);
    const [properties] = children(blob, "Properties");
    if (!properties) throw malformed(op, key, "<Blob> without <Properties>");
    const info: ObjectInfo = {
      key,
      size: parseSize(childText(properties, "Content-Length"), op, key),
    };
    const etag = childText(properties, "Etag");
    if (etag) info.etag = bareEtag(etag.trim());
    const modified = parseDate(childText(properties, "Last-Modified"));
    if (modified) info.lastModified = modified;
    return info;
  });
  const next = childText(result, "NextMarker")?.trim();
  return next ? { blobs, nextMarker: next } : { blobs };
}

/** A List Blobs page as a `ListPage`. */
export function listPage(listing: BlobListing): ListPage {
  return listing.nextMarker
    ? { objects: listing.blobs, continuationToken: listing.nextMarker }
    : { objects: listing.blobs };
}

/** `x-ms-meta-*` response headers as user metadata (Azure names decoded back to tierd's). */
export function metadataFromHeaders(headers: Headers): UserMetadata {
  const metadata: UserMetadata = {};
  for (const [name, value] of headers) {
    if (name.startsWith("x-ms-meta-")) metadata[decodeMetadataName(name.slice(10))] = value;
  }
  return metadata;
}

/** A Get Blob Properties answer as an `ObjectHead`. */
export function parseProperties(key: string, headers: Headers, op = "head"): ObjectHead {
  const head: ObjectHead = {
    key,
    size: parseSize(headers.get("content-length"), op, key),
    metadata: metadataFromHeaders(headers),
  };
  const etag = headers.get("etag");
  if (etag) {
    head.etag = bareEtag(etag);
    // The version is the ETag exactly as Azure sent it: what If-Match gives back.
    head.version = etag;
  }
  const modified = parseDate(headers.get("last-modified"));
  if (modified) head.lastModified = modified;
  const md5 = headers.get("content-md5")?.trim();
  if (md5) head.checksums = [{ algorithm: "md5", value: md5, type: "full" }];
  return head;
}
