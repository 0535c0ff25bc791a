// The storage of cached chunks: content-addressed files in a two-level fan-out under the cache
// directory, written as `.part` and renamed (not fsynced: a damaged chunk is fetched again),
// with direct I/O where the file system and runtime allow it (the page cache takes no copy of a
// chunk nobody reads back yet), read back with their block checksums verified. It knows nothing
// of budgets or recency (see policy.ts).
import { type FileHandle, mkdir, open, readdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { readInto } from "../base/bytes.ts";
import { type DirectWriteMode, writeNewFile, writeNewFileDirect } from "../base/file_write.ts";
import { xxh3_64 } from "../hash.ts";
import type { ChunkWriteIo } from "./stats.ts";
import {
  blocksCovering,
  CHUNK_BLOCK_SIZE,
  CHUNK_HEADER_FIXED,
  ChunkCorruptError,
  chunkFileLength,
  type ChunkHeader,
  decodeChunkHeader,
  encodeChunkHeader,
  headerLengthOf,
  verifyBlocks,
} from "./chunk_format.ts";

const CHUNK_EXT = ".chunk";
const PART_EXT = ".part";
const NAME_RE = /^[0-9a-f]{16}$/;
const encoder = new TextEncoder();

/**
 * The content address of a chunk: XXH3-64 of the object's checksum and the chunk's range, as 16
 * hex digits. A different object under the same key has a different checksum, so it can never
 * be served another object's bytes. (`initHashes()` must have been awaited.)
 *
 * @param checksum the object's XXH3-128 (hex)
 * @param start the chunk's first byte
 * @param end the chunk's end (exclusive)
 * @returns 16 lowercase hex digits
 */
export function chunkName(checksum: string, start: number, end: number): string {
  return xxh3_64(encoder.encode(`${checksum}:${start}:${end}`)).toString(16).padStart(16, "0");
}

/** A chunk file found on disk at boot. */
export interface StoredChunk {
  name: string;
  /** Bytes of the whole file. */
  size: number;
  /** Last modification, in ms since the epoch. */
  mtimeMs: number;
}

/** Chunk files kept open between reads, at most (a sequential reader reads one many times). */
const OPEN_CHUNKS = 16;

/** An open chunk file whose header and length were checked when it was opened. */
interface OpenChunk {
  fh: FileHandle;
  header: ChunkHeader;
  /** Reads using it now. */
  users: number;
  /** Dropped from the open set (replaced, deleted or pushed out): closed when unused. */
  retired: boolean;
}

/**
 * Reads and writes chunk files under `{root}/chunks/{aa}/{bb}/{name}.chunk`. The files read
 * last stay open, their headers checked once, so a read of a cached chunk is one positioned
 * read and its block checksums, not an open, three reads, a stat and a close.
 */
export class ChunkStore {
  readonly #dir: string;
  readonly #blockSize: number;
  readonly #madeDirs = new Set<string>();
  /** Open chunk files by name, least recently used first. */
  readonly #open = new Map<string, OpenChunk>();
  /** Writes started, naming each one's `.part` file. */
  #writes = 0;
  /** Closes of retired files still in progress. */
  readonly #closing = new Set<Promise<void>>();
  /** Chunk data is written with direct I/O (until the file system refuses it). */
  #directIo: boolean;
  /** Told how each chunk file was written, and its bytes. */
  readonly #onWrite?: (io: ChunkWriteIo, bytes: number) => void;

  /**
   * @param root the cache directory (`cache.path`)
   * @param options.blockSize bytes per checksummed block @default 64 KiB
   * @param options.directIo write chunk data around the page cache where the file system and
   *   the runtime allow it @default true
   * @param options.onWrite told how each chunk file was written
   */
  constructor(
    readonly root: string,
    options: {
      blockSize?: number;
      directIo?: boolean;
      onWrite?: (io: ChunkWriteIo, bytes: number) => void;
    } = {},
  ) {
    this.#dir = join(root, "chunks");
    this.#blockSize = options.blockSize ?? CHUNK_BLOCK_SIZE;
    this.#directIo = options.directIo ?? true;
    this.#onWrite = options.onWrite;
  }

  /** The file of chunk `name`. */
  pathOf(name: string): string {
    return join(this.#dir, name.slice(0, 2), name.slice(2, 4), name + CHUNK_EXT);
  }

  /**
   * Writes a chunk: `{name}.part`, then rename to `{name}.chunk`. Nothing is fsynced — the cache
   * holds copies, not data: a chunk a crash cut short or left unwritten fails its header, length
   * or block checksums at its next read and is fetched again, and a rename lost in a crash only
   * costs a refetch, because boot drops table entries whose files are missing. (An fsync per
   * 8 MiB chunk cost ~25 ms on a cloud disk, and every read waiting for the chunk waited for it.)
   *
   * Each write has a `.part` file of its own, so two writes of one chunk (a fetch whose bytes
   * were found bad, and the fetch that replaces it) never mix their bytes.
   *
   * @param name the chunk's content address
   * @param range the chunk's `[start, end)` in its object
   * @param data the chunk's bytes
   * @param abandoned asked before the rename: true drops the `.part` file instead
   * @returns bytes of the file written (header and data); 0 when abandoned
   * @throws the `node:fs` error (e.g. `ENOSPC`); the `.part` file is removed
   */
  async write(
    name: string,
    range: { start: number; end: number },
    data: Uint8Array,
    abandoned: () => boolean = () => false,
  ): Promise<number> {
    const path = this.pathOf(name);
    const dir = join(this.#dir, name.slice(0, 2), name.slice(2, 4));
    if (!this.#madeDirs.has(dir)) {
      await mkdir(dir, { recursive: true });
      this.#madeDirs.add(dir);
    }
    const header = encodeChunkHeader(name, range, data, this.#blockSize);
    const part = join(dir, `${name}.${++this.#writes}${PART_EXT}`);
    try {
      let mode: DirectWriteMode = "buffered";
      if (this.#directIo) mode = await writeNewFileDirect(part, header, data);
      else await writeNewFile(part, [header, data]);
      if (mode === "unsupported") this.#directIo = false;
      this.#onWrite?.(mode === "direct" ? "direct" : "buffered", header.length + data.length);
      if (abandoned()) {
        await rm(part, { force: true });
        return 0;
      }
      await rename(part, path);
      this.#retire(name); // an open file of that name is the one the rename replaced
    } catch (err) {
      await rm(part, { force: true }).catch(() => {});
      throw err;
    }
    return header.length + data.length;
  }

  /**
   * Reads data bytes `[from, to)` of a chunk (offsets within the chunk), verifying the header,
   * the file's length and the checksum of every block read.
   *
   * @param name the chunk's content address
   * @param range the chunk's `[start, end)` in its object, checked against the header
   * @param from first data byte wanted
   * @param to end (exclusive) of the data wanted
   * @returns the bytes, or undefined when the file does not exist
   * @throws {ChunkCorruptError} when the file is damaged, truncated or names another chunk
   */
  async read(
    name: string,
    range: { start: number; end: number },
    from: number,
    to: number,
  ): Promise<Uint8Array | undefined> {
    const path = this.pathOf(name);
    const file = await this.#acquire(name, path);
    if (!file) return undefined;
    try {
      const { header } = file;
      if (header.start !== range.start || header.end !== range.end) {
        throw new ChunkCorruptError(path, "header names another chunk");
      }
      if (to <= from) return new Uint8Array(0);
      const blocks = blocksCovering(header, from, to);
      const buf = new Uint8Array(blocks.dataEnd - blocks.dataStart);
      const got = await readInto(file.fh, buf, header.headerLength + blocks.dataStart);
      if (got !== buf.length) throw new ChunkCorruptError(path, "truncated data");
      verifyBlocks(header, blocks.first, buf, path);
      return buf.subarray(from - blocks.dataStart, to - blocks.dataStart);
    } catch (err) {
      this.#retire(name); // a damaged file is not read again through this handle
      throw err;
    } finally {
      this.#release(file);
    }
  }

  /** Closes the files kept open (reads in progress finish first). */
  async closeFiles(): Promise<void> {
    const files = [...this.#open.keys()];
    for (const name of files) this.#retire(name);
    await Promise.all([...this.#closing]);
  }

  /** The open file of chunk `name`, its header and length checked; undefined when missing. */
  async #acquire(name: string, path: string): Promise<OpenChunk | undefined> {
    const kept = this.#open.get(name);
    if (kept) {
      this.#open.delete(name); // re-inserted: most recently used
      this.#open.set(name, kept);
      kept.users++;
      return kept;
    }
    let fh: FileHandle;
    try {
      fh = await open(path, "r");
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    let header: ChunkHeader;
    try {
      header = await readHeader(fh, path);
      if (header.name !== name) throw new ChunkCorruptError(path, "header names another chunk");
      const { size } = await fh.stat();
      if (size !== chunkFileLength(header)) {
        throw new ChunkCorruptError(path, `file is ${size} bytes, header says otherwise`);
      }
    } catch (err) {
      await fh.close();
      throw err;
    }
    const file: OpenChunk = { fh, header, users: 1, retired: false };
    const raced = this.#open.get(name);
    if (raced) {
      // Another read opened it meanwhile: keep that one, this one is closed after use.
      file.retired = true;
      return file;
    }
    this.#open.set(name, file);
    for (const [old] of this.#open) {
      if (this.#open.size <= OPEN_CHUNKS) break;
      this.#retire(old);
    }
    return file;
  }

  #release(file: OpenChunk): void {
    file.users--;
    if (file.retired && file.users === 0) this.#closeFile(file);
  }

  /** Drops chunk `name`'s open file from the set; it is closed once no read uses it. */
  #retire(name: string): void {
    const file = this.#open.get(name);
    if (!file) return;
    this.#open.delete(name);
    file.retired = true;
    if (file.users === 0) this.#closeFile(file);
  }

  #closeFile(file: OpenChunk): void {
    const closing = file.fh.close().catch(() => {});
    this.#closing.add(closing);
    closing.finally(() => this.#closing.delete(closing));
  }

  /**
   * Reads and checks a chunk file's header and length, for adopting files found at boot.
   *
   * @returns the header, or undefined when the file is missing, damaged or not named `name`
   */
  async check(name: string): Promise<ChunkHeader | undefined> {
    const path = this.pathOf(name);
    try {
      const fh = await open(path, "r");
      try {
        const header = await readHeader(fh, path);
        const { size } = await fh.stat();
        const ok = header.name === name &&
          size === chunkFileLength(header);
        return ok ? header : undefined;
      } finally {
        await fh.close();
      }
    } catch {
      return undefined;
    }
  }

  /** Deletes chunk `name`'s file; a missing file is not an error. */
  async remove(name: string): Promise<void> {
    this.#retire(name);
    await rm(this.pathOf(name), { force: true });
  }

  /**
   * Walks the fan-out at boot: deletes every `.part` file (a write cut short) and anything that
   * is not a chunk file, and returns the chunk files found.
   *
   * @returns the chunk files, and how many leftovers were deleted
   */
  async scan(): Promise<{ chunks: StoredChunk[]; removed: number }> {
    const chunks: StoredChunk[] = [];
    let removed = 0;
    for (const a of await listDir(this.#dir)) {
      const dirA = join(this.#dir, a);
      for (const b of await listDir(dirA)) {
        const dirB = join(dirA, b);
        for (const file of await listDir(dirB)) {
          const path = join(dirB, file);
          const name = file.endsWith(CHUNK_EXT) ? file.slice(0, -CHUNK_EXT.length) : "";
          if (NAME_RE.test(name) && name.startsWith(a + b)) {
            const st = await stat(path).catch(() => undefined);
            if (st?.isFile()) {
              chunks.push({ name, size: st.size, mtimeMs: st.mtimeMs });
              continue;
            }
          }
          await rm(path, { recursive: true, force: true });
          removed++;
        }
      }
    }
    return { chunks, removed };
  }
}

async function readHeader(fh: FileHandle, path: string): Promise<ChunkHeader> {
  const fixed = new Uint8Array(CHUNK_HEADER_FIXED);
  if (await readInto(fh, fixed, 0) !== fixed.length) {
    throw new ChunkCorruptError(path, "truncated header");
  }
  const bytes = new Uint8Array(headerLengthOf(fixed, path));
  bytes.set(fixed);
  const rest = bytes.subarray(fixed.length);
  if (await readInto(fh, rest, fixed.length) !== rest.length) {
    throw new ChunkCorruptError(path, "truncated header");
  }
  return decodeChunkHeader(bytes, path);
}

async function listDir(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if (isNotFound(err) || (err as { code?: string }).code === "ENOTDIR") return [];
    throw err;
  }
}

/** True for a `node:fs` "no such file" error. */
export function isNotFound(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === "ENOENT";
}
