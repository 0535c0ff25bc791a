// Pure builders for the Azure Blob requests tierd sends: where the container lives, and the
// method, encoded path, query, headers and body of each operation. Signing (sharedkey.ts) and
// sending happen in the store; nothing here touches the network or the clock.
import { Buffer } from "node:buffer";
import { encodeKeyPath, parseEndpoint, type QueryParam } from "../_url.ts";
import { xmlEscape } from "../_xml.ts";
import { invalidArgument } from "../_rules.ts";
import { type ByteRange, rangeHeader } from "../_ranges.ts";
import type { Checksum, UserMetadata } from "../types.ts";

/** The service version tierd speaks (any since 2019-12-12 would do; Azurite 3.35 knows this one). */
export const AZURE_API_VERSION = "2024-11-04";

/** Most names in one List Blobs page. */
export const MAX_LIST_RESULTS = 5000;

/** Where requests go. Built once from the configuration by {@link resolveLocation}. */
export interface AzureLocation {
  /** `https://acct.blob.core.windows.net` or `http://127.0.0.1:10000`. */
  origin: string;
  /** Path before the container: `""`, or `/devstoreaccount1` for a path-style endpoint. */
  basePath: string;
  account: string;
  container: string;
}

/** An unsigned request. */
export interface AzureRequest {
  method: "GET" | "HEAD" | "PUT" | "DELETE";
  /** Percent-encoded path, exactly as sent and signed. */
  path: string;
  /** Raw values; encoded when the URL is built, signed decoded. */
  query: QueryParam[];
  /** Lowercase names. `x-ms-date` and `authorization` are added when signing. */
  headers: Record<string, string>;
  body?: Uint8Array;
}

function isLocalHost(hostname: string): boolean {
  return hostname === "localhost" || /^\d+\.\d+\.\d+\.\d+$/.test(hostname) ||
    hostname.startsWith("[");
}

/**
 * Resolves account, container and endpoint. An empty endpoint is
 * `https://{account}.blob.core.windows.net`. An IP or `localhost` endpoint without a path
 * (Azurite, `http://127.0.0.1:10000`) gets the account as its first path segment, the emulator's
 * path-style addressing; give the path yourself (`http://127.0.0.1:10000/devstoreaccount1`) to
 * be explicit.
 * @throws {TypeError} for an endpoint that is not an http(s) URL
 */
export function resolveLocation(options: {
  account: string;
  container: string;
  endpoint?: string;
}): AzureLocation {
  const endpoint = options.endpoint || `https://${options.account}.blob.core.windows.net`;
  const { origin, basePath, hostname } = parseEndpoint(endpoint, "Azure");
  return {
    origin,
    basePath: basePath === "" && isLocalHost(hostname)
      ? `/${encodeURIComponent(options.account)}`
      : basePath,
    account: options.account,
    container: options.container,
  };
}

function containerPath(loc: AzureLocation): string {
  return `${loc.basePath}/${encodeURIComponent(loc.container)}`;
}

/** The encoded path of a blob. */
export function blobPath(loc: AzureLocation, key: string): string {
  return `${containerPath(loc)}/${encodeKeyPath(key)}`;
}

/**
 * A user metadata name as an Azure metadata name. Azure takes only C# identifiers (letters,
 * digits, `_`, not starting with a digit) and refuses `-` with 400 InvalidMetadata (Azurite
 * accepts it); tierd's names are `[a-z0-9-]`, so `-` travels as `_` and comes back as `-`.
 * @throws {StoreError} `Unsupported` (InvalidArgument) for a name starting with a digit
 */
export function encodeMetadataName(name: string, op: string, key?: string): string {
  if (/^[0-9]/.test(name)) {
    throw invalidArgument(
      `metadata name ${JSON.stringify(name)}: Azure metadata names cannot start with a digit`,
      op,
      key,
    );
  }
  return name.replaceAll("-", "_");
}

/** An Azure metadata name (from `x-ms-meta-*`) as tierd's. */
export function decodeMetadataName(name: string): string {
  return name.toLowerCase().replaceAll("_", "-");
}

