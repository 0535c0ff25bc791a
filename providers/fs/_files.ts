// File plumbing of the fs store: temp files written and fsynced whole, folder fsyncs, errno
// tests, and the store's typed errors. Private to providers/fs.
import { randomBytes } from "node:crypto";
import { type FileHandle, lstat, open, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { readInto, writeAll } from "../../src/base/bytes.ts";
import { StoreError } from "../types.ts";

const COPY_CHUNK = 1 << 20;

/** A fresh random name for a file in tmp/. */
export function tempName(kind = ""): string {
  return kind + randomBytes(12).toString("hex");
}

/**
 * Writes `chunks` (then whatever `more` appends) to a new file in `dir` and fsyncs it.
 * @returns its path
 * @throws the store's typed error; the file is removed first
 */
export async function writeTemp(
  dir: string,
  chunks: Uint8Array[],
  op: string,
  key: string,
  more?: (fh: FileHandle, position: number) => Promise<void>,
): Promise<string> {
  const path = join(dir, tempName());
  let fh: FileHandle | undefined;
  try {
    fh = await open(path, "wx");
    let position = 0;
    for (const chunk of chunks) {
      await writeAll(fh, chunk, position);
      position += chunk.length;
    }
    await more?.(fh, position);
    await fh.sync();
    await fh.close();
    fh = undefined;
    return path;
  } catch (err) {
    await fh?.close().catch(() => {});
    await rm(path, { force: true });
    throw toStoreError(err, op, key);
  }
}

/**
 * Appends `length` bytes of `path` from `offset` to `fh` at `position`, handing each chunk to
 * `each` on the way.
 * @returns `length`
 * @throws {Error} when the source is shorter than that
 */
export async function copyInto(
  fh: FileHandle,
  position: number,
  path: string,
  offset: number,
  length: number,
  each?: (chunk: Uint8Array) => void,
): Promise<number> {
  const src = await open(path, "r");
  try {
    const buf = new Uint8Array(Math.min(COPY_CHUNK, Math.max(1, length)));
    for (let done = 0; done < length;) {
      const { bytesRead } = await src.read(
        buf,
        0,
        Math.min(buf.length, length - done),
        offset + done,
      );
      if (bytesRead === 0) throw new Error(`${path} is shorter than expected`);
      const chunk = buf.subarray(0, bytesRead);
      each?.(chunk);
      await writeAll(fh, chunk, position + done);
      done += bytesRead;
    }
    return length;
  } finally {
    await src.close();
  }
}

/**
 * Reads exactly `length` bytes at `position`.
 * @throws {StoreError} `Malformed` when the file is shorter
 */
export async function readFully(
  fh: Pick<FileHandle, "read">,
  length: number,
  position: number,
  key: string,
  op: string,
): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  if (await readInto(fh, out, position) < length) {
    throw malformed(key, op, "the file is shorter than its metadata says");
  }
  return out;
}

/** True for a regular file at `path` (not a folder, not missing). */
export async function isFile(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isFile();
  } catch (err) {
    if (isMissing(err)) return false;
    throw err;
  }
}

/** True for a folder at `path`. */
export async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isDirectory();
  } catch (err) {
    if (isMissing(err)) return false;
    throw err;
  }
}

/** The JSON in `path`, or undefined when it is missing or not JSON. */
export async function readJson<T>(path: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as T;
  } catch {
    return undefined;
  }
}

/** The `code` of a Node-style filesystem error. */
export function errno(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** ENOENT, or ENOTDIR: a path through an object where a folder would be. */
export function isMissing(err: unknown): boolean {
  const code = errno(err);
  return code === "ENOENT" || code === "ENOTDIR";
}

/** EEXIST and the codes a rename or link gives where a folder and a file meet. */
export function isTaken(err: unknown): boolean {
  const code = errno(err);
  return code === "EEXIST" || code === "EISDIR" || code === "ENOTEMPTY" || code === "ENOTDIR";
}

export function utf8(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}

export function noSuchKey(key: string, op: string): StoreError {
  return new StoreError("NotFound", `no object ${JSON.stringify(key)}`, {
    op,
    key,
    code: "NoSuchKey",
  });
}

export function noSuchUpload(key: string, uploadId: string, op: string): StoreError {
  return new StoreError("NotFound", `no multipart upload ${uploadId} for ${JSON.stringify(key)}`, {
    op,
    key,
    code: "NoSuchUpload",
  });
}

export function keyConflict(key: string, op: string): StoreError {
  return new StoreError(
    "Unsupported",
    `key ${JSON.stringify(key)} needs a folder where an object is, or an object where a folder is`,
    { op, key, code: "KeyConflict" },
  );
}

export function malformed(
  key: string,
  op: string,
  why = "not an object file of this store",
): StoreError {
  return new StoreError("Malformed", `${JSON.stringify(key)}: ${why}`, {
    op,
    key,
    code: "BadObjectFile",
  });
}

/**
 * Maps a filesystem error to the store's typed error: permissions are `Auth`, the rest
 * `Transport`. Typed errors and aborts pass through.
 */
export function toStoreError(err: unknown, op: string, key?: string): StoreError | DOMException {
  if (err instanceof StoreError || err instanceof DOMException) return err;
  const code = errno(err);
  const message = `${op}${key === undefined ? "" : ` ${JSON.stringify(key)}`}: ${
    (err as Error)?.message ?? err
  }`;
  if (code === "ENAMETOOLONG") {
    return new StoreError("Unsupported", message, { op, key, code: "InvalidKey" }, { cause: err });
  }
  if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
    return new StoreError("Auth", message, { op, key, code }, { cause: err });
  }
  return new StoreError("Transport", message, { op, key, code }, { cause: err });
}
