// One object of the fs store as two plain files side by side (docs/architecture.md, "The fs
// store's directory"): its bytes at `objects/{key}`, exactly as they were put, and its metadata
// at `objects/{key}.tierd-meta.json`, naming the data file's size, inode and mtime. An object is
// visible only when its metadata file exists and describes the data file beside it, so a reader
// never pairs bytes with the wrong metadata, and a crash between the two writes leaves nothing
// visible. This module holds the protocol: how the pair is published and removed (writers of a
// key take turns, ./key_lock.ts) and how a reader resolves it (without a lock).
import { fsyncDir } from "../../src/base/durable.ts";
import { createHash, randomBytes } from "node:crypto";
import {
  type FileHandle,
  link,
  lstat,
  mkdir,
  open,
  readFile,
  rename,
  rm,
  unlink,
} from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Clock } from "../../src/base/clock.ts";
import { multipartEtag, versionMismatch } from "../_rules.ts";
import type { PutResult, UserMetadata } from "../types.ts";
import {
  errno,
  isDirectory,
  isFile,
  isMissing,
  isTaken,
  keyConflict,
  toStoreError,
  utf8,
  writeTemp,
} from "./_files.ts";
import { withKeyLock } from "./key_lock.ts";

/** What a metadata file's name adds to its object's; no key segment may end with it. */
export const META_SUFFIX = ".tierd-meta.json";

/** Temp files older than this are leftovers of a crash. */
export const STALE_MS = 60 * 60 * 1000;

/** The steps of a write, in order, for the crash-point tests (see {@link FsHooks}). */
export type WriteStep =
  | "data-written" // the bytes are in a fsynced temp file
  | "meta-written" // the metadata is in a fsynced temp file
  | "meta-committed" // the metadata file is in place (for a create: the one winner)
  | "data-placed" // the bytes are at the key; folders not yet fsynced
  | "meta-taken" // a delete removed the metadata; the bytes are still there
  | "legacy-copied"; // a migration copied an old-layout object's bytes out

/** Test hooks of the fs store. */
export interface FsHooks {
  /** Awaited between the steps of a write, so a test can crash a process at each. */
  step?(step: WriteStep, key: string): void | Promise<void>;
}

/** The metadata file of an object. */
export interface ObjectMeta {
  /** Always `tierd-fs-object`: a file that says otherwise is no metadata of this store. */
  kind: "tierd-fs-object";
  /** The data file this describes: bytes, inode (decimal) and mtime (ns, decimal). */
  size: number;
  ino: string;
  mtimeNs: string;
  etag: string;
  contentType?: string;
  metadata: UserMetadata;
  /** A multipart object's part sizes, in order: its ETag can be recomputed from its bytes. */
  parts?: number[];
  /** MD5 (hex) of the bytes, where the ETag is not their MD5 and the parts are unknown. */
  md5?: string;
  /**
   * A random token drawn by the publish that wrote this file: the object's version (see
   * {@link versionOf}). Metadata written before versions existed has none.
   */
  version?: string;
}

/** What a write publishes besides the bytes. */
export type ObjectFields = Pick<ObjectMeta, "etag" | "contentType" | "metadata" | "parts" | "md5">;

/** An object as a reader gets it: its metadata and its open data file. */
export interface OpenObject {
  meta: ObjectMeta;
  fh: FileHandle;
  mtime: Date;
}

/**
 * The object's version, for `PutOptions.ifMatch`: the random token its publish drew. Not the
 * ETag (the same bytes put again keep it) and not the data file's inode and mtime (a freed inode
 * is soon reused, and mtimes are as coarse as the kernel's clock tick), so it changes on every
 * put. Metadata written before versions existed gets one derived from its ETag and data file,
 * which holds until the next put (or until a copied directory is adopted: then a replacement
 * with the old version is refused once, the safe side).
 */
export function versionOf(meta: ObjectMeta): string {
  return meta.version ?? `${meta.etag}.${meta.ino}.${meta.mtimeNs}`;
}

/** The two paths of an object. */
export interface ObjectPaths {
  data: string;
  meta: string;
}

/** The paths of the object whose key has these `segments`, below `objects`. */
export function objectPaths(objects: string, segments: readonly string[]): ObjectPaths {
  const data = join(objects, ...segments);
  return { data, meta: data + META_SUFFIX };
}

/** A metadata file as read, with its own inode and age; `meta` is unset when it is garbage. */
export interface MetaFile {
  meta?: ObjectMeta;
  ino: bigint;
  mtimeMs: number;
}

/**
 * The object protocol over one store root: publish, resolve and remove pairs of files. Writers
 * of one key take turns (./key_lock.ts), so under the lock the pair is either whole or a crash
 * leftover; readers take no lock and accept only a pair that belongs together.
 */
export class ObjectFiles {
  constructor(
    readonly tmp: string,
    readonly clock: Clock,
    readonly hooks: FsHooks = {},
  ) {}

