// XXH3-128 of a file, read in bounded chunks so a 1 GiB segment never sits in memory; other
// digests (a store's checksum) can ride along on the same read.
import { open } from "node:fs/promises";
import { createXxh128Stream } from "../hash.ts";

const CHUNK = 4 * 1024 * 1024;

/** Something else fed the same bytes, in order. */
export interface AlsoHash {
  update(bytes: Uint8Array): void;
}

/**
 * Hashes the first `size` bytes of `path` (the whole file when omitted), feeding `also` the same
 * bytes on the way.
 * @throws {Error} when the file shrinks while it is read
 */
export async function hashFile(path: string, size?: number, also?: AlsoHash): Promise<bigint> {
  const hasher = await createXxh128Stream();
  const fh = await open(path, "r");
  try {
    const total = size ?? (await fh.stat()).size;
    const buf = new Uint8Array(Math.min(CHUNK, Math.max(total, 1)));
    let pos = 0;
    while (pos < total) {
      const want = Math.min(buf.length, total - pos);
      const { bytesRead } = await fh.read(buf, 0, want, pos);
      if (bytesRead === 0) throw new Error(`${path}: file shrank to ${pos} bytes while hashing`);
      const chunk = buf.subarray(0, bytesRead);
      hasher.update(chunk);
      also?.update(chunk);
      pos += bytesRead;
    }
    return hasher.digest();
  } finally {
    await fh.close();
  }
}
