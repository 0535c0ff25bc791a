// Crash-safe file replacement for tierd's own state (markers, journal snapshots): a file is
// either absent, the old version or the whole new version, and durable once the call resolves.
import { type FileHandle, open, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { writeAll } from "./bytes.ts";

/** What opening or syncing a folder fails with where folders cannot be synced that way. */
const UNSYNCABLE_FOLDER = new Set(["EISDIR", "EPERM", "EINVAL", "EBADF"]);

/**
 * Flushes a directory's entries (creations, renames, unlinks) to stable storage; a no-op on a
 * platform where a folder cannot be opened and synced (the errors in `UNSYNCABLE_FOLDER`).
 *
 * @param path The directory to sync.
 * @returns Resolves once the directory has been fsynced.
 * @throws The underlying `node:fs` error if the directory is missing or the sync fails.
 */
export async function fsyncDir(path: string): Promise<void> {
  let fh: FileHandle | undefined;
  try {
    fh = await open(path, "r");
    await fh.sync();
  } catch (err) {
    if (!UNSYNCABLE_FOLDER.has((err as { code?: string }).code ?? "")) throw err;
  } finally {
    await fh?.close();
  }
}

/**
 * Replaces `path` with `bytes` atomically and durably: writes `path + ".tmp"`, fsyncs it, renames
 * it over `path` and fsyncs the parent directory. On failure the temp file is removed and the old
 * content of `path` (if any) is untouched. Two concurrent calls for the same path must not race
 * (they share the temp name); tierd writes each state file from one place.
 *
 * @param path The file to create or replace.
 * @param bytes The complete new content.
 * @returns Resolves once the new content and its directory entry are on stable storage.
 * @throws The underlying `node:fs` error (e.g. `ENOENT` when the directory is missing).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mkdtemp, readFile, rm } from "node:fs/promises";
 * import { tmpdir } from "node:os";
 * import { join } from "node:path";
 *
 * const dir = await mkdtemp(join(tmpdir(), "tierd-"));
 * const path = join(dir, "00000000000000000000.remote");
 * await writeFileDurable(path, new Uint8Array([1, 2, 3])); // all or nothing, even across a crash
 * assert.deepEqual(await readFile(path), Buffer.from([1, 2, 3]));
 * await rm(dir, { recursive: true });
 * ```
 */
export async function writeFileDurable(path: string, bytes: Uint8Array): Promise<void> {
  const tmp = path + ".tmp";
  try {
    const fh = await open(tmp, "w");
    try {
      await writeAll(fh, bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => {});
    throw err;
  }
  await fsyncDir(dirname(path));
}