  /**
   * Opens the object `key` at `paths` if it is visible: its metadata parses and names the data
   * file's inode, size and mtime. A data file of the right size that is another inode (the
   * directory was copied) is checked against the metadata's ETag and, when its bytes match,
   * adopted: the metadata is rewritten to name it (taking the key's lock, unless the caller
   * holds it already: `locked`).
   */
  async open(
    key: string,
    paths: ObjectPaths,
    options: { locked?: boolean } = {},
  ): Promise<OpenObject | undefined> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const found = await readMeta(paths.meta);
      if (!found?.meta) return undefined;
      const wanted = found.meta;
      let fh: FileHandle;
      try {
        fh = await open(paths.data, "r");
      } catch (err) {
        if (isMissing(err) || errno(err) === "EISDIR") continue;
        throw err;
      }
      let keep = false;
      try {
        const st = await fh.stat({ bigint: true });
        if (!st.isFile()) return undefined;
        const mtime = new Date(Number(st.mtimeMs));
        if (describes(wanted, st)) {
          keep = true;
          return { meta: wanted, fh, mtime };
        }
        // An overwrite may be between its two renames: look again before checking the bytes.
        if (attempt < 2 || BigInt(wanted.size) !== st.size) continue;
        if (!(await bytesMatch(fh, wanted))) return undefined;
        const meta = { ...wanted, ino: String(st.ino), mtimeNs: String(st.mtimeNs) };
        await this.#rebind(key, paths, found, meta, options.locked).catch(() => {});
        keep = true;
        return { meta, fh, mtime };
      } finally {
        if (!keep) await fh.close();
      }
    }
    return undefined;
  }

  /** True when a visible object `key` is at `paths` (see {@link open} for `locked`). */
  async exists(key: string, paths: ObjectPaths, options: { locked?: boolean } = {}) {
    const found = await this.open(key, paths, options);
    await found?.fh.close();
    return found !== undefined;
  }

  /**
   * Makes the fsynced temp file `temp` the object `key` at `paths` with `fields` and a fresh
   * version, holding the key's lock. The metadata file is the commit point: with `ifAbsent` it
   * is `link()`ed (one winner, even against a writer that took no lock), else `rename()`d over
   * the old one; the bytes are renamed into place after it. With `ifMatch` the object's version
   * is compared under the lock first: no other writer can publish in between, and a crash after
   * the comparison leaves what an unconditional overwrite's crash leaves. Metadata that
   * describes no visible object is a crash leftover (no writer is midway while we hold the
   * lock) and is removed first.
   * @throws {StoreError} `PreconditionFailed` (VersionMismatch) when `ifMatch` does not hold;
   *   `Unsupported` (KeyConflict) when a folder is where the object would be
   */
  async publish(
    key: string,
    paths: ObjectPaths,
    temp: string,
    fields: ObjectFields,
    options: { ifAbsent?: boolean; ifMatch?: string; op: string; signal?: AbortSignal },
  ): Promise<PutResult> {
    const { op, ifMatch } = options;
    let metaTemp: string | undefined;
    try {
      const st = await lstat(temp, { bigint: true });
      const version = randomBytes(16).toString("hex");
      const meta: ObjectMeta = {
        kind: "tierd-fs-object",
        size: Number(st.size),
        ino: String(st.ino),
        mtimeNs: String(st.mtimeNs),
        ...fields,
        version,
      };
      await this.hooks.step?.("data-written", key);
      metaTemp = await writeTemp(this.tmp, [utf8(JSON.stringify(meta))], op, key);
      await this.hooks.step?.("meta-written", key);
      const committed = metaTemp;
      return await withKeyLock(this.tmp, key, this.clock, options.signal, async () => {
        const dir = dirname(paths.data);
        // A concurrent delete may remove an emptied folder between mkdir and link: try again.
        for (let attempt = 1;; attempt++) {
          const created = await mkdirs(dir, key, op);
          if (await isDirectory(paths.data)) throw keyConflict(key, op);
          const current = await this.open(key, paths, { locked: true });
          await current?.fh.close();
          const existing = current !== undefined;
          if (existing && options.ifAbsent) return { status: "AlreadyExists" };
          if (ifMatch !== undefined && (!current || versionOf(current.meta) !== ifMatch)) {
            throw versionMismatch(key, {
              ifMatch,
              why: current ? "the object has another version" : "the key does not exist",
            });
          }
          if (!existing) await unlinkIfThere(paths.meta);
          try {
            if (options.ifAbsent) await link(committed, paths.meta);
            else await rename(committed, paths.meta);
          } catch (err) {
            if (errno(err) === "ENOENT" && attempt < 10) continue;
            if (options.ifAbsent && errno(err) === "EEXIST") return { status: "AlreadyExists" };
            if (isTaken(err)) throw keyConflict(key, op);
            throw err;
          }
          await this.hooks.step?.("meta-committed", key);
          try {
            await rename(temp, paths.data);
          } catch (err) {
            if (!isTaken(err)) throw err;
            // A folder appeared at the path (a deeper key was put meanwhile): withdraw.
            await unlinkIfThere(paths.meta);
            throw keyConflict(key, op);
          }
          await this.hooks.step?.("data-placed", key);
          for (const folder of created) await fsyncDir(folder);
          await fsyncDir(dir);
          return { status: "Created", etag: fields.etag, version };
        }
      });
    } catch (err) {
      throw toStoreError(err, op, key);
    } finally {
      // After a link the temp files are second names to drop; after a rename they are gone.
      if (metaTemp) await rm(metaTemp, { force: true });
      await rm(temp, { force: true });
    }
  }

  /**
   * Removes the object `key` at `paths`, holding its lock: the metadata first, so no reader
   * sees the object after, then the bytes.
   * @returns true when a file was removed
   */
  async remove(key: string, paths: ObjectPaths, signal?: AbortSignal): Promise<boolean> {
    return await withKeyLock(this.tmp, key, this.clock, signal, async () => {
      let removed = await unlinkIfThere(paths.meta);
      await this.hooks.step?.("meta-taken", key);
      // A folder at the path is no object; never unlink it (Deno's unlink removes empty ones).
      if (await isFile(paths.data)) removed = (await unlinkIfThere(paths.data)) || removed;
      return removed;
    });
  }

  /** Rewrites metadata to name the data file it was found to describe (a copied directory). */
  async #rebind(
    key: string,
    paths: ObjectPaths,
    found: MetaFile,
    meta: ObjectMeta,
    locked = false,
  ): Promise<void> {
    const temp = await writeTemp(this.tmp, [utf8(JSON.stringify(meta))], "rebind", key);
    const rewrite = async () => {
      if ((await readMeta(paths.meta))?.ino !== found.ino) return; // rewritten meanwhile
      await rename(temp, paths.meta);
      await fsyncDir(dirname(paths.meta));
    };
    try {
      await (locked ? rewrite() : withKeyLock(this.tmp, key, this.clock, undefined, rewrite));
    } finally {
      await rm(temp, { force: true });
    }
  }
}

