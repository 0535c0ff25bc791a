// Copies one sealed segment to the store: `.log` (with its metadata) then `.index`, then
// verifies both with HEADs. Creates are conditional, so a retry or a second agent is a no-op.
// The segment is hashed once, by the verify pass; the upload checks each part it reads against
// the CRC-32 that pass took of it (./part_checks.ts), so what it sends is what was verified.
import { readFile, stat } from "node:fs/promises";
import type { ObjectHead, ObjectStore, PutResult, UserMetadata } from "../../providers/types.ts";
import type { PartBufferPool } from "../../providers/part_pool.ts";
import { crc32, crc32Checksum } from "../../providers/checksum.ts";
import { type ReadVerifier, uploadFile, uploadPartSize } from "../../providers/upload.ts";
import { readSegmentBounds } from "../format/bounds.ts";
import { verifySegment } from "../format/verify.ts";
import type { FormatName } from "../format/types.ts";
import { createXxh128Stream, hex128, xxh3_128 } from "../hash.ts";
import { type PartChecks, PartCrc32 } from "./part_checks.ts";
import {
  fromUserMetadata,
  type ObjectFacts,
  sameSegment,
  toUserMetadata,
} from "../layout/object_metadata.ts";
import { factsFromBounds } from "../layout/segment_facts.ts";
import type { SegmentFiles } from "../partition/segments.ts";

/** The remote copy does not match the local segment (a stale or foreign object under the key). */
export class CopyMismatchError extends Error {
  override readonly name = "CopyMismatchError";
  constructor(readonly key: string, message: string) {
    super(`${key}: ${message}`);
  }
}

/** The local segment changed while it was being copied (it should be immutable once sealed). */
export class SegmentChangedError extends Error {
  override readonly name = "SegmentChangedError";
  constructor(readonly path: string, message: string) {
    super(`${path}: ${message}`);
  }
}

export interface CopyOptions {
  concurrency: number;
  signal?: AbortSignal;
  /** Called with a multipart upload id before any part is sent, so it can be journaled. */
  onUploadId?: (key: string, uploadId: string) => Promise<void>;
  onProgress?: (bytes: number) => void;
  /** Part buffers shared by every upload of the worker (bounds memory node-wide). */
  pool?: PartBufferPool;
  /** The copy's storage class or tier (the topic's), in place of the store's configured one. */
  storageClass?: string;
}

/** A sealed local segment, with the keys it is copied to and the facts its copy must show. */
export interface SegmentCopy {
  logPath: string;
  indexPath: string;
  keys: { log: string; index: string };
  meta: ObjectFacts;
}

/** A sealed local segment read and checksummed by its verify pass, ready to upload. */
export interface SegmentSource extends SegmentCopy {
  /** The `.log`'s parts as the upload cuts them, each with the CRC-32 the verify pass took. */
  parts: PartChecks;
}

/**
 * Reads a sealed segment's `.log` whole — every record verified (checksums, frames, contiguous
 * offsets), every `.index` entry checked against its record, the same bytes hashed — then its
 * bounds as the broker derives them: what its copy will be checked against. A segment that
 * fails is never copied. The same read takes the CRC-32 of each part of `partSize` bytes (more
 * for a file that would need over 10,000), the parts its upload will send.
 * @throws {FormatError} for a damaged segment, naming the file and the byte position
 * @throws {SegmentChangedError} when the `.log` changed between the two reads
 * @throws ENOENT once the broker removed it
 */
export async function segmentSource(
  seg: SegmentFiles,
  format: FormatName,
  keys: { log: string; index: string },
  partSize: number,
): Promise<SegmentSource> {
  // The whole walk first: it names the first problem in file order, exactly where it is.
  const hasher = await createXxh128Stream();
  const parts = new PartCrc32(uploadPartSize(seg.logSize, partSize));
  const verified = await verifySegment(seg.logPath, seg.indexPath, format, seg.start, {
    onBytes: (bytes) => {
      hasher.update(bytes);
      parts.update(bytes);
    },
  });
  const bounds = await readSegmentBounds(seg.logPath, seg.indexPath, format, seg.start);
  if (verified.size !== bounds.size || verified.endOffset !== bounds.endOffset) {
    // Both reads validated the same structure: only bytes changing in between explain this.
    throw new SegmentChangedError(
      seg.logPath,
      `${verified.size} bytes up to offset ${verified.endOffset} when verified, then ` +
        `${bounds.size} bytes up to offset ${bounds.endOffset}`,
    );
  }
  const checksum = hasher.digest();
  return {
    logPath: seg.logPath,
    indexPath: seg.indexPath,
    keys,
    meta: { ...factsFromBounds(bounds, checksum), format },
    parts: parts.finish(),
  };
}

/**
 * Checks the parts an upload reads of `path`, in order, against the CRC-32s the verify pass took:
 * a part that differs, one more than were verified, or fewer, throw {@link SegmentChangedError}
 * before anything is published. A part that matches is handed on with its CRC-32, which a store
 * that sends `x-amz-checksum-crc32` sends as it is: the upload takes no checksum of its own.
 */
