// One writer at a time per key of the fs store, across processes: a lock file
// `tmp/lock-{sha256(key)}` created with an exclusive `link()`, naming its holder (host and pid).
// A holder that died is noticed at once on the same host (its pid is gone) and after
// {@link LOCK_STALE_MS} elsewhere, so a crash never leaves a key locked for good. Readers take no
// lock: the object protocol (./object_files.ts) keeps every state they can see consistent.
import { createHash } from "node:crypto";
import { lstat, readFile, rename, rm, unlink } from "node:fs/promises";
import { link } from "node:fs/promises";
import { hostname } from "node:os";
import process from "node:process";
import { join } from "node:path";
import { type Clock, sleep } from "../../src/base/clock.ts";
import { errno, isMissing, tempName, utf8, writeTemp } from "./_files.ts";

/** A lock whose holder is on another host (or unreadable) is taken over after this long. */
export const LOCK_STALE_MS = 60 * 60 * 1000;

/** What a lock file says about its holder. */
interface Holder {
  host: string;
  pid: number;
}

const ME: Holder = { host: hostname(), pid: process.pid };

/**
 * Runs `work` holding the lock of `key`: waits (polling, 1 to 5 ms apart) while another live
 * writer holds it.
 * @throws the signal's reason when it aborts while waiting; what `work` throws
 */
export async function withKeyLock<T>(
  tmp: string,
  key: string,
  clock: Clock,
  signal: AbortSignal | undefined,
  work: () => Promise<T>,
): Promise<T> {
  const path = join(tmp, `lock-${createHash("sha256").update(key).digest("hex")}`);
  const mine = await writeTemp(tmp, [utf8(JSON.stringify(ME))], "lock", key);
  let ino: bigint | undefined;
  try {
    for (let wait = 1;; wait = Math.min(5, wait * 2)) {
      signal?.throwIfAborted();
      try {
        await link(mine, path);
        ino = (await lstat(mine, { bigint: true })).ino;
        break;
      } catch (err) {
        if (errno(err) !== "EEXIST") throw err;
      }
      if (await takeOverIfDead(path, clock, tmp)) continue;
      await sleep(wait, signal, clock);
    }
  } finally {
    await rm(mine, { force: true });
  }
  try {
    return await work();
  } finally {
    // Ours unless it was taken over as stale meanwhile (then it is someone else's now).
    const now = await lstat(path, { bigint: true }).catch(() => undefined);
    if (now?.ino === ino) await unlink(path).catch(() => {});
  }
}

/** Removes the lock at `path` if its holder is dead; true when the lock is gone. */
async function takeOverIfDead(path: string, clock: Clock, tmp: string): Promise<boolean> {
  let st;
  let holder: Partial<Holder> | undefined;
  try {
    st = await lstat(path, { bigint: true });
    holder = JSON.parse(await readFile(path, "utf8"));
  } catch (err) {
    if (isMissing(err)) return true;
    holder = undefined; // unreadable: only its age can tell
  }
  const dead = holder?.host === ME.host && typeof holder.pid === "number" &&
    holder.pid !== ME.pid && !alive(holder.pid);
  const stale = st !== undefined && clock.now() - Number(st.mtimeMs) > LOCK_STALE_MS;
  if (!dead && !stale) return false;
  // Take it away, unless it was replaced meanwhile by a live holder's (then put that back).
  const aside = join(tmp, tempName("dead-lock-"));
  try {
    await rename(path, aside);
  } catch (err) {
    if (isMissing(err)) return true;
    throw err;
  }
  try {
    if ((await lstat(aside, { bigint: true })).ino === st?.ino) return true;
    await link(aside, path).catch(() => {});
    return false;
  } finally {
    await rm(aside, { force: true });
  }
}

/** True while a process with this pid exists (on this host). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errno(err) === "EPERM";
  }
}
