// XXH3-64 (seed 0) as tierd takes it everywhere: Bun's native one where it runs (about three
// times the WebAssembly one's speed), else a hash-wasm hasher. src/hash.ts (the event loop) and
// the store fetch worker (providers/fetch_worker.ts) both hash through here, so a chunk's block
// checksums are the same whichever thread took them.
import type { IHasher } from "hash-wasm";

/** Bun's native XXH3-64 (seed 0 by default). */
type NativeXxh3 = (bytes: Uint8Array) => bigint;

/** Bun's `Bun.hash.xxHash3`, undefined in another runtime. */
export const nativeXxh3: NativeXxh3 | undefined =
  (globalThis as { Bun?: { hash?: { xxHash3?: NativeXxh3 } } }).Bun?.hash?.xxHash3;

/**
 * XXH3-64 (seed 0) of the concatenation of `parts` with a hash-wasm XXH3 hasher (`createXXHash3`),
 * as an unsigned bigint.
 */
export function wasmXxh3_64(h: IHasher, parts: readonly Uint8Array[]): bigint {
  h.init();
  for (const p of parts) h.update(p);
  const digest = h.digest("binary"); // canonical form: big-endian
  return new DataView(digest.buffer, digest.byteOffset, 8).getBigUint64(0);
}
