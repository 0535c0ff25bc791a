// The fs store's first layout, kept only to migrate out of it: an object file was a 4 KiB
// header (magic `tierdob1`, a u32 LE length, JSON with the ETag, content type and user metadata)
// followed by the bytes. When a store opens a root without `layout.json`, every such file is
// rewritten as a plain data file with its metadata beside it (./object_files.ts), then
// `layout.json` is written; a crash or a second process midway only means the walk runs again.
import { fsyncDir } from "../../src/base/durable.ts";
import { createHash } from "node:crypto";
import { type FileHandle, open, readdir, rename, rm, stat, utimes } from "node:fs/promises";
import { join } from "node:path";
import type { UserMetadata } from "../types.ts";
import { copyInto, isMissing, readFully, toStoreError, utf8, writeTemp } from "./_files.ts";
import { META_SUFFIX, type ObjectFiles, objectPaths } from "./object_files.ts";

/** Bytes before an object's content in an old-layout file. */
export const LEGACY_HEADER_SIZE = 4096;
const MAGIC = "tierdob1";

/** The file in the root that says the layout is the current one (and nothing is left to migrate). */
export const LAYOUT_FILE = "layout.json";

/** What `layout.json` holds. */
export const LAYOUT = { layout: "tierd-fs", version: 2, data: "plain", metadata: META_SUFFIX };

/** The header of an old-layout object file. */
export interface LegacyHeader {
  etag: string;
  contentType?: string;
  metadata: UserMetadata;
}

/** The header of the old-layout object file at `path`, or undefined when it is not one. */
export async function readLegacyHeader(path: string): Promise<LegacyHeader | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(path, "r");
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.size < LEGACY_HEADER_SIZE) return undefined;
    const raw = await readFully(fh, LEGACY_HEADER_SIZE, 0, path, "migrate");
    if (new TextDecoder().decode(raw.subarray(0, MAGIC.length)) !== MAGIC) return undefined;
    const length = new DataView(raw.buffer).getUint32(MAGIC.length, true);
    if (length > LEGACY_HEADER_SIZE - 12) return undefined;
    const header = JSON.parse(new TextDecoder().decode(raw.subarray(12, 12 + length)));
    if (typeof header?.etag !== "string" || typeof header.metadata !== "object") return undefined;
    return header as LegacyHeader;
  } catch {
    return undefined;
  } finally {
    await fh.close();
  }
}

/**
 * Migrates the old-layout objects below `objects` (once per root: `layout.json` records that it
 * is done). Each keeps its key, bytes, ETag, content type, metadata and mtime.
 * @returns how many objects this call migrated
 * @throws {StoreError} when a file cannot be read or written; the next open tries again
 */
export async function migrateLegacyLayout(
  root: string,
  objects: string,
  files: ObjectFiles,
): Promise<number> {
  const marker = join(root, LAYOUT_FILE);
  if (await stat(marker).then(() => true, () => false)) return 0;
  let migrated = 0;
  for await (const path of dataFiles(objects)) {
    if (await migrateOne(path, objects, files)) migrated++;
  }
  const temp = await writeTemp(files.tmp, [utf8(JSON.stringify(LAYOUT) + "\n")], "open", "");
  try {
    await rename(temp, marker);
    await fsyncDir(root);
  } catch (err) {
    await rm(temp, { force: true });
    throw toStoreError(err, "open");
  }
  return migrated;
}

/** Every regular file below `dir` that is not a metadata file. */
async function* dataFiles(dir: string): AsyncGenerator<string> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if (isMissing(err)) return;
    throw err;
  }
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* dataFiles(path);
    else if (entry.isFile() && !entry.name.endsWith(META_SUFFIX)) yield path;
  }
}

/** Rewrites one old-layout file in the current layout; false when it was not one. */
async function migrateOne(path: string, objects: string, files: ObjectFiles): Promise<boolean> {
  const key = path.slice(objects.length + 1).split(/[\\/]/).join("/");
  const paths = objectPaths(objects, key.split("/"));
  if (await files.exists(key, paths)) return false;
  const header = await readLegacyHeader(path);
  if (!header) return false;
  const info = await stat(path);
  // A multipart ETag is no digest of the bytes: keep one that is, to recognise them later.
  const md5 = /^[0-9a-f]{32}$/.test(header.etag) ? undefined : createHash("md5");
  const temp = await writeTemp(files.tmp, [], "migrate", key, async (fh) => {
    await copyInto(
      fh,
      0,
      path,
      LEGACY_HEADER_SIZE,
      info.size - LEGACY_HEADER_SIZE,
      (chunk) => md5?.update(chunk),
    );
  });
  try {
    await utimes(temp, info.atime, info.mtime);
    await files.hooks.step?.("legacy-copied", key);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  // Metadata there that describes nothing (a migration cut short) is cleared by the publish.
  const result = await files.publish(key, paths, temp, {
    etag: header.etag,
    contentType: header.contentType,
    metadata: header.metadata ?? {},
    md5: md5?.digest("hex"),
  }, { ifAbsent: true, op: "migrate" });
  return result.status === "Created";
}

/** For tests: the old-layout file of an object, as the first fs store wrote it. */
export function encodeLegacyObject(header: LegacyHeader, body: Uint8Array): Uint8Array {
  const json = utf8(JSON.stringify(header));
  const out = new Uint8Array(LEGACY_HEADER_SIZE + body.length);
  out.set(utf8(MAGIC));
  new DataView(out.buffer).setUint32(MAGIC.length, json.length, true);
  out.set(json, MAGIC.length + 4);
  out.set(body, LEGACY_HEADER_SIZE);
  return out;
}
