// A local directory as an object store, for single-host setups and tests.
//
// Layout under `root`:
//   objects/<key>          one file per object; the key's `/` are folders
//   tmp/<random>           files being written; renamed or linked into objects/ when complete
//   uploads/<id>/          one multipart upload: manifest.json and NNNNN.part files
// Each object file is a 4 KiB header (magic, ETag, content type, user metadata) and then the
// bytes. Keeping the metadata in the same file, rather than in a sidecar, means one link() or
// rename() publishes both: no reader sees an object without its metadata, and two concurrent
// writers can never leave one's bytes with the other's metadata. Objects only ever live under
// objects/, so no key can name an internal file.
import { type Clock, systemClock } from "../clock.ts";
import { Buffer } from "node:buffer";
import { randomBytes } from "node:crypto";
import {
  type FileHandle,
  link,
  lstat,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  rmdir,
  stat,
  unlink,
} from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  checkKey,
  compareUtf8,
  decodeToken,
  encodeToken,
  invalidKey,
  pageSize,
} from "../key_rules.ts";
import {
  checkMetadata,
  checkPartNumber,
  invalidArgument,
  md5Hex,
  MIN_PART_SIZE,
  multipartEtag,
  planCompletion,
  type StoredPart,
} from "../_rules.ts";
import { resolveRange } from "../_ranges.ts";
import { readInto, writeAll } from "../bytes.ts";
import {
  type CompletedPart,
  type DeleteFailure,
  type GetOptions,
  type GetResult,
  type ListOptions,
  type ListPage,
  type MultipartUpload,
  type ObjectHead,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
  type PutResult,
  StoreError,
  type UserMetadata,
} from "../types.ts";

/** Bytes before an object's content in its file. */
export const HEADER_SIZE = 4096;
const MAGIC = "tierdob1";
/** A part file starts with the part's hex MD5. */
const PART_HEADER_SIZE = 32;
/** Longest file name most filesystems allow, in bytes. */
const NAME_MAX = 255;
/** Temp files older than this are leftovers of a crash, removed when a store opens. */
const STALE_TEMP_MS = 60 * 60 * 1000;
const COPY_CHUNK = 1 << 20;

/** Options of {@linkcode FsStore}. */
export interface FsStoreOptions {
  /** The directory that holds the store; created if missing. */
  root: string;
  /** The smallest part but the last a completion accepts. @default 5 MiB, like S3 */
  minPartSize?: number;
  /** Upload times and the age of stale temp files. @default systemClock */
  clock?: Clock;
}

interface ObjectHeader {
  etag: string;
  contentType?: string;
  metadata: UserMetadata;
}

interface UploadManifest {
  key: string;
  uploadId: string;
  initiated: string;
  contentType?: string;
  metadata: UserMetadata;
}

/**
 * An {@linkcode ObjectStore} in a local directory. Several instances (and processes) may share
 * one root: creation is `link()` (atomic create-if-absent), replacement is `rename()`, and every
 * write is fsynced, file and directory, before it is acknowledged.
 *
 * Keys map to paths below `objects/` with `/` as the folder separator, so a key segment must be
 * a usable file name: keys with empty, `.` or `..` segments, a NUL, or a segment over 255 bytes
 * are refused (`Unsupported`, code `InvalidKey`), as is a key that needs a folder where an
 * object is, or the reverse (`a/b` and `a/b/c` cannot both exist; code `KeyConflict`).
 * @example
 * const store = new FsStore({ root: "/var/lib/tierd/bucket" });
 * await store.put("segments/00000000000000000000.log", bytes, { ifAbsent: true });
 */
export class FsStore implements ObjectStore {
  readonly kind = "fs";
  readonly root: string;
  readonly #objects: string;
  readonly #tmp: string;
  readonly #uploads: string;
  readonly #minPartSize: number;
  #ready?: Promise<void>;

  readonly #clock: Clock;

