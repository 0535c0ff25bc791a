// The checksums of the upload path, computed in-process: CRC-32 (the AWS SDKs' and CLI's default
// upload checksum, native in the runtime: `node:zlib`'s crc32, 10x the others' speed), CRC-64/NVME
// (what S3 computes for objects sent without one), CRC-32C (GCS), SHA-256 (an S3 choice) and MD5
// (Azure's and S3's Content-MD5), over hash-wasm's WebAssembly hashers. Values are spelled as the
// stores spell them: base64 of the big-endian digest. CRC-64/NVME is CRC-64 with the NVMe
// polynomial 0xad93d23594c93659 (reflected 0x9a6c9329ac4bc9b5), reflected in and out, initial
// value and final xor all ones.
import { Buffer } from "node:buffer";
import * as zlib from "node:zlib";
import { createCRC32, createCRC64, createMD5, createSHA256, type IHasher } from "hash-wasm";
import type { Checksum, ChecksumAlgorithm, StoredChecksum } from "./types.ts";
import { HasherPool } from "./hasher_pool.ts";

/** The reflected CRC-64/NVME polynomial, as hash-wasm takes it. */
const CRC64NVME_POLY = "9a6c9329ac4bc9b5";
/** The reflected CRC-32C (Castagnoli) polynomial. */
const CRC32C_POLY = 0x82f63b78;

/** The algorithms tierd can compute, fastest first (the order a verifier prefers them in). */
export const CHECKSUM_ALGORITHMS: readonly ChecksumAlgorithm[] = [
  "crc32",
  "crc64nvme",
  "crc32c",
  "md5",
  "sha256",
];

/** Bytes of each algorithm's digest: a stored value of another length is not that checksum. */
export const DIGEST_BYTES: Readonly<Record<ChecksumAlgorithm, number>> = {
  crc32: 4,
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

/** The algorithms computed in WebAssembly (CRC-32 is the runtime's). */
type WasmAlgorithm = Exclude<ChecksumAlgorithm, "crc32">;

function wasmHasher(algorithm: WasmAlgorithm): Promise<IHasher> {
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
const pools = new Map<WasmAlgorithm, HasherPool>();

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
  if (algorithm === "crc32") return crc32Stream();
  let pool = pools.get(algorithm);
  if (!pool) pools.set(algorithm, pool = new HasherPool(algorithm, () => wasmHasher(algorithm)));
  const stream = await pool.stream((h) => ({
    algorithm,
    value: Buffer.from(h.digest("binary")).toString("base64"),
  }));
  return { algorithm, ...stream };
}

/** The runtime's CRC-32 (zlib's, vectorized): Deno 2, Bun and Node 20.15 or later have it. */
type Crc32 = (bytes: Uint8Array, running: number) => number;
const nativeCrc32 = (zlib as { crc32?: Crc32 }).crc32;

/** CRC-32's table, for a runtime without its own (a byte at a time: about 0.3 GB/s). */
let table: Uint32Array | undefined;

/** CRC-32 in plain JavaScript, as {@link crc32} is where the runtime has none (exported for tests). */
export function portableCrc32(bytes: Uint8Array, running: number): number {
  if (!table) {
    table = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
      table[n] = c >>> 0;
    }
  }
  let crc = ~running;
  for (let i = 0; i < bytes.length; i++) crc = table[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return ~crc >>> 0;
}

/**
 * CRC-32 (ISO-HDLC: zlib's, S3's `crc32`) of `bytes`, continuing from `running` (the CRC-32 of
 * the bytes before them; 0 to start).
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const text = new TextEncoder().encode("123456789");
 * assert.equal(crc32(text), 0xcbf43926);
 * assert.equal(crc32(text.subarray(4), crc32(text.subarray(0, 4))), 0xcbf43926);
 * ```
 */
export function crc32(bytes: Uint8Array, running = 0): number {
  return nativeCrc32 ? nativeCrc32(bytes, running) >>> 0 : portableCrc32(bytes, running);
}

/**
 * A CRC-32 taken as a number (by {@link crc32}) as a {@link Checksum}: its four bytes, big-endian,
 * in base64, as S3 spells `x-amz-checksum-crc32`.
 */
export function crc32Checksum(crc: number): Checksum {
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(crc >>> 0);
  return { algorithm: "crc32", value: digest.toString("base64") };
}

function crc32Stream(): ChecksumHasher {
  let running = 0;
  let done = false;
  return {
    algorithm: "crc32",
    update(bytes) {
      if (done) throw new Error("crc32 stream updated after its digest");
      running = crc32(bytes, running);
    },
    digest() {
      if (done) throw new Error("crc32 stream digested twice");
      done = true;
      return crc32Checksum(running);
    },
  };
}

/** One instance per algorithm for whole buffers: used synchronously, so calls never interleave. */
const shared = new Map<WasmAlgorithm, Promise<IHasher>>();

/**
 * The checksum of `body` by `algorithm`: one of `given` (checksums of the same bytes a caller
 * already took, trusted to be of them) when it has that algorithm, else computed.
 */
export async function bodyChecksum(
  algorithm: ChecksumAlgorithm,
  body: Uint8Array,
  given: readonly Checksum[] | undefined,
): Promise<Checksum> {
  return given?.find((c) => c.algorithm === algorithm) ?? await checksumOf(algorithm, body);
}

/** The checksum of `bytes` (one buffer, e.g. a request body). */
export async function checksumOf(
  algorithm: ChecksumAlgorithm,
  bytes: Uint8Array,
): Promise<Checksum> {
  if (algorithm === "crc32") return crc32Checksum(crc32(bytes));
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
