// The read path's view of a broker partition directory. Listing one (a readdir and a stat of
// every `.log` and `.index`) on every read made a sequential reader pay a dozen file-system
// round trips per request before its first byte; a listing is reused instead while the
// directory is unchanged (no file created, deleted or renamed: its mtime and inode are the
// same) and younger than a second, and only the active segment — the one file the broker
// writes to — is looked at again, by stats on the calling thread. A listing taken while the
// directory's mtime was recent is not reused: the kernel stamps a change from a clock that
// advances once per tick, so a second change within the same tick (a file removed, then another
// made) leaves the mtime as it was.
import type { Clock } from "../base/clock.ts";
import {
  isSealed,
  listSegments,
  type SegmentFiles,
  statNowOrUndefined,
} from "../partition/segments.ts";

/** How long a listing is reused while its directory looks unchanged. */
export const LISTING_REUSE_MS = 1000;

/**
 * How long after a directory's last change a listing must be taken to be reused: more than the
 * kernel's timestamp tick (1-10 ms), so any later change shows as another mtime.
 */
export const LISTING_SETTLED_MS = 50;

/** What identifies a directory's contents: its inode and modification time. */
export interface DirectoryStamp {
  ino: number;
  mtimeMs: number;
}

interface Listing {
  stamp: DirectoryStamp;
  listedAt: number;
  segments: SegmentFiles[];
}

/** Listings of partition directories, reused while each directory is unchanged. */
export class LocalListings {
  readonly #byDir = new Map<string, Listing>();
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /**
   * The segments in `dir`, oldest first, as {@link listSegments} gives them: each call gets
   * its own copies, the active segment's sizes fresh from disk.
   *
   * @param stamp the directory's stat, just taken
   * @param quiescenceMs `agent.seal_quiescence`
   */
  async list(dir: string, stamp: DirectoryStamp, quiescenceMs: number): Promise<SegmentFiles[]> {
    const now = this.#clock.now();
    const kept = this.#byDir.get(dir);
    if (
      kept && kept.stamp.ino === stamp.ino && kept.stamp.mtimeMs === stamp.mtimeMs &&
      now - kept.listedAt < LISTING_REUSE_MS && refreshActive(kept.segments)
    ) {
      return kept.segments.map((s, i) => ({
        ...s,
        sealed: isSealed(i < kept.segments.length - 1, s.mtimeMs, { now, quiescenceMs }),
      }));
    }
    const segments = await listSegments(dir, { now, quiescenceMs });
    if (now - stamp.mtimeMs > LISTING_SETTLED_MS) {
      this.#byDir.set(dir, {
        stamp: { ino: stamp.ino, mtimeMs: stamp.mtimeMs },
        listedAt: now,
        segments,
      });
    } else this.#byDir.delete(dir);
    return segments.map((s) => ({ ...s }));
  }

  /** Forgets `dir` (it no longer exists). */
  forget(dir: string): void {
    this.#byDir.delete(dir);
  }
}

/** Takes the active segment's sizes again. @returns false when its `.log` is gone */
function refreshActive(segments: SegmentFiles[]): boolean {
  const active = segments.at(-1);
  if (!active) return true;
  const log = statNowOrUndefined(active.logPath);
  const index = statNowOrUndefined(active.indexPath);
  if (!log) return false;
  active.logSize = log.size;
  active.indexSize = index ? index.size : -1;
  active.mtimeMs = Math.max(log.mtimeMs, index?.mtimeMs ?? 0);
  return true;
}