/** The metadata file at `path`, or undefined when there is none. */
export async function readMeta(path: string): Promise<MetaFile | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(path, "r");
  } catch (err) {
    if (isMissing(err) || errno(err) === "EISDIR") return undefined;
    throw err;
  }
  try {
    const st = await fh.stat({ bigint: true });
    if (!st.isFile()) return undefined;
    return {
      meta: parseMeta(await readFile(fh, "utf8")),
      ino: st.ino,
      mtimeMs: Number(st.mtimeMs),
    };
  } finally {
    await fh.close();
  }
}

function parseMeta(text: string): ObjectMeta | undefined {
  try {
    const m = JSON.parse(text) as Partial<ObjectMeta>;
    if (
      m?.kind !== "tierd-fs-object" || !Number.isSafeInteger(m.size) || typeof m.ino !== "string" ||
      typeof m.mtimeNs !== "string" || typeof m.etag !== "string" ||
      typeof m.metadata !== "object" || m.metadata === null
    ) return undefined;
    return m as ObjectMeta;
  } catch {
    return undefined;
  }
}

/**
 * True when the metadata names this very file: its inode, size and mtime to the millisecond.
 * The runtimes disagree below that (Deno's node:fs gives `mtimeNs` in whole milliseconds, Bun's
 * to the nanosecond), and an object written under one and read under the other — the binary
 * beside `deno task` — must not be re-hashed whole and its metadata rewritten on every open.
 */
function describes(meta: ObjectMeta, st: { ino: bigint; size: bigint; mtimeNs: bigint }): boolean {
  return meta.ino === String(st.ino) && BigInt(meta.size) === st.size &&
    /^\d+$/.test(meta.mtimeNs) && BigInt(meta.mtimeNs) / MS === st.mtimeNs / MS;
}

/** Nanoseconds in a millisecond. */
const MS = 1_000_000n;

/** True when the file's bytes are the ones the metadata's ETag (or MD5) was computed from. */
async function bytesMatch(fh: FileHandle, meta: ObjectMeta): Promise<boolean> {
  const sizes = meta.parts ?? [meta.size];
  if (sizes.reduce((a, b) => a + b, 0) !== meta.size) return false;
  const whole = meta.parts === undefined || meta.md5 !== undefined;
  const digests: string[] = [];
  const all = createHash("md5");
  const buf = new Uint8Array(1 << 20);
  let position = 0;
  for (const size of sizes) {
    const part = createHash("md5");
    for (let done = 0; done < size;) {
      const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, size - done), position);
      if (bytesRead === 0) return false;
      const chunk = buf.subarray(0, bytesRead);
      part.update(chunk);
      if (whole) all.update(chunk);
      done += bytesRead;
      position += bytesRead;
    }
    digests.push(part.digest("hex"));
  }
  if (meta.md5 !== undefined) return all.digest("hex") === meta.md5;
  if (meta.parts !== undefined) return multipartEtag(digests) === meta.etag;
  return digests[0] === meta.etag;
}

/** Unlinks the file at `path`; false when there was none. */
async function unlinkIfThere(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if (isMissing(err)) return false;
    throw err;
  }
}

/** Creates `dir` and its parents; returns the folders whose entries changed, to fsync. */
async function mkdirs(dir: string, key: string, op: string): Promise<string[]> {
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
