// A local directory as an object store, for single-host setups and tests.
//
// Layout under `root` (docs/architecture.md, "The fs store's directory"):
//   layout.json                        the layout version (written once old objects are migrated)
//   objects/<key>                      an object's bytes, a plain file; the key's `/` are folders
//   objects/<key>.tierd-meta.json      its metadata (ETag, content type, user metadata) naming
//                                      the data file's size, inode and mtime
//   tmp/<random>                       files being written; renamed or linked into objects/
//   uploads/<id>/                      one multipart upload: manifest.json and NNNNN.part files
// The publish protocol (which file is the commit point, what a reader accepts) is in
// ./object_files.ts; the migration of the first layout (a 4 KiB header before the bytes) in
// ./legacy.ts. Objects only ever live under objects/, so no key can name an internal file.
import { fsyncDir } from "../../src/base/durable.ts";
import { type Clock, systemClock } from "../../src/base/clock.ts";
import { Buffer } from "node:buffer";
import { randomBytes } from "node:crypto";
import { type FileHandle, mkdir, open, readdir, rename, rm, rmdir, stat } from "node:fs/promises";
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
  checkPutConditions,
  md5Hex,
  MIN_PART_SIZE,
  multipartEtag,
  planCompletion,
  type StoredPart,
} from "../_rules.ts";
import { resolveRange } from "../_ranges.ts";
import { readInto } from "../../src/base/bytes.ts";
import { createChecksum } from "../checksum.ts";
import {
  type Checksum,
  type CompletedPart,
  type DeleteFailure,
  type GetOptions,
  type GetResult,
  type HeadOptions,
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
import {
  copyInto,
  errno,
  isMissing,
  malformed,
  noSuchKey,
  noSuchUpload,
  readFully,
  readJson,
  toStoreError,
  utf8,
  writeTemp,
} from "./_files.ts";
import { migrateLegacyLayout } from "./legacy.ts";
import {
  type FsHooks,
  META_SUFFIX,
  ObjectFiles,
  objectPaths,
  type OpenObject,
  readMeta,
  STALE_MS,
  versionOf,
} from "./object_files.ts";

export { META_SUFFIX } from "./object_files.ts";

/** A part file starts with the part's hex MD5. */
const PART_HEADER_SIZE = 32;
/** Longest file name most filesystems allow, in bytes; a key segment leaves room for the suffix. */
const NAME_MAX = 255;
const SEGMENT_MAX = NAME_MAX - META_SUFFIX.length;
/** Reads of a file being hashed. */
const HASH_CHUNK = 4 * 1024 * 1024;

/** Options of {@linkcode FsStore}. */
export interface FsStoreOptions {
  /** The directory that holds the store; created if missing. */
  root: string;
  /** The smallest part but the last a completion accepts. @default 5 MiB, like S3 */
  minPartSize?: number;
  /** Upload times and the age of stale temp files. @default systemClock */
  clock?: Clock;
  /** For crash-point tests: called between the steps of every write. */
  hooks?: FsHooks;
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
 * one root: writers of a key take turns through a lock file, a create is a `link()` of the
 * metadata file (atomic create-if-absent), and every write is fsynced, file and directory,
 * before it is acknowledged. Each object's bytes are a
 * plain file, byte for byte what was put, so the directory can be read, copied and checked with
 * standard tools; a copy (new inodes) is recognised by its ETags on first access.
 *
 * Keys map to paths below `objects/` with `/` as the folder separator, so a key segment must be
 * a usable file name: keys with empty, `.` or `..` segments, a NUL, a segment over 239 bytes or
 * one ending in `.tierd-meta.json` are refused (`Unsupported`, code `InvalidKey`), as is a key
 * that needs a folder where an object is, or the reverse (`a/b` and `a/b/c` cannot both exist;
 * code `KeyConflict`). An overwrite (a put without `ifAbsent`) is not atomic for readers: for
 * the moment between its two renames the key reads as absent.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mkdtemp, rm } from "node:fs/promises";
 * import { tmpdir } from "node:os";
 * import { join } from "node:path";
 *
 * const root = await mkdtemp(join(tmpdir(), "tierd-bucket-")); // e.g. /var/lib/tierd/bucket
 * const store = new FsStore({ root });
 * const bytes = new TextEncoder().encode("a segment");
 * assert.equal((await store.put("segments/0.log", bytes, { ifAbsent: true })).status, "Created");
 * assert.equal((await store.put("segments/0.log", bytes, { ifAbsent: true })).status, "AlreadyExists");
 * await store.close();
 * await rm(root, { recursive: true });
 * ```
 */
export class FsStore implements ObjectStore {
  readonly kind = "fs";
  readonly root: string;
  readonly #objects: string;
  readonly #tmp: string;
  readonly #uploads: string;
  readonly #minPartSize: number;
  readonly #files: ObjectFiles;
  #ready?: Promise<void>;

  readonly #clock: Clock;

  constructor(options: FsStoreOptions) {
    this.root = options.root;
    this.#objects = join(this.root, "objects");
    this.#tmp = join(this.root, "tmp");
    this.#uploads = join(this.root, "uploads");
    this.#minPartSize = options.minPartSize ?? MIN_PART_SIZE;
    this.#clock = options.clock ?? systemClock;
    this.#files = new ObjectFiles(this.#tmp, this.#clock, options.hooks);
  }

  /**
   * Writes the object (see ObjectFiles.publish). `ifMatch` is compared with the object's version
   * under the key's lock, so it holds across processes sharing the root.
   */
  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutResult> {
    const segments = this.#segments(key, "put");
    checkPutConditions(options, key);
    checkMetadata(options.metadata, "put", key);
    await this.#open(options.signal);
    const temp = await writeTemp(this.#tmp, [body], "put", key);
    return await this.#files.publish(key, objectPaths(this.#objects, segments), temp, {
      etag: md5Hex(body),
      contentType: options.contentType,
      metadata: { ...options.metadata },
    }, {
      ifAbsent: options.ifAbsent,
      ifMatch: options.ifMatch,
      op: "put",
      signal: options.signal,
    });
  }

  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    const object = await this.#openObject(key, "get", options.signal);
    try {
      const size = object.meta.size;
      const [start, end] = resolveRange(options.range, size, key);
      const bytes = await readFully(object.fh, end - start, start, key, "get");
      return { bytes, size, etag: object.meta.etag, version: versionOf(object.meta) };
    } finally {
      await object.fh.close();
    }
  }

  /**
   * The object's size, ETag and metadata. With `checksums`, a CRC-32 of the data file read
   * now: the fs store keeps no checksum worth trusting over its file, so it hashes the file.
   */
  async head(key: string, options: HeadOptions = {}): Promise<ObjectHead> {
    const object = await this.#openObject(key, "head", options.signal);
    try {
      const { meta, mtime } = object;
      const head: ObjectHead = {
        key,
        size: meta.size,
        etag: meta.etag,
        version: versionOf(meta),
        lastModified: mtime,
        metadata: { ...meta.metadata },
      };
      if (options.checksums) {
        const checksum = await hashOpenFile(object.fh, meta.size, options.signal, key);
        head.checksums = [{ ...checksum, type: "full" }];
      }
      return head;
    } finally {
      await object.fh.close();
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
        const paths = objectPaths(this.#objects, this.#segments(key, "deleteMany"));
        if (await this.#files.remove(key, paths, options.signal)) {
          folders.add(dirname(paths.data));
        }
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
      const temp = await writeTemp(
        this.#tmp,
        [utf8(JSON.stringify(manifest))],
        "createMultipart",
        key,
      );
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
    const temp = await writeTemp(this.#tmp, [utf8(etag), body], "putPart", key);
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
    // The parts, concatenated into one temp file: published like a put, so completion is
    // atomic (the metadata file is the commit point).
    const temp = await writeTemp(this.#tmp, [], op, key, async (fh) => {
      let position = 0;
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
    const result = await this.#files.publish(key, objectPaths(this.#objects, segments), temp, {
      etag: multipartEtag(plan.map((part) => part.etag)),
      contentType: manifest.contentType,
      metadata: manifest.metadata,
      parts: plan.map((part) => part.size),
    }, { ifAbsent: options.ifAbsent, op, signal: options.signal });
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

  /**
   * Creates the layout once, clears temp files a crash left behind and migrates objects of the
   * first layout (see ./legacy.ts): at open, not when first read, so every file under objects/
   * is plain from then on, the objects nobody reads again included.
   */
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
        if (info && now - info.mtimeMs > STALE_MS) await rm(path, { force: true });
      }
      await migrateLegacyLayout(this.root, this.#objects, this.#files);
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
      if (Buffer.byteLength(segment) > SEGMENT_MAX) {
        throw invalidKey(
          key,
          op,
          `the segment ${JSON.stringify(segment)} is longer than ${SEGMENT_MAX} bytes`,
        );
      }
      if (segment.endsWith(META_SUFFIX)) {
        throw invalidKey(key, op, `the fs store keeps metadata in files ending in ${META_SUFFIX}`);
      }
    }
    return segments;
  }

  async #openObject(key: string, op: string, signal: AbortSignal | undefined): Promise<OpenObject> {
    const segments = this.#segments(key, op);
    await this.#open(signal);
    try {
      const object = await this.#files.open(key, objectPaths(this.#objects, segments));
      if (object) return object;
    } catch (err) {
      throw toStoreError(err, op, key);
    }
    throw noSuchKey(key, op);
  }

  /**
   * Makes the removals in `folder` durable, then removes it and its parents while empty:
   * folders are not part of the store, so the tree mirrors the keys. A put that loses its
   * freshly made folder this way makes it again (see ObjectFiles.publish).
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
   * appended to folders, which is the order of the keys inside them. A data file is listed when
   * its metadata is beside it and has its size (GET and HEAD check the rest).
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
      .filter((e) =>
        e.name.startsWith(namePrefix) && (e.isDirectory() ||
          (e.isFile() && !e.name.endsWith(META_SUFFIX)))
      )
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
        const [info, meta] = await Promise.all([
          stat(path).catch(() => undefined),
          readMeta(path + META_SUFFIX).catch(() => undefined),
        ]);
        if (info?.isFile() && meta?.meta?.size === info.size) {
          yield { key: entry.key, size: info.size, lastModified: info.mtime };
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

/** CRC-32 (the runtime's, the cheapest) of the first `size` bytes of an open file, in 4 MiB reads. */
async function hashOpenFile(
  fh: FileHandle,
  size: number,
  signal: AbortSignal | undefined,
  key: string,
): Promise<Checksum> {
  const hasher = await createChecksum("crc32");
  const buf = new Uint8Array(Math.min(HASH_CHUNK, Math.max(1, size)));
  for (let at = 0; at < size;) {
    signal?.throwIfAborted();
    const n = await readInto(fh, buf.subarray(0, Math.min(buf.length, size - at)), at);
    if (n === 0) throw malformed(key, "head", "the file is shorter than its metadata says");
    hasher.update(buf.subarray(0, n));
    at += n;
  }
  return hasher.digest();
}
