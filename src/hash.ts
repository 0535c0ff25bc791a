// XXH3 checksums used everywhere in tierd: Iggy record checksums (XXH3-64, seed 0),
// journal and marker checksums (XXH3-64) and whole-object checksums (XXH3-128).
import { createXXHash128, createXXHash3, type IHasher } from "hash-wasm";
import { concatBytes } from "./base/bytes.ts";
import { nativeXxh3, wasmXxh3_64 } from "./base/xxh3.ts";
import { HasherPool } from "../providers/hasher_pool.ts";

let h64: IHasher | undefined;
let h128: IHasher | undefined;

/** Loads the WebAssembly hashers. Call once (and await) before using the sync functions. */
export async function initHashes(): Promise<void> {
  h64 ??= await createXXHash3();
  h128 ??= await createXXHash128();
}

function ready(): [IHasher, IHasher] {
  if (!h64 || !h128) throw new Error("initHashes() must be awaited before hashing");
  return [h64, h128];
}

/** XXH3-64 (seed 0) of the concatenation of `parts`, as an unsigned bigint. */
export function xxh3_64(...parts: Uint8Array[]): bigint {
  if (nativeXxh3) return nativeXxh3(parts.length === 1 ? parts[0] : concatBytes(parts));
  return wasmXxh3_64(ready()[0], parts);
}

/** XXH3-128 (seed 0) of `bytes`, as an unsigned bigint. */
export function xxh3_128(bytes: Uint8Array): bigint {
  const [, h] = ready();
  h.init();
  h.update(bytes);
  return BigInt("0x" + h.digest("hex"));
}

/** A fresh streaming XXH3-128 hasher, for files too large to hold in memory. */
export function createXxh128Stream(): Promise<{
  update(bytes: Uint8Array): void;
  digest(): bigint;
}> {
  return xxh128Streams.stream((h) => BigInt("0x" + h.digest("hex")));
}

/** Streaming XXH3-128 hashers, reused once digested (providers/hasher_pool.ts). */
const xxh128Streams = new HasherPool("xxh3-128", createXXHash128);

/** Formats a 64-bit value as 16 lowercase hex digits. */
export function hex64(value: bigint): string {
  return value.toString(16).padStart(16, "0");
}

/** Formats a 128-bit checksum as 32 lowercase hex digits (object metadata form). */
export function hex128(value: bigint): string {
  return value.toString(16).padStart(32, "0");
}
