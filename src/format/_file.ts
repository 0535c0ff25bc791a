// Positional reads for segment files too large to load whole (private to src/format).
import { type FileHandle, readFile } from "node:fs/promises";
import { readInto } from "../base/bytes.ts";

/**
 * Reads up to `length` bytes at `position`, looping over short reads. Returns fewer bytes only
 * at end of file.
 */
export async function readAt(
  fh: FileHandle,
  position: number,
  length: number,
): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  const filled = await readInto(fh, out, position);
  return filled === length ? out : out.subarray(0, filled);
}

/**
 * Serves small reads (record headers) from a window read ahead in one call, so walking many
 * small records costs one system call per window rather than one per record.
 */
export class WindowedReader {
  #window: Uint8Array = new Uint8Array(0);
  #windowStart = 0;

  /**
   * @param fh the open file
   * @param windowSize bytes fetched per read @default 1 MiB
   */
  constructor(readonly fh: FileHandle, readonly windowSize = 1 << 20) {}

  /** Up to `length` bytes at `position` (fewer only at end of file). */
  async read(position: number, length: number): Promise<Uint8Array> {
    const from = position - this.#windowStart;
    if (from >= 0 && from + length <= this.#window.length) {
      return this.#window.subarray(from, from + length);
    }
    this.#window = await readAt(this.fh, position, Math.max(length, this.windowSize));
    this.#windowStart = position;
    return this.#window.subarray(0, Math.min(length, this.#window.length));
  }
}

/** Reads a whole file, or returns undefined when it does not exist. */
export async function readFileIfExists(path: string): Promise<Uint8Array | undefined> {
  try {
    return await readFile(path);
  } catch (err) {
    if ((err as { code?: string }).code === "ENOENT") return undefined;
    throw err;
  }
}
