// Which byte ranges of which sealed local `.log` files have had their record checksums verified,
// so a second read of the same bytes of the same file does not hash them again (issue 26,
// principle 1: verify once). Hashing was a quarter of a local scan's CPU.
//
// A range is remembered against the file's identity — device, inode, size, mtime and ctime —
// not its path: any write through the file system gives the file a new mtime and ctime, and a
// program can set mtime back but never ctime, so bytes changed after they were verified are
// read under a new identity and verified again before they are served. Timestamps are coarse
// (a kernel tick; whole seconds or milliseconds through some runtimes' `stat`), so a file is only
// trusted when its last change was `SETTLE_MS` before it was opened: any change after the open,
// even one while it is being read, then carries a later timestamp and so a new identity.
import type { BigIntStats } from "node:fs";
import { LRUCache } from "lru-cache";

/** The identity of one version of a file, as `stat` gives it. */
export type FileIdentity = Pick<BigIntStats, "dev" | "ino" | "size" | "mtimeNs" | "ctimeNs">;

/** How old a file's last change must be before its verification is remembered. */
export const SETTLE_MS = 2_000;

/** Files remembered at most; the least recently used is forgotten first. */
const MAX_FILES = 4_096;
/** Disjoint verified ranges kept per file at most (a sequential reader leaves one). */
const MAX_RANGES = 64;

/**
 * The key of `id` for {@link VerifiedLogs}, or undefined when the file changed less than
 * {@link SETTLE_MS} before `nowMs` (its verification is then not remembered).
 *
 * @param id the file's identity, from the open handle's `stat({ bigint: true })`
 * @param nowMs the wall-clock time in ms taken before the file was opened
 */
export function identityKey(id: FileIdentity, nowMs: number): string | undefined {
  const settled = BigInt(Math.floor(nowMs - SETTLE_MS)) * 1_000_000n;
  if (id.mtimeNs > settled || id.ctimeNs > settled) return undefined;
  return `${id.dev}:${id.ino}:${id.size}:${id.mtimeNs}:${id.ctimeNs}`;
}

/** Verified byte ranges of local files, by {@link identityKey}; bounded in files and ranges. */
export class VerifiedLogs {
  /** Sorted, disjoint, non-adjacent `[start, end)` pairs per file, least recently used first out. */
  readonly #files: LRUCache<string, number[]>;
  readonly #maxRanges: number;
  #trusted = 0;

  /**
   * @param maxFiles files remembered at most
   * @param maxRanges disjoint ranges kept per file at most
   */
  constructor(maxFiles = MAX_FILES, maxRanges = MAX_RANGES) {
    this.#files = new LRUCache({ max: Math.max(1, maxFiles) });
    this.#maxRanges = Math.max(1, maxRanges);
  }

  /** Files remembered now. */
  get files(): number {
    return this.#files.size;
  }

  /** Bytes {@link covers} vouched for so far: bytes served without hashing them again. */
  get trustedBytes(): number {
    return this.#trusted;
  }

  /** Whether every byte of `[from, to)` of file `key` was verified. */
  covers(key: string, from: number, to: number): boolean {
    if (!(to > from)) return true;
    const ranges = this.#files.get(key);
    if (ranges === undefined) return false;
    for (let i = 0; i < ranges.length; i += 2) {
      if (ranges[i] > from) return false;
      if (to <= ranges[i + 1]) {
        this.#trusted += to - from;
        return true;
      }
    }
    return false;
  }

  /** Remembers that bytes `[from, to)` of file `key` were verified. */
  mark(key: string, from: number, to: number): void {
    if (!(to > from)) return;
    const old = this.#files.get(key) ?? [];
    const ranges: number[] = [];
    let start = from;
    let end = to;
    for (let i = 0; i < old.length; i += 2) {
      if (old[i + 1] < start || old[i] > end) {
        ranges.push(old[i], old[i + 1]);
      } else {
        start = Math.min(start, old[i]);
        end = Math.max(end, old[i + 1]);
      }
    }
    let at = 0;
    while (at < ranges.length && ranges[at] < start) at += 2;
    ranges.splice(at, 0, start, end);
    // Past the cap the file keeps only the range just verified: a reader jumping about costs
    // hashing again, never memory.
    this.#files.set(key, ranges.length / 2 > this.#maxRanges ? [start, end] : ranges);
  }
}
