// One agent per state directory: an exclusive advisory lock (flock) on `{state_dir}/tierd.lock`,
// held for the life of the process. The kernel releases it when the process dies, so a SIGKILL
// never leaves it stuck. The lock file names its holder (pid, start time, command) so a second
// agent can say who is in the way. The one file that takes locks in a runtime-specific way:
// Deno's `FsFile.tryLock`, or `flock(2)` through Bun's FFI.
import { closeSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { type Clock, systemClock } from "../base/clock.ts";

/** The lock file inside `state_dir`. */
export const LOCK_FILE = "tierd.lock";

/** Another process holds the state directory. */
export class StateDirLocked extends Error {
  override readonly name = "StateDirLocked";
  constructor(
    readonly stateDir: string,
    /** The holder as its lock file describes it (`pid 123, tierd run, since …`), if readable. */
    readonly holder: string | undefined,
  ) {
    super(
      `state dir ${stateDir} is in use by another tierd` +
        (holder ? ` (${holder})` : "") +
        `; one agent per state dir — stop it first, or point this one at another state_dir`,
    );
  }
}

/** A held lock; `release()` (or process exit) frees it. */
export interface StateLock {
  readonly path: string;
  release(): void;
}

interface DenoFile {
  tryLockSync(exclusive?: boolean): boolean;
  writeSync(p: Uint8Array): number;
  truncateSync(len?: number): void;
  close(): void;
}

interface DenoLockApi {
  openSync(path: string, options: { read: boolean; write: boolean; create: boolean }): DenoFile;
}

type Flock = (fd: number, operation: number) => number;

const LOCK_EX = 2;
const LOCK_NB = 4;

/**
 * Takes the exclusive lock of `stateDir` (creating the directory), or throws.
 * @param what the holder's command, written into the lock file (`"tierd run"`)
 * @param clock the start time written beside it
 * @throws {StateDirLocked} when another process holds it
 */
export async function lockStateDir(
  stateDir: string,
  what: string,
  clock: Clock = systemClock,
): Promise<StateLock> {
  mkdirSync(stateDir, { recursive: true });
  const path = join(stateDir, LOCK_FILE);
  const description = `pid ${process.pid}, ${what}, since ${new Date(clock.now()).toISOString()}`;
  const bytes = new TextEncoder().encode(description + "\n");
  const deno = (globalThis as { Deno?: DenoLockApi }).Deno;
  if (deno?.openSync) {
    const file = deno.openSync(path, { read: true, write: true, create: true });
    if (!file.tryLockSync(true)) {
      file.close();
      throw new StateDirLocked(stateDir, holderOf(path));
    }
    file.truncateSync(0);
    file.writeSync(bytes);
    return { path, release: () => file.close() };
  }
  const flock = await bunFlock();
  const fd = openSync(path, "a+");
  if (flock(fd, LOCK_EX | LOCK_NB) !== 0) {
    closeSync(fd);
    throw new StateDirLocked(stateDir, holderOf(path));
  }
  ftruncateSync(fd, 0);
  writeSync(fd, bytes);
  return { path, release: () => closeSync(fd) };
}

function holderOf(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

/** `flock(2)` from libc through Bun's FFI. */
async function bunFlock(): Promise<Flock> {
  const specifier = "bun:ffi";
  const ffi = await import(specifier) as {
    dlopen(
      lib: string,
      symbols: Record<string, { args: string[]; returns: string }>,
    ): { symbols: { flock: Flock } };
  };
  for (const lib of ["libc.so.6", "libc.dylib", "libSystem.B.dylib"]) {
    try {
      return ffi.dlopen(lib, { flock: { args: ["i32", "i32"], returns: "i32" } }).symbols.flock;
    } catch {
      // try the next name
    }
  }
  throw new Error("cannot lock the state dir: flock(2) not found in the C library");
}
