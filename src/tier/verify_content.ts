// Proves that the store holds exactly a segment's bytes, before its local copy may go (and before
// a dangling copy is adopted): HEADs alone compare sizes and metadata, which a damaged body
// passes. Where the store keeps a checksum of the object (S3 CRC-64/NVME, GCS CRC-32C, Azure
// Content-MD5, an S3 ETag that is an MD5, the fs store re-hashing its file) it is compared with
// the same checksum computed over the local file, in the same read that re-checks the file's
// XXH3-128: equal, the copy is proven. A stored checksum proves a copy but never condemns one: when
// it differs (a store that labels another value so, a checksum of a kind tierd did not ask for,
// an ETag that is not an MD5 under encryption), or when there is none, the object is read back
// with ranged GETs, paced by the fetch bandwidth limit, and only its bytes decide: their XXH3-128
// must be the segment's.
import { comparableChecksum, createChecksum, sameChecksum } from "../../providers/checksum.ts";
import type { ChecksumAlgorithm, ObjectHead, ObjectStore } from "../../providers/types.ts";
import { createXxh128Stream, hex128 } from "../hash.ts";
import { CopyMismatchError, SegmentChangedError } from "./copy_segment.ts";
import { hashFile } from "./file_hash.ts";

/** Bytes per ranged GET of a read-back. */
export const READ_BACK_CHUNK = 8 * 1024 * 1024;

/** A download bandwidth limit (the cache's `TokenBucket` is one). */
export interface Bandwidth {
  /** Bytes per second; `Infinity` when nothing is limited. */
  readonly rate: number;
  /** Waits until `bytes` may be fetched. */
  take(bytes: number, signal?: AbortSignal): Promise<void>;
}

/** The local file a copy is checked against: its size and XXH3-128 as journaled. */
export interface LocalBytes {
  path: string;
  size: number;
  checksum: bigint;
}

/** How a copy's bytes were proven, and what it cost. */
export interface ContentProof {
  /** `stored`: the store's own checksum; `read-back`: the object was read and hashed. */
  method: "stored" | "read-back";
  /** The stored checksum's algorithm (`stored` only). */
  algorithm?: ChecksumAlgorithm;
  /**
   * The stored checksum that differed from the local bytes' and was set aside for a read-back
   * (`read-back` only), e.g. `md5 zlIi…`.
   */
  setAside?: string;
  /** Bytes read from the store (0 for `stored`). */
  bytesRead: number;
  /** GETs sent (0 for `stored`: the HEAD that brought the checksum was sent anyway). */
  requests: number;
}

/**
 * Checks that the object `head` describes (a HEAD with `checksums: true`) holds the bytes of the
 * local file, and that the local file is still the segment.
 * @throws {SegmentChangedError} when the local file no longer hashes to its journaled XXH3-128
 * @throws {CopyMismatchError} when the object's bytes are other bytes (flipped, truncated)
 * @throws {StoreError} from the read-back (`NotFound` when the object went meanwhile)
 */
export async function verifyContent(
  store: ObjectStore,
  head: ObjectHead,
  local: LocalBytes,
  options: { signal?: AbortSignal; bandwidth?: Bandwidth; chunkSize?: number } = {},
): Promise<ContentProof> {
  const stored = comparableChecksum(head.checksums);
  const ours = stored && await createChecksum(stored.algorithm);
  const xxh = await hashFile(local.path, local.size, ours);
  if (xxh !== local.checksum) {
    throw new SegmentChangedError(
      local.path,
      `contents differ from the verified copy (xxh3-128 ${hex128(local.checksum)}); not evicted`,
    );
  }
  if (stored && ours) {
    const computed = ours.digest();
    if (sameChecksum(computed, stored)) {
      return { method: "stored", algorithm: stored.algorithm, bytesRead: 0, requests: 0 };
    }
    const proof = await readBack(store, head.key, local, options);
    return { ...proof, setAside: `${stored.algorithm} ${stored.value}` };
  }
  return await readBack(store, head.key, local, options);
}

/**
 * Reads the object at `key` in ranged GETs, paced by `bandwidth`, and compares its XXH3-128 with
 * the segment's: the proof that needs no local file (and trusts no stored checksum).
 * @param expected the segment's size and XXH3-128, as journaled
 * @throws {CopyMismatchError} when the object has another size or other bytes
 * @throws {StoreError} from the store (`NotFound` when the object is gone)
 */
export async function readBack(
  store: ObjectStore,
  key: string,
  local: Pick<LocalBytes, "size" | "checksum">,
  options: { signal?: AbortSignal; bandwidth?: Bandwidth; chunkSize?: number },
): Promise<ContentProof> {
  const chunk = options.chunkSize ?? READ_BACK_CHUNK;
  const hasher = await createXxh128Stream();
  let requests = 0;
  let at = 0;
  while (at < local.size) {
    const length = Math.min(chunk, local.size - at);
    await options.bandwidth?.take(length, options.signal);
    const got = await store.get(key, { range: { start: at, length }, signal: options.signal });
    requests++;
    if (got.size !== local.size || got.bytes.length !== length) {
      throw new CopyMismatchError(
        key,
        `read back ${got.bytes.length} bytes at ${at} of an object of ${got.size}; the segment has ${local.size}`,
      );
    }
    hasher.update(got.bytes);
    at += length;
  }
  const remote = hasher.digest();
  if (remote !== local.checksum) {
    throw new CopyMismatchError(
      key,
      `its bytes hash to xxh3-128 ${hex128(remote)}, the segment's are ${hex128(local.checksum)}`,
    );
  }
  return { method: "read-back", bytesRead: local.size, requests };
}
