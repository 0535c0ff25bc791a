// Bytes and files: joining chunks into one array, and file reads and writes that loop until
// every byte is moved (a `FileHandle` read or write may move fewer bytes than asked).
import type { FileHandle } from "node:fs/promises";

/**
 * The chunks one after another, in one new array.
 * @example
 * concatBytes([new Uint8Array([1, 2]), new Uint8Array([3])]); // Uint8Array [1, 2, 3]
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
 * await writeAll(fh, encodeMarker(marker));
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
 * const got = await readInto(fh, header, 0);
 * if (got < header.length) throw new Error("truncated");
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
