// Bytes and files: joining chunks into one array, and file reads and writes that loop until
// every byte is moved (a `FileHandle` read or write may move fewer bytes than asked).
import type { FileHandle } from "node:fs/promises";

/**
 * The chunks one after another, in one new array.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(concatBytes([new Uint8Array([1, 2]), new Uint8Array([3])]), new Uint8Array([1, 2, 3]));
 * ```
 */
export function concatBytes(chunks: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/**
 * Writes all of `bytes`, looping over short writes: at `position` in the file, or at the file's
 * own position (appending, for a file opened with `a`) when `position` is left out.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mkdtemp, open, readFile, rm } from "node:fs/promises";
 * import { tmpdir } from "node:os";
 * import { join } from "node:path";
 *
 * const dir = await mkdtemp(join(tmpdir(), "tierd-"));
 * const fh = await open(join(dir, "marker"), "w");
 * await writeAll(fh, new Uint8Array(128).fill(7)); // however many writes it takes
 * await fh.close();
 * assert.equal((await readFile(join(dir, "marker"))).length, 128);
 * await rm(dir, { recursive: true });
 * ```
 */
export async function writeAll(
  fh: Pick<FileHandle, "write">,
  bytes: Uint8Array,
  position?: number,
): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    const at = position === undefined ? undefined : position + done;
    const { bytesWritten } = await fh.write(bytes, done, bytes.length - done, at);
    done += bytesWritten;
  }
}

/**
 * Reads into `buf` from `position` of the file, looping over short reads, until `buf` is full
 * or the file ends.
 * @returns how many bytes were read: `buf.length` unless the file ended first
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mkdtemp, open, rm, writeFile } from "node:fs/promises";
 * import { tmpdir } from "node:os";
 * import { join } from "node:path";
 *
 * const dir = await mkdtemp(join(tmpdir(), "tierd-"));
 * await writeFile(join(dir, "segment.log"), new Uint8Array(10));
 * const fh = await open(join(dir, "segment.log"), "r");
 * const header = new Uint8Array(64);
 * const got = await readInto(fh, header, 0);
 * assert.equal(got, 10); // fewer than asked: the file ends first
 * await fh.close();
 * await rm(dir, { recursive: true });
 * ```
 */
export async function readInto(
  fh: Pick<FileHandle, "read">,
  buf: Uint8Array,
  position: number,
): Promise<number> {
  let got = 0;
  while (got < buf.length) {
    const { bytesRead } = await fh.read(buf, got, buf.length - got, position + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return got;
}