function metadataHeaders(
  headers: Record<string, string>,
  metadata: UserMetadata | undefined,
  op: string,
  key: string,
): Record<string, string> {
  for (const [name, value] of Object.entries(metadata ?? {})) {
    headers[`x-ms-meta-${encodeMetadataName(name, op, key)}`] = value;
  }
  return headers;
}

const OCTET_STREAM = "application/octet-stream";

/** The MD5 a request sends as `Content-MD5` (Azure verifies the body against it). */
function contentMd5(headers: Record<string, string>, md5: Checksum | undefined, name: string) {
  if (md5 && md5.algorithm !== "md5") {
    throw new RangeError(`Azure takes an MD5, not a ${md5.algorithm} checksum`);
  }
  if (md5) headers[name] = md5.value;
  return headers;
}

/**
 * Put Blob (a block blob in one request). `ifAbsent` sends `If-None-Match: *`: an existing blob
 * answers 409 BlobAlreadyExists (or 412 ConditionNotMet). `ifMatch`, an ETag as Azure sent it
 * (quotes included), goes as `If-Match`: a blob with another ETag answers 412 ConditionNotMet, a
 * missing one 404 BlobNotFound. `md5` goes as `Content-MD5`: Azure refuses a body that does not
 * match it and keeps it as the blob's Content-MD5.
 */
export function putBlob(
  loc: AzureLocation,
  key: string,
  body: Uint8Array,
  options: {
    ifAbsent?: boolean;
    ifMatch?: string;
    metadata?: UserMetadata;
    contentType?: string;
    md5?: Checksum;
    write?: AzureWriteSettings;
  } = {},
): AzureRequest {
  const headers = metadataHeaders(
    {
      "x-ms-version": AZURE_API_VERSION,
      "x-ms-blob-type": "BlockBlob",
      "content-type": options.contentType || OCTET_STREAM,
    },
    options.metadata,
    "put",
    key,
  );
  contentMd5(headers, options.md5, "content-md5");
  writeHeaders(headers, options.write, true);
  if (options.ifAbsent) headers["if-none-match"] = "*";
  if (options.ifMatch !== undefined) headers["if-match"] = options.ifMatch;
  return { method: "PUT", path: blobPath(loc, key), query: [], headers, body };
}

/**
 * How the blobs tierd writes are stored: their access tier (on Put Blob and Put Block List) and
 * the encryption scope of every write (Put Block included: a blob's blocks share its scope).
 */
export interface AzureWriteSettings {
  /** `x-ms-access-tier`: `Hot`, `Cool` or `Cold`. */
  accessTier?: string;
  /** `x-ms-encryption-scope`. */
  encryptionScope?: string;
}

function writeHeaders(
  headers: Record<string, string>,
  w: AzureWriteSettings | undefined,
  tiered: boolean,
): Record<string, string> {
  if (tiered && w?.accessTier) headers["x-ms-access-tier"] = w.accessTier;
  if (w?.encryptionScope) headers["x-ms-encryption-scope"] = w.encryptionScope;
  return headers;
}

/** Get Blob, optionally ranged with `x-ms-range`. */
export function getBlob(
  loc: AzureLocation,
  key: string,
  range?: ByteRange,
): AzureRequest {
  const headers: Record<string, string> = { "x-ms-version": AZURE_API_VERSION };
  if (range) headers["x-ms-range"] = rangeHeader(range);
  return { method: "GET", path: blobPath(loc, key), query: [], headers };
}

/** Get Blob Properties (HEAD): size, ETag, `x-ms-meta-*`. */
export function getBlobProperties(loc: AzureLocation, key: string): AzureRequest {
  return {
    method: "HEAD",
    path: blobPath(loc, key),
    query: [],
    headers: { "x-ms-version": AZURE_API_VERSION },
  };
}

/** Delete Blob, with its snapshots. */
export function deleteBlob(loc: AzureLocation, key: string): AzureRequest {
  return {
    method: "DELETE",
    path: blobPath(loc, key),
    query: [],
    headers: { "x-ms-version": AZURE_API_VERSION, "x-ms-delete-snapshots": "include" },
  };
}

