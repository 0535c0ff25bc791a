// Multipart uploads for stores without S3's upload ids (GCS, Azure): each upload is a small
// marker object at `{root}{key}/{uploadId}` that holds the upload's metadata and content type,
// so uploads can be listed by key prefix, completed with the metadata they were created with,
// and swept. The root is a reserved prefix outside tierd's key space.
import { StoreError } from "./types.ts";

/** Where upload markers (and GCS part objects) live by default. */
export const DEFAULT_STAGING_ROOT = ".tierd-multipart/";

/** A fresh upload id: 32 lowercase hex digits (128 random bits). */
export function newUploadId(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(16)),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
}

/** True for a string shaped like {@link newUploadId}'s. */
export function isUploadId(text: string): boolean {
  return /^[0-9a-f]{32}$/.test(text);
}

/** The marker object of an upload. */
export function uploadMarkerName(root: string, key: string, uploadId: string): string {
  return `${root}${key}/${uploadId}`;
}

/**
 * The key and upload id an object name under `root` belongs to: a marker
 * (`{root}{key}/{id}`), or an object staged for it (`{root}{key}/{id}/{name}` where `name` passes
 * `isStagedName`). Parsed from the end, so keys may hold any characters, `/` included.
 */
export function parseStagingName(
  root: string,
  name: string,
  isStagedName: (last: string) => boolean = () => false,
): { key: string; uploadId: string; marker: boolean } | undefined {
  if (!name.startsWith(root)) return undefined;
  const rest = name.slice(root.length);
  const last = rest.lastIndexOf("/");
  if (last <= 0) return undefined;
  const tail = rest.slice(last + 1);
  if (isUploadId(tail)) return { key: rest.slice(0, last), uploadId: tail, marker: true };
  if (!isStagedName(tail)) return undefined;
  const second = rest.lastIndexOf("/", last - 1);
  if (second <= 0) return undefined;
  const uploadId = rest.slice(second + 1, last);
  if (!isUploadId(uploadId)) return undefined;
  return { key: rest.slice(0, second), uploadId, marker: false };
}

/**
 * Refuses an upload id this store could not have handed out.
 * @throws {StoreError} `NotFound` with code `NoSuchUpload`
 */
export function checkUploadId(uploadId: string, op: string, key: string): void {
  if (!isUploadId(uploadId)) {
    throw new StoreError(
      "NotFound",
      `${op} ${key}: ${JSON.stringify(uploadId)} is not an upload of this store`,
      { op, key, code: "NoSuchUpload" },
    );
  }
}

/** The error (a 404, code `NoSuchUpload`) for an upload whose marker is gone. */
export function noSuchUpload(
  op: string,
  key: string,
  uploadId: string,
  options?: ErrorOptions,
): StoreError {
  return new StoreError("NotFound", `${op} ${key}: upload ${uploadId} does not exist`, {
    op,
    key,
    status: 404,
    code: "NoSuchUpload",
  }, options);
}