  constructor(options: FsStoreOptions) {
    this.root = options.root;
    this.#objects = join(this.root, "objects");
    this.#tmp = join(this.root, "tmp");
    this.#uploads = join(this.root, "uploads");
    this.#minPartSize = options.minPartSize ?? MIN_PART_SIZE;
    this.#clock = options.clock ?? systemClock;
  }

  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutResult> {
    const segments = this.#segments(key, "put");
    checkMetadata(options.metadata, "put", key);
    await this.#open(options.signal);
    const etag = md5Hex(body);
    const header = encodeHeader({
      etag,
      contentType: options.contentType,
      metadata: { ...options.metadata },
    }, key);
    const temp = await this.#writeTemp([header, body], "put", key);
    return await this.#publish(temp, key, segments, etag, options);
  }

  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    const fh = await this.#openObject(key, "get", options.signal);
    try {
      const { header, size } = await readObjectHeader(fh, key, "get");
      const [start, end] = resolveRange(options.range, size, key);
      const bytes = await readFully(fh, end - start, HEADER_SIZE + start, key, "get");
      return { bytes, size, etag: header.etag };
    } finally {
      await fh.close();
    }
  }

  async head(key: string, options: { signal?: AbortSignal } = {}): Promise<ObjectHead> {
    const fh = await this.#openObject(key, "head", options.signal);
    try {
      const { header, size, mtime } = await readObjectHeader(fh, key, "head");
      return { key, size, etag: header.etag, lastModified: mtime, metadata: header.metadata };
    } finally {
      await fh.close();
    }
  }

  async deleteMany(
    keys: string[],
    options: { signal?: AbortSignal } = {},
  ): Promise<DeleteFailure[]> {
    await this.#open(options.signal);
    const failures: DeleteFailure[] = [];
    const folders = new Set<string>();
    for (const key of keys) {
      options.signal?.throwIfAborted();
      try {
        const folder = await this.#delete(key);
        if (folder) folders.add(folder);
      } catch (err) {
        const error = toStoreError(err, "deleteMany", key);
        if (!(error instanceof StoreError)) throw error;
        failures.push({ key, error });
      }
    }
    for (const folder of folders) await this.#prune(folder);
    return failures;
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    await this.#open(options.signal);
    const after = options.continuationToken === undefined
      ? undefined
      : decodeToken(options.continuationToken, "list");
    const limit = pageSize(options.maxKeys);
    const page: ListPage = { objects: [] };
    // The folders of the prefix must exist as written; its last piece filters names.
    const folders = prefix.split("/");
    const namePrefix = folders.pop()!;
    if (!folders.every(isSafeSegment) || namePrefix.includes("\0")) return page;
    const start = folders.length ? folders.join("/") + "/" : "";
    for await (
      const object of this.#walk(join(this.#objects, ...folders), start, namePrefix, after)
    ) {
      if (page.objects.length === limit) {
        page.continuationToken = encodeToken(page.objects[limit - 1].key);
        break;
      }
      page.objects.push(object);
      options.signal?.throwIfAborted();
    }
    return page;
  }

  async createMultipart(
    key: string,
    options: { metadata?: UserMetadata; contentType?: string; signal?: AbortSignal } = {},
  ): Promise<string> {
    this.#segments(key, "createMultipart");
    checkMetadata(options.metadata, "createMultipart", key);
    // Refuse now what the completion could not store.
    encodeHeader(
      { etag: "", contentType: options.contentType, metadata: { ...options.metadata } },
      key,
    );
    await this.#open(options.signal);
    const uploadId = randomBytes(16).toString("hex");
    const dir = join(this.#uploads, uploadId);
    const manifest: UploadManifest = {
      key,
      uploadId,
      initiated: new Date(this.#clock.now()).toISOString(),
      contentType: options.contentType,
      metadata: { ...options.metadata },
    };
    try {
      await mkdir(dir);
      const temp = await this.#writeTemp([utf8(JSON.stringify(manifest))], "createMultipart", key);
      await rename(temp, join(dir, "manifest.json"));
      await fsyncDir(dir);
      await fsyncDir(this.#uploads);
    } catch (err) {
      throw toStoreError(err, "createMultipart", key);
    }
    return uploadId;
  }

  async putPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Uint8Array,
    options: { signal?: AbortSignal } = {},
  ): Promise<CompletedPart> {
    checkPartNumber(partNumber, "putPart", key);
    await this.#open(options.signal);
    await this.#readManifest(key, uploadId, "putPart");
    const etag = md5Hex(body);
    const temp = await this.#writeTemp([utf8(etag), body], "putPart", key);
    try {
      await rename(temp, this.#partPath(uploadId, partNumber));
    } catch (err) {
      await rm(temp, { force: true });
      if (errno(err) === "ENOENT") throw noSuchUpload(key, uploadId, "putPart");
      throw toStoreError(err, "putPart", key);
    }
    await fsyncDir(join(this.#uploads, uploadId));
    return { partNumber, etag };
  }

  async completeMultipart(
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    options: { ifAbsent?: boolean; signal?: AbortSignal } = {},
  ): Promise<PutResult> {
    const op = "completeMultipart";
    const segments = this.#segments(key, op);
    await this.#open(options.signal);
    const manifest = await this.#readManifest(key, uploadId, op);
    const stored = new Map<number, StoredPart>();
    for (const { partNumber } of parts) {
      if (Number.isInteger(partNumber) && !stored.has(partNumber)) {
        const part = await this.#readPartHeader(key, uploadId, partNumber);
        if (part) stored.set(partNumber, part);
      }
    }
    const plan = planCompletion(key, parts, (n) => stored.get(n), this.#minPartSize);
    const etag = multipartEtag(plan.map((part) => part.etag));
    const header = encodeHeader({
      etag,
      contentType: manifest.contentType,
      metadata: manifest.metadata,
    }, key);
    const temp = await this.#writeTemp([header], op, key, async (fh) => {
      let position = HEADER_SIZE;
      for (const part of plan) {
        options.signal?.throwIfAborted();
        const path = this.#partPath(uploadId, part.partNumber);
        try {
          position += await copyInto(fh, position, path, PART_HEADER_SIZE, part.size);
        } catch (err) {
          // The upload was aborted (or completed) by someone else meanwhile.
          throw errno(err) === "ENOENT" ? noSuchUpload(key, uploadId, op) : err;
        }
      }
    });
    const result = await this.#publish(temp, key, segments, etag, { ...options, op });
    // Like S3, a refused conditional completion leaves the upload to be retried or aborted.
    if (result.status === "Created") {
      await rm(join(this.#uploads, uploadId), { recursive: true, force: true });
    }
    return result;
  }

  async abortMultipart(
    key: string,
    uploadId: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    await this.#open(options.signal);
    try {
      await this.#readManifest(key, uploadId, "abortMultipart");
    } catch (err) {
      if (err instanceof StoreError && err.kind === "NotFound") return;
      throw err;
    }
    await rm(join(this.#uploads, uploadId), { recursive: true, force: true });
  }

  async listMultipartUploads(
    prefix: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<MultipartUpload[]> {
    await this.#open(options.signal);
    const uploads: MultipartUpload[] = [];
    for (const uploadId of await readdir(this.#uploads)) {
      const manifest = await readJson<UploadManifest>(
        join(this.#uploads, uploadId, "manifest.json"),
      );
      if (manifest?.uploadId === uploadId && manifest.key.startsWith(prefix)) {
        uploads.push({ key: manifest.key, uploadId, initiated: new Date(manifest.initiated) });
      }
    }
    return uploads.sort((a, b) => compareUtf8(a.key, b.key) || compareUtf8(a.uploadId, b.uploadId));
  }

  async close(): Promise<void> {}

  /** Creates the layout once, and clears temp files a crash left behind. */
  async #open(signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    this.#ready ??= (async () => {
      for (const dir of [this.#objects, this.#tmp, this.#uploads]) {
        await mkdir(dir, { recursive: true });
      }
      const now = this.#clock.now();
      for (const name of await readdir(this.#tmp)) {
        const path = join(this.#tmp, name);
        const info = await stat(path).catch(() => undefined);
        if (info && now - info.mtimeMs > STALE_TEMP_MS) await rm(path, { force: true });
      }
    })().catch((err) => {
      this.#ready = undefined;
      throw toStoreError(err, "open");
    });
    await this.#ready;
  }

  /** The key's path segments below objects/, or a typed refusal. */
  #segments(key: string, op: string): string[] {
    checkKey(key, op);
    const segments = key.split("/");
    for (const segment of segments) {
      if (!isSafeSegment(segment)) {
        throw invalidKey(
          key,
          op,
          "the fs store needs non-empty segments other than . and .., without NUL",
        );
      }
      if (Buffer.byteLength(segment) > NAME_MAX) {
        throw invalidKey(
          key,
          op,
          `the segment ${JSON.stringify(segment)} is longer than ${NAME_MAX} bytes`,
        );
      }
    }
    return segments;
  }

  /** Writes chunks (then `more`) to a new temp file and fsyncs it; returns its path. */
  async #writeTemp(
    chunks: Uint8Array[],
    op: string,
    key: string,
    more?: (fh: FileHandle) => Promise<void>,
  ): Promise<string> {
    const path = join(this.#tmp, randomBytes(12).toString("hex"));
    let fh: FileHandle | undefined;
    try {
      fh = await open(path, "wx");
      let position = 0;
      for (const chunk of chunks) {
        await writeAll(fh, chunk, position);
        position += chunk.length;
      }
      await more?.(fh);
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
   * Makes a complete temp file the object at `key`: `link()` when creating only (EEXIST means
   * another writer won), else `rename()`. Then fsyncs the folders that changed.
   */
  async #publish(
    temp: string,
    key: string,
    segments: string[],
    etag: string,
    options: { ifAbsent?: boolean; op?: string },
  ): Promise<PutResult> {
    const op = options.op ?? "put";
    const target = join(this.#objects, ...segments);
    const dir = dirname(target);
    try {
      // A concurrent delete may remove an emptied folder between mkdir and link: try again.
      for (let attempt = 1;; attempt++) {
        const created = await this.#mkdirs(dir, key, op);
        try {
          if (options.ifAbsent) await link(temp, target);
          else await rename(temp, target);
        } catch (err) {
          const code = errno(err);
          if (code === "ENOENT" && attempt < 10) continue;
          if (
            code === "EEXIST" || code === "EISDIR" || code === "ENOTEMPTY" || code === "ENOTDIR"
          ) {
            if (options.ifAbsent && await isFile(target)) return { status: "AlreadyExists" };
            throw keyConflict(key, op);
          }
          throw err;
        }
        for (const folder of created) await fsyncDir(folder);
        await fsyncDir(dir);
        return { status: "Created", etag };
      }
    } catch (err) {
      throw toStoreError(err, op, key);
    } finally {
      // After a link the temp file is a second name to drop; after a rename it is gone already.
      await rm(temp, { force: true });
    }
  }

  /** Creates `dir` and its parents; returns the folders whose entries changed, to fsync. */
  async #mkdirs(dir: string, key: string, op: string): Promise<string[]> {
    try {
      const first = await mkdir(dir, { recursive: true });
      if (!first) return [];
      const changed = [dirname(first)];
      for (let d = dir; d !== dirname(first); d = dirname(d)) changed.push(d);
      return changed;
    } catch (err) {
      const code = errno(err);
      if (code === "EEXIST" || code === "ENOTDIR") throw keyConflict(key, op);
      throw err;
    }
  }

  async #openObject(key: string, op: string, signal: AbortSignal | undefined): Promise<FileHandle> {
    const segments = this.#segments(key, op);
    await this.#open(signal);
    let fh: FileHandle;
    try {
      fh = await open(join(this.#objects, ...segments), "r");
    } catch (err) {
      throw isMissing(err) ? noSuchKey(key, op) : toStoreError(err, op, key);
    }
    // On Linux a folder opens too; it is no object.
    if ((await fh.stat()).isFile()) return fh;
    await fh.close();
    throw noSuchKey(key, op);
  }

  /** Removes one object; returns its folder when something was removed. */
  async #delete(key: string): Promise<string | undefined> {
    const segments = this.#segments(key, "deleteMany");
    const path = join(this.#objects, ...segments);
    try {
      // A folder at the path is no object; never unlink it (Deno's unlink removes empty ones).
      if (!(await isFile(path))) return undefined;
      await unlink(path);
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    return dirname(path);
  }

  /**
   * Makes the removals in `folder` durable, then removes it and its parents while empty:
   * folders are not part of the store, so the tree mirrors the keys. A put that loses its
   * freshly made folder this way makes it again (see #publish).
   */
  async #prune(folder: string): Promise<void> {
    await fsyncDir(folder).catch((err) => {
      if (!isMissing(err)) throw toStoreError(err, "deleteMany");
    });
    for (
      let dir = folder;
      dir !== this.#objects && dir.startsWith(this.#objects);
      dir = dirname(dir)
    ) {
      try {
        await rmdir(dir);
      } catch {
        break;
      }
    }
  }

  /**
   * Yields the objects below `dir` (whose keys start with `keyPrefix`) whose names start with
   * `namePrefix`, in UTF-8 key order, after the key `after`. Entries sort by name with `/`
   * appended to folders, which is the order of the keys inside them.
   */
  async *#walk(
    dir: string,
    keyPrefix: string,
    namePrefix: string,
    after: string | undefined,
  ): AsyncGenerator<ObjectInfo> {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (isMissing(err)) return;
      throw toStoreError(err, "list");
    }
    const sorted = entries
      .filter((e) => e.name.startsWith(namePrefix) && (e.isFile() || e.isDirectory()))
      .map((e) => ({
        name: e.name,
        folder: e.isDirectory(),
        key: keyPrefix + e.name + (e.isDirectory() ? "/" : ""),
      }))
      .sort((a, b) => compareUtf8(a.key, b.key));
    for (const entry of sorted) {
      const path = join(dir, entry.name);
      if (entry.folder) {
        // Every key inside sorts like the folder's key, unless `after` is inside it too.
        if (
          after !== undefined && compareUtf8(entry.key, after) < 0 && !after.startsWith(entry.key)
        ) continue;
        yield* this.#walk(path, entry.key, "", after);
      } else if (after === undefined || compareUtf8(entry.key, after) > 0) {
        const info = await stat(path).catch(() => undefined);
        if (info && info.size >= HEADER_SIZE) {
          yield { key: entry.key, size: info.size - HEADER_SIZE, lastModified: info.mtime };
        }
      }
    }
  }

  async #readManifest(key: string, uploadId: string, op: string): Promise<UploadManifest> {
    const manifest = /^[0-9a-f]{32}$/.test(uploadId)
      ? await readJson<UploadManifest>(join(this.#uploads, uploadId, "manifest.json"))
      : undefined;
    if (manifest?.key !== key || manifest.uploadId !== uploadId) {
      throw noSuchUpload(key, uploadId, op);
    }
    return manifest;
  }

  #partPath(uploadId: string, partNumber: number): string {
    return join(this.#uploads, uploadId, `${String(partNumber).padStart(5, "0")}.part`);
  }

  async #readPartHeader(
    key: string,
    uploadId: string,
    partNumber: number,
  ): Promise<StoredPart | undefined> {
    let fh: FileHandle | undefined;
    try {
      fh = await open(this.#partPath(uploadId, partNumber), "r");
      const size = (await fh.stat()).size - PART_HEADER_SIZE;
      const etag = new TextDecoder().decode(
        await readFully(fh, PART_HEADER_SIZE, 0, key, "completeMultipart"),
      );
      return { size, etag };
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw toStoreError(err, "completeMultipart", key);
    } finally {
      await fh?.close();
    }
  }
}

function isSafeSegment(segment: string): boolean {
  return segment !== "" && segment !== "." && segment !== ".." && !segment.includes("\0");
}

function utf8(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}

function encodeHeader(header: ObjectHeader, key: string): Uint8Array {
  const json = utf8(JSON.stringify(header));
  const out = new Uint8Array(HEADER_SIZE);
  if (MAGIC.length + 4 + json.length > HEADER_SIZE) {
    throw invalidArgument(
      `metadata and content type take more than ${HEADER_SIZE - 12} bytes`,
      "put",
      key,
    );
  }
  out.set(utf8(MAGIC));
  new DataView(out.buffer).setUint32(MAGIC.length, json.length, true);
  out.set(json, MAGIC.length + 4);
  return out;
}

async function readObjectHeader(
  fh: FileHandle,
  key: string,
  op: string,
): Promise<{ header: ObjectHeader; size: number; mtime: Date }> {
  const info = await fh.stat();
  const raw = await readFully(fh, Math.min(HEADER_SIZE, info.size), 0, key, op);
  const length = raw.length === HEADER_SIZE
    ? new DataView(raw.buffer).getUint32(MAGIC.length, true)
    : -1;
  if (
    length < 0 || new TextDecoder().decode(raw.subarray(0, MAGIC.length)) !== MAGIC ||
    length > HEADER_SIZE - 12
  ) {
    throw malformed(key, op);
  }
  try {
    const header = JSON.parse(
      new TextDecoder().decode(raw.subarray(12, 12 + length)),
    ) as ObjectHeader;
    return { header, size: info.size - HEADER_SIZE, mtime: info.mtime };
  } catch {
    throw malformed(key, op);
  }
}

async function readFully(
  fh: FileHandle,
  length: number,
  position: number,
  key: string,
  op: string,
): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  if (await readInto(fh, out, position) < length) {
    throw malformed(key, op, "the file is shorter than its header says");
  }
  return out;
}

/** Appends `length` bytes of `path` from `offset` to `fh` at `position`; returns `length`. */
async function copyInto(
  fh: FileHandle,
  position: number,
  path: string,
  offset: number,
  length: number,
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
      if (bytesRead === 0) throw new Error(`part ${path} is shorter than expected`);
      await writeAll(fh, buf.subarray(0, bytesRead), position + done);
      done += bytesRead;
    }
    return length;
  } finally {
    await src.close();
  }
}

/** Makes a folder's new or removed entries durable (a no-op where folders cannot be opened). */
async function fsyncDir(dir: string): Promise<void> {
  let fh: FileHandle | undefined;
  try {
    fh = await open(dir, "r");
    await fh.sync();
  } catch (err) {
    const code = errno(err);
    if (code !== "EISDIR" && code !== "EPERM" && code !== "EINVAL" && code !== "EBADF") throw err;
  } finally {
    await fh?.close();
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isFile();
  } catch (err) {
    if (isMissing(err)) return false;
    throw err;
  }
}

async function readJson<T>(path: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as T;
  } catch {
    return undefined;
  }
}

function errno(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** ENOENT, or ENOTDIR: a path through an object where a folder would be. */
function isMissing(err: unknown): boolean {
  const code = errno(err);
  return code === "ENOENT" || code === "ENOTDIR";
}

function noSuchKey(key: string, op: string): StoreError {
  return new StoreError("NotFound", `no object ${JSON.stringify(key)}`, {
    op,
    key,
    code: "NoSuchKey",
  });
}

function noSuchUpload(key: string, uploadId: string, op: string): StoreError {
  return new StoreError("NotFound", `no multipart upload ${uploadId} for ${JSON.stringify(key)}`, {
    op,
    key,
    code: "NoSuchUpload",
  });
}

function keyConflict(key: string, op: string): StoreError {
  return new StoreError(
    "Unsupported",
    `key ${JSON.stringify(key)} needs a folder where an object is, or an object where a folder is`,
    { op, key, code: "KeyConflict" },
  );
}

function malformed(key: string, op: string, why = "not an object file of this store"): StoreError {
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
function toStoreError(err: unknown, op: string, key?: string): StoreError | DOMException {
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
