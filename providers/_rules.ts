// S3's request rules that every store enforces the same way, so a caller that passes against the
// in-process stores (fs, sim) does not first fail against a real bucket: metadata shape,
// multipart part numbers, completions and sizes, and ETags. Range rules: ./_ranges.ts.
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { type CompletedPart, type PutOptions, StoreError, type UserMetadata } from "./types.ts";

/** S3's smallest part (all parts but the last). */
export const MIN_PART_SIZE = 5 * 1024 * 1024;

/** S3's largest part number. */
export const MAX_PART_NUMBER = 10_000;

/**
 * Refuses metadata outside the contract: lowercase `[a-z0-9-]` names, printable ASCII values.
 * @throws {StoreError} `Unsupported` with code `InvalidArgument`.
 */
export function checkMetadata(metadata: UserMetadata | undefined, op: string, key: string): void {
  for (const [name, value] of Object.entries(metadata ?? {})) {
    if (!/^[a-z0-9-]+$/.test(name)) {
      throw invalidArgument(`metadata name ${JSON.stringify(name)} is not [a-z0-9-]+`, op, key);
    }
    if (typeof value !== "string" || !/^[\x20-\x7e]*$/.test(value)) {
      throw invalidArgument(`metadata ${name} is not a printable ASCII string`, op, key);
    }
  }
}

/**
 * Refuses a put whose conditions contradict each other: `ifAbsent` (the key must not exist) with
 * `ifMatch` (it must exist), or an empty `ifMatch`, which no version is (and which GCS would
 * read as no condition at all). A programming error, so not a `StoreError`.
 * @throws {RangeError} before any request is sent
 */
export function checkPutConditions(options: PutOptions, key: string): void {
  if (options.ifMatch === undefined) return;
  if (options.ifAbsent) {
    throw new RangeError(`put ${key}: ifAbsent and ifMatch exclude each other`);
  }
  if (options.ifMatch === "") throw new RangeError(`put ${key}: ifMatch is an empty version`);
}

/**
 * The `PreconditionFailed` error of a replacement (`ifMatch`) refused by a store that compares
 * versions itself (fs, sim), or that knows without asking that no object has the version.
 * @param refusal.why what the store found, e.g. "the key does not exist"
 * @param refusal.code @default "VersionMismatch"
 */
export function versionMismatch(
  key: string,
  refusal: { ifMatch: string; why: string; status?: number; code?: string },
): StoreError {
  const { ifMatch, why, status, code = "VersionMismatch" } = refusal;
  return new StoreError(
    "PreconditionFailed",
    `put ${key}: not replaced: ${why} (ifMatch ${JSON.stringify(ifMatch)})`,
    status === undefined ? { op: "put", key, code } : { op: "put", key, status, code },
  );
}

/**
 * @throws {StoreError} `Unsupported` with code `InvalidArgument` unless 1 <= n <= 10,000.
 */
export function checkPartNumber(partNumber: number, op: string, key: string): void {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PART_NUMBER) {
    throw invalidArgument(`part number ${partNumber} is not in 1..${MAX_PART_NUMBER}`, op, key);
  }
}

/** The typed error for a request no store would accept. */
export function invalidArgument(message: string, op: string, key?: string): StoreError {
  return new StoreError("Unsupported", message, { op, key, code: "InvalidArgument" });
}

/** Removes the quotes HTTP puts around an ETag. */
export function bareEtag(etag: string): string {
  return etag.replace(/^(W\/)?"(.*)"$/, "$2");
}

/** Hex MD5 of `bytes`, the ETag of a single-part object. */
export function md5Hex(bytes: Uint8Array): string {
  return createHash("md5").update(bytes).digest("hex");
}

/** S3's multipart ETag: MD5 of the parts' binary MD5s, then `-` and the part count. */
export function multipartEtag(partEtags: string[]): string {
  const h = createHash("md5");
  for (const etag of partEtags) h.update(Uint8Array.from(Buffer.from(etag, "hex")));
  return `${h.digest("hex")}-${partEtags.length}`;
}

/** What a store knows about an uploaded part. */
export interface StoredPart {
  size: number;
  etag: string;
}

/**
 * Refuses a completion that names no part.
 * @throws {StoreError} `PreconditionFailed` with code `InvalidPart`
 */
export function requireParts(key: string, parts: readonly CompletedPart[]): void {
  if (parts.length === 0) {
    throw new StoreError("PreconditionFailed", "a multipart upload needs at least one part", {
      op: "completeMultipart",
      key,
      code: "InvalidPart",
    });
  }
}

/**
 * Walks a completion's parts in part-number order, checking that none is named twice before
 * handing it to `each`, and returns what `each` returned, in that order.
 * @throws {StoreError} `PreconditionFailed`: code `InvalidPart` when there is no part,
 *   `InvalidPartOrder` for a part number named twice; and what `each` throws
 */
export function inPartOrder<T>(
  key: string,
  parts: readonly CompletedPart[],
  each: (part: CompletedPart) => T,
): T[] {
  requireParts(key, parts);
  const sorted = [...parts].sort((a, b) => a.partNumber - b.partNumber);
  return sorted.map((part, i) => {
    if (i > 0 && sorted[i - 1].partNumber === part.partNumber) {
      throw new StoreError("PreconditionFailed", `part ${part.partNumber} is listed twice`, {
        op: "completeMultipart",
        key,
        code: "InvalidPartOrder",
      });
    }
    return each(part);
  });
}

/**
 * Checks a completion request against the uploaded parts and returns the parts in part-number
 * order, each with its stored size.
 * @throws {StoreError} `PreconditionFailed` (code `InvalidPart`, `InvalidPartOrder` or
 * `EntityTooSmall`) when a part is missing, named twice, has another ETag, or a part other than
 * the last is smaller than `minPartSize`.
 */
export function planCompletion(
  key: string,
  parts: CompletedPart[],
  stored: (partNumber: number) => StoredPart | undefined,
  minPartSize: number,
): Array<CompletedPart & StoredPart> {
  const op = "completeMultipart";
  const plan = inPartOrder(key, parts, (part): CompletedPart & StoredPart => {
    const have = stored(part.partNumber);
    if (!have || have.etag !== bareEtag(part.etag)) {
      throw new StoreError(
        "PreconditionFailed",
        have
          ? `part ${part.partNumber} has ETag ${have.etag}, not ${part.etag}`
          : `part ${part.partNumber} was not uploaded`,
        { op, key, code: "InvalidPart" },
      );
    }
    return { partNumber: part.partNumber, etag: have.etag, size: have.size };
  });
  for (const part of plan.slice(0, -1)) {
    if (part.size < minPartSize) {
      throw new StoreError(
        "PreconditionFailed",
        `part ${part.partNumber} has ${part.size} bytes; all parts but the last need ${minPartSize}`,
        { op, key, code: "EntityTooSmall" },
      );
    }
  }
  return plan;
}
