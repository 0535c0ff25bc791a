// The consumer barrier (docs/architecture.md, "The broker contract"): the lowest offset stored by
// any consumer or consumer group of a partition. tierd never deletes remote data at or after it.
// Iggy 0.8 stores 8-byte files (u64 LE); 0.9 stores 16-byte records (u64 LE offset + XXH3-64 of
// those 8 bytes).
import { readFile } from "node:fs/promises";
import { namesIn } from "../base/dir.ts";
import { join } from "node:path";
import { xxh3_64 } from "../hash.ts";

/** An offset file that cannot be trusted: the barrier is then "unknown" and blocks deletion. */
export interface BadOffsetFile {
  path: string;
  reason: string;
}

/** The lowest stored offset, or `undefined` when no consumer stored one. */
export interface ConsumerBarrier {
  lowest?: bigint;
  /** Files that could not be read; any of them makes the barrier block all deletes. */
  bad: BadOffsetFile[];
}

/** Decodes one offset file's bytes; throws an Error naming what is wrong. */
export function decodeOffsetFile(bytes: Uint8Array): bigint {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length === 8) return view.getBigUint64(0, true);
  if (bytes.length === 16) {
    const stored = view.getBigUint64(8, true);
    if (xxh3_64(bytes.subarray(0, 8)) !== stored) throw new Error("checksum mismatch");
    return view.getBigUint64(0, true);
  }
  throw new Error(`expected 8 or 16 bytes, found ${bytes.length}`);
}

/** Reads every consumer and consumer-group offset of the partition in `dir`. */
export async function readConsumerBarrier(dir: string): Promise<ConsumerBarrier> {
  const barrier: ConsumerBarrier = { bad: [] };
  for (const kind of ["consumers", "groups"]) {
    const sub = join(dir, "offsets", kind);
    for (const name of await namesIn(sub)) {
      const path = join(sub, name);
      try {
        const offset = decodeOffsetFile(await readFile(path));
        if (barrier.lowest === undefined || offset < barrier.lowest) barrier.lowest = offset;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
        barrier.bad.push({ path, reason: (err as Error).message });
      }
    }
  }
  return barrier;
}

/** True when a remote segment ending at `endOffset` may be deleted under this barrier. */
export function deletableUnder(barrier: ConsumerBarrier, endOffset: bigint): boolean {
  if (barrier.bad.length > 0) return false;
  return barrier.lowest === undefined || endOffset < barrier.lowest;
}
