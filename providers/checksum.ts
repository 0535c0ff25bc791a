// The checksums of the upload path, computed in-process: CRC-64/NVME (S3's full-object checksum,
// the AWS default since 2025), CRC-32C (GCS), SHA-256 (an S3 choice) and MD5 (Azure's and S3's
// Content-MD5), over hash-wasm's
// WebAssembly hashers. Values are spelled as the stores spell them: base64 of the big-endian
// digest. CRC-64/NVME is CRC-64 with the NVMe polynomial 0xad93d23594c93659 (reflected
// 0x9a6c9329ac4bc9b5), reflected in and out, initial value and final xor all ones.
import { Buffer } from "node:buffer";
import { createCRC32, createCRC64, createMD5, createSHA256, type IHasher } from "hash-wasm";
import type { Checksum, ChecksumAlgorithm, StoredChecksum } from "./types.ts";
import { HasherPool } from "./hasher_pool.ts";

/** The reflected CRC-64/NVME polynomial, as hash-wasm takes it. */
const CRC64NVME_POLY = "9a6c9329ac4bc9b5";
/** The reflected CRC-32C (Castagnoli) polynomial. */
const CRC32C_POLY = 0x82f63b78;

/** The algorithms tierd can compute, fastest first (the order a verifier prefers them in). */
export const CHECKSUM_ALGORITHMS: readonly ChecksumAlgorithm[] = [
  "crc64nvme",
  "crc32c",
  "md5",
  "sha256",
];

/** Bytes of each algorithm's digest: a stored value of another length is not that checksum. */
export const DIGEST_BYTES: Readonly<Record<ChecksumAlgorithm, number>> = {
  crc64nvme: 8,
  crc32c: 4,
  sha256: 32,
  md5: 16,
};

/** True when `value` is base64 of exactly a digest of `algorithm`'s length. */
export function digestShaped(algorithm: ChecksumAlgorithm, value: string): boolean {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(value) || value.length % 4 !== 0) return false;
  return Buffer.from(value, "base64").length === DIGEST_BYTES[algorithm];
}

/** A streaming checksum over bytes fed in order. */
export interface ChecksumHasher {
  readonly algorithm: ChecksumAlgorithm;
  update(bytes: Uint8Array): void;
  /** The checksum of everything fed so far. Call once. */
  digest(): Checksum;
}

function wasmHasher(algorithm: ChecksumAlgorithm): Promise<IHasher> {
  switch (algorithm) {
    case "crc64nvme":
      return createCRC64(CRC64NVME_POLY);
    case "crc32c":
      return createCRC32(CRC32C_POLY);
    case "sha256":
      return createSHA256();
    case "md5":
      return createMD5();
  }
}

/** A pool of streaming hashers per algorithm (providers/hasher_pool.ts). */
const pools = new Map<ChecksumAlgorithm, HasherPool>();

/**
 * A fresh streaming hasher for `algorithm` (a reused instance, reset, when one is idle).
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const h = await createChecksum("crc64nvme");
 * h.update(new TextEncoder().encode("hello "));
 * h.update(new TextEncoder().encode("world"));
 * const whole = await checksumOf("crc64nvme", new TextEncoder().encode("hello world"));
 * assert.deepEqual(h.digest(), whole); // { algorithm: "crc64nvme", value: base64 of 8 bytes }
 * ```
 */
export async function createChecksum(algorithm: ChecksumAlgorithm): Promise<ChecksumHasher> {
  let pool = pools.get(algorithm);
  if (!pool) pools.set(algorithm, pool = new HasherPool(algorithm, () => wasmHasher(algorithm)));
  const stream = await pool.stream((h) => ({
    algorithm,
    value: Buffer.from(h.digest("binary")).toString("base64"),
  }));
  return { algorithm, ...stream };
}

/** One instance per algorithm for whole buffers: used synchronously, so calls never interleave. */
const shared = new Map<ChecksumAlgorithm, Promise<IHasher>>();

/** The checksum of `bytes` (one buffer, e.g. a request body). */
export async function checksumOf(
  algorithm: ChecksumAlgorithm,
  bytes: Uint8Array,
): Promise<Checksum> {
  let pending = shared.get(algorithm);
  if (!pending) shared.set(algorithm, pending = wasmHasher(algorithm));
  const h = await pending;
  h.init();
  h.update(bytes);
  return { algorithm, value: Buffer.from(h.digest("binary")).toString("base64") };
}

/** The digest of a checksum as lowercase hex (for messages and hex-speaking stores). */
export function checksumHex(checksum: Checksum): string {
  return Buffer.from(checksum.value, "base64").toString("hex");
}

/** A checksum from its hex digest. */
export function checksumFromHex(algorithm: ChecksumAlgorithm, hex: string): Checksum {
  return { algorithm, value: Buffer.from(hex, "hex").toString("base64") };
}

/** True when both are the same algorithm and digest. */
export function sameChecksum(a: Checksum, b: Checksum): boolean {
  return a.algorithm === b.algorithm && checksumHex(a) === checksumHex(b);
}

/**
 * The stored checksum a verifier can compare with one it computes over the bytes: a full-object
 * one of an algorithm tierd computes and of that algorithm's length (a store that labels another
 * value so — moto's 4-byte "crc64nvme" of a multipart upload — gives none), the fastest there
 * is; undefined when there is none.
 */
export function comparableChecksum(
  stored: readonly StoredChecksum[] | undefined,
): StoredChecksum | undefined {
  for (const algorithm of CHECKSUM_ALGORITHMS) {
    const found = stored?.find((c) =>
      c.type === "full" && c.algorithm === algorithm && digestShaped(algorithm, c.value)
    );
    if (found) return found;
  }
  return undefined;
}
