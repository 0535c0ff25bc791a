// Shared fixtures of the chunk-cache tests: objects with record boundaries in a SimStore, and a
// cache opened on a temp directory with a tiny chunk size and an explicit budget.
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { seededUint32 } from "../../src/base/rng.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { ChunkCache, type ChunkCacheOptions } from "../../src/cache/chunk_cache.ts";
import { chunkFileSize } from "../../src/cache/chunk_format.ts";
import type { ChunkSource, PositionedChunkSource } from "../../src/cache/types.ts";
import { hex128, initHashes, xxh3_128 } from "../../src/hash.ts";

await initHashes();

/** An object in the store, its bytes (the oracle) and the source the cache reads it through. */
export interface TestObject {
  src: ChunkSource;
  bytes: Uint8Array;
  starts: number[];
}

/** Deterministic bytes from the seeded PRNG, so every object differs from every other. */
export function fill(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  const next = seededUint32(seed);
  for (let i = 0; i < size; i++) out[i] = next() >>> 24;
  return out;
}

/**
 * Puts an object of `size` bytes under `key` with records of `recordSize` bytes (the last one
 * shorter) and returns its source.
 */
export async function putObject(
  sim: SimStore,
  key: string,
  size: number,
  options: {
    recordSize?: number | number[];
    seed?: number;
    position?: PositionedChunkSource["position"];
  } = {},
): Promise<TestObject> {
  const bytes = fill(size, options.seed ?? size);
  await sim.put(key, bytes);
  sim.resetCounts();
  const starts: number[] = [];
  const sizes = options.recordSize ?? 1024;
  for (let at = 0, i = 0; at < size; i++) {
    starts.push(at);
    at += Array.isArray(sizes) ? sizes[i % sizes.length] : sizes;
  }
  const src: ChunkSource = {
    key,
    checksum: hex128(xxh3_128(bytes)),
    size,
    recordStarts: () => Promise.resolve(starts),
  };
  if (options.position) {
    const positioned: PositionedChunkSource = { ...src, position: options.position };
    return { src: positioned, bytes, starts };
  }
  return { src, bytes, starts };
}

/** Budget bytes that hold `n` full-size chunks of `chunkSize` (headers included). */
export function chunksBudget(n: number, chunkSize: number): number {
  return n * chunkFileSize(chunkSize);
}

/** Opens a cache with test defaults: no statfs, no persist timer, no first fetch unless asked. */
export function openCache(
  store: SimStore,
  path: string,
  options: Partial<ChunkCacheOptions> = {},
): Promise<ChunkCache> {
  return ChunkCache.open(store, {
    path,
    chunkSize: 4096,
    size: 2 ** 30,
    sizePercent: 100,
    diskTotalBytes: 2 ** 40,
    persistInterval: Infinity,
    trimMinInterval: 0,
    ...options,
  });
}

/** Every file under `dir` with its size, by path relative to `dir`. */
export async function filesUnder(dir: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  async function walk(rel: string): Promise<void> {
    for (const entry of await readdir(join(dir, rel), { withFileTypes: true })) {
      const path = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) await walk(path);
      else out.set(path, (await stat(join(dir, path))).size);
    }
  }
  await walk("");
  return out;
}

/** Chunk files (`*.chunk`) under the cache dir: their total bytes and count. */
export async function chunkFilesOnDisk(
  dir: string,
): Promise<{ bytes: number; count: number; paths: string[] }> {
  let bytes = 0;
  const paths: string[] = [];
  for (const [path, size] of await filesUnder(dir)) {
    if (!path.endsWith(".chunk")) continue;
    bytes += size;
    paths.push(path);
  }
  return { bytes, count: paths.length, paths };
}