export function partReadVerifier(path: string, checks: PartChecks): ReadVerifier {
  let next = 0;
  return {
    update(bytes) {
      const i = next++;
      const from = i * checks.partSize;
      if (i >= checks.crc32.length) {
        throw new SegmentChangedError(path, `grew: bytes from ${from} were never verified`);
      }
      if (crc32(bytes) !== checks.crc32[i]) {
        throw new SegmentChangedError(
          path,
          `bytes ${from}-${from + bytes.length - 1} changed after they were verified`,
        );
      }
      return [crc32Checksum(checks.crc32[i])];
    },
    verify() {
      if (next !== checks.crc32.length) {
        throw new SegmentChangedError(
          path,
          `shrank: ${next} of the ${checks.crc32.length} parts verified were read`,
        );
      }
    },
  };
}

/** What happened to the `.log` object: freshly written, or an identical copy already there. */
export type CopyOutcome = "uploaded" | "adopted";

async function putFile(
  store: ObjectStore,
  key: string,
  path: string,
  size: number,
  metadata: UserMetadata,
  opts: CopyOptions,
  parts: PartChecks,
): Promise<PutResult> {
  const verifyRead = partReadVerifier(path, parts);
  if (size <= parts.partSize) {
    // One bounded buffer, checked against the verify pass before it is sent.
    const bytes = await readFile(path);
    if (bytes.length !== size) {
      throw new SegmentChangedError(path, `size changed from ${size} to ${bytes.length} bytes`);
    }
    const checksums = verifyRead.update(bytes) ?? undefined;
    verifyRead.verify();
    const result = await store.put(key, bytes, {
      ifAbsent: true,
      checksums,
      metadata,
      storageClass: opts.storageClass,
      signal: opts.signal,
    });
    opts.onProgress?.(bytes.length);
    return result;
  }
  // Each part is checked as it is read: a segment changed in place during the upload is caught
  // before the completion publishes it, not recorded as verified.
  const result = await uploadFile(store, key, path, {
    partSize: parts.partSize,
    concurrency: opts.concurrency,
    metadata,
    storageClass: opts.storageClass,
    ifAbsent: true,
    signal: opts.signal,
    onUploadId: opts.onUploadId ? (id: string) => opts.onUploadId!(key, id) : undefined,
    onProgress: opts.onProgress,
    pool: opts.pool,
    verifyRead,
  });
  const after = await stat(path);
  if (after.size !== size) {
    throw new SegmentChangedError(path, `size changed from ${size} to ${after.size} bytes`);
  }
  return result;
}

/**
 * Copies a sealed segment and verifies the copy. Throws {@link CopyMismatchError} when a
 * different object already holds the key, and store errors as they come.
 */
export async function copySegment(
  store: ObjectStore,
  src: SegmentSource,
  opts: CopyOptions,
): Promise<CopyOutcome> {
  const { meta, keys } = src;
  const logResult = await putFile(
    store,
    keys.log,
    src.logPath,
    meta.size,
    toUserMetadata(meta),
    opts,
    src.parts,
  );
  const indexBytes = await readFile(src.indexPath);
  if (indexBytes.length !== meta.indexSize) {
    throw new SegmentChangedError(
      src.indexPath,
      `size changed from ${meta.indexSize} to ${indexBytes.length} bytes`,
    );
  }
  const indexResult = await store.put(keys.index, indexBytes, {
    ifAbsent: true,
    storageClass: opts.storageClass,
    metadata: { "xxh3-128": hex128(xxh3_128(indexBytes)) },
    signal: opts.signal,
  });
  await verifyCopy(store, src, { indexBytes });
  return logResult.status === "AlreadyExists" && indexResult.status === "AlreadyExists"
    ? "adopted"
    : "uploaded";
}

/**
 * Checks with HEADs that the store holds this segment: the `.log` metadata matches size and
 * checksum, and the `.index` has the right size (and checksum, when given the bytes). The bytes
 * themselves are proven by `verifyContent` (./verify_content.ts), from the `.log` HEAD this
 * returns (asked with `checksums` for that).
 * @returns the `.log` object's HEAD
 */
export async function verifyCopy(
  store: ObjectStore,
  src: SegmentCopy,
  options: { indexBytes?: Uint8Array; signal?: AbortSignal; checksums?: boolean } = {},
): Promise<ObjectHead> {
  const { indexBytes, signal } = options;
  const head = await store.head(src.keys.log, { signal, checksums: options.checksums });
  if (head.size !== src.meta.size) {
    throw new CopyMismatchError(
      src.keys.log,
      `object is ${head.size} bytes, segment is ${src.meta.size}`,
    );
  }
  let remote: ObjectFacts;
  try {
    remote = fromUserMetadata(src.keys.log, head.metadata);
  } catch (err) {
    throw new CopyMismatchError(src.keys.log, (err as Error).message);
  }
  if (!sameSegment(remote, src.meta)) {
    throw new CopyMismatchError(
      src.keys.log,
      `metadata describes another segment (xxh3-128 ${hex128(remote.checksum)}, ` +
        `end-offset ${remote.endOffset}; local ${
          hex128(src.meta.checksum)
        }, ${src.meta.endOffset})`,
    );
  }
  const ihead = await store.head(src.keys.index, { signal });
  if (ihead.size !== src.meta.indexSize) {
    throw new CopyMismatchError(
      src.keys.index,
      `object is ${ihead.size} bytes, index is ${src.meta.indexSize}`,
    );
  }
  if (indexBytes && ihead.metadata["xxh3-128"] !== hex128(xxh3_128(indexBytes))) {
    throw new CopyMismatchError(src.keys.index, "index checksum differs from the local index");
  }
  return head;
}
