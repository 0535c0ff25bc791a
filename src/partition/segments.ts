// Lists a partition's segments by file name and decides which are sealed (docs/architecture.md,
// "The broker contract"): a segment is sealed when it has a successor and its files have been
// quiet for `quiescenceMs`.
import { type Stats, statSync } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { parseSegmentFileName, segmentStem } from "../layout/partition.ts";

/** One segment's files as found on disk. */
export interface SegmentFiles {
  start: bigint;
  logPath: string;
  indexPath: string;
  logSize: number;
  /** Size of the broker's `.index`, or -1 when it is missing. */
  indexSize: number;
  /** Latest modification time of the `.log` and `.index`, ms since the epoch. */
  mtimeMs: number;
  sealed: boolean;
}

/**
 * Lists the segments of the partition in `dir`, oldest first. Only `.log` files define
 * segments (Iggy ignores orphan `.index` files). The last segment is always active.
 */
export async function listSegments(
  dir: string,
  options: { now: number; quiescenceMs: number },
): Promise<SegmentFiles[]> {
  const starts: bigint[] = [];
  for (const name of await readdir(dir)) {
    const parsed = parseSegmentFileName(name);
    if (parsed?.ext === "log") starts.push(parsed.start);
  }
  starts.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const out: SegmentFiles[] = [];
  // The stats go out a batch at a time, not one after another: a partition holds hundreds of
  // segments, and each stat is a round trip to the file system.
  for (let from = 0; from < starts.length; from += STAT_BATCH) {
    const batch = starts.slice(from, from + STAT_BATCH);
    const stats = await Promise.all(batch.map(async (start) => {
      const logPath = join(dir, `${segmentStem(start)}.log`);
      const indexPath = join(dir, `${segmentStem(start)}.index`);
      const [log, index] = await Promise.all([
        statOrUndefined(logPath),
        statOrUndefined(indexPath),
      ]);
      return { start, logPath, indexPath, log, index };
    }));
    for (const [j, { start, logPath, indexPath, log, index }] of stats.entries()) {
      if (!log) continue; // removed by the broker while we listed
      const mtimeMs = Math.max(log.mtimeMs, index?.mtimeMs ?? 0);
      out.push({
        start,
        logPath,
        indexPath,
        logSize: log.size,
        indexSize: index ? index.size : -1,
        mtimeMs,
        sealed: isSealed(from + j < starts.length - 1, mtimeMs, options),
      });
    }
  }
  return out;
}

/** Segments whose files are stat-ed at once. */
const STAT_BATCH = 32;

/**
 * The seal rule: a segment is sealed when it has a successor and its files (latest `mtimeMs`)
 * have been quiet for `quiescenceMs` at `now`.
 */
export function isSealed(
  hasSuccessor: boolean,
  mtimeMs: number,
  options: { now: number; quiescenceMs: number },
): boolean {
  return hasSuccessor && options.now - mtimeMs >= options.quiescenceMs;
}

/**
 * The file's stat, taken on the calling thread, or undefined when it does not exist. For the
 * read path's few stats of a local directory and its active segment: a stat is a system call of
 * a microsecond or two, and the asynchronous one's trip through the runtime's thread pool cost
 * about 0.1 ms per read here, more after the machine idled (a fifth of a 1 MiB read's time in
 * the agent).
 */
export function statNowOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined; // not there, nor its parent
    throw err;
  }
}

/** The file's stat, or undefined when it does not exist. */
export async function statOrUndefined(path: string) {
  try {
    return await stat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