/** List Blobs (`restype=container&comp=list`), one page. */
export function listBlobs(
  loc: AzureLocation,
  prefix: string,
  options: { maxResults?: number; marker?: string } = {},
): AzureRequest {
  const query: QueryParam[] = [["restype", "container"], ["comp", "list"]];
  if (prefix) query.push(["prefix", prefix]);
  if (options.maxResults !== undefined && Number.isFinite(options.maxResults)) {
    const n = Math.max(1, Math.min(MAX_LIST_RESULTS, Math.floor(options.maxResults)));
    query.push(["maxresults", String(n)]);
  }
  if (options.marker) query.push(["marker", options.marker]);
  return {
    method: "GET",
    path: containerPath(loc),
    query,
    headers: { "x-ms-version": AZURE_API_VERSION },
  };
}

/**
 * The block id of part `partNumber` of upload `uploadId`: base64 of a fixed-length string
 * (Azure wants every block id of a blob to have the same length), so two uploads to one blob
 * never share a block.
 */
export function blockId(uploadId: string, partNumber: number): string {
  return Buffer.from(`${uploadId}-${String(partNumber).padStart(5, "0")}`, "utf8").toString(
    "base64",
  );
}

/** Put Block (`comp=block&blockid=…`): stages one uncommitted block, verified against `md5`. */
export function putBlock(
  loc: AzureLocation,
  key: string,
  id: string,
  body: Uint8Array,
  md5?: Checksum,
  write?: AzureWriteSettings,
): AzureRequest {
  return {
    method: "PUT",
    path: blobPath(loc, key),
    query: [["comp", "block"], ["blockid", id]],
    headers: writeHeaders(
      contentMd5(
        { "x-ms-version": AZURE_API_VERSION, "content-type": OCTET_STREAM },
        md5,
        "content-md5",
      ),
      write,
      false,
    ),
    body,
  };
}

/** The `<BlockList>` document: `<Latest>` ids in order. */
export function blockListBody(ids: readonly string[]): Uint8Array {
  let xml = '<?xml version="1.0" encoding="utf-8"?><BlockList>';
  for (const id of ids) xml += `<Latest>${xmlEscape(id)}</Latest>`;
  return new TextEncoder().encode(xml + "</BlockList>");
}

/**
 * Put Block List (`comp=blocklist`): commits the blocks, in order, as the blob, with its
 * metadata and content type. `<Latest>` takes a block from the uncommitted list (where Put Block
 * left it) or, when a completion is retried after it went through, from the committed one, so a
 * retry is idempotent. `ifAbsent` sends `If-None-Match: *`. `md5`, the whole blob's, goes as
 * `x-ms-blob-content-md5`: Azure keeps it as the blob's Content-MD5 (it does not check it; each
 * block was checked on its own).
 */
export function putBlockList(
  loc: AzureLocation,
  key: string,
  ids: readonly string[],
  options: {
    ifAbsent?: boolean;
    metadata?: UserMetadata;
    contentType?: string;
    md5?: Checksum;
    write?: AzureWriteSettings;
  } = {},
): AzureRequest {
  const headers = metadataHeaders(
    {
      "x-ms-version": AZURE_API_VERSION,
      "content-type": "application/xml",
      "x-ms-blob-content-type": options.contentType || OCTET_STREAM,
    },
    options.metadata,
    "completeMultipart",
    key,
  );
  contentMd5(headers, options.md5, "x-ms-blob-content-md5");
  writeHeaders(headers, options.write, true);
  if (options.ifAbsent) headers["if-none-match"] = "*";
  return {
    method: "PUT",
    path: blobPath(loc, key),
    query: [["comp", "blocklist"]],
    headers,
    body: blockListBody(ids),
  };
}

/** Create Container (`restype=container`), for test fixtures and first-time setup. */
export function createContainer(loc: AzureLocation): AzureRequest {
  return {
    method: "PUT",
    path: containerPath(loc),
    query: [["restype", "container"]],
    headers: { "x-ms-version": AZURE_API_VERSION },
  };
}
