// Lists a partition's segments by file name and decides which are sealed (docs/architecture.md,
// "The broker contract"): a segment is sealed when it has a successor and its files have been
// quiet for `quiescenceMs`.
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
    const stats = await Promise.all(batch.map((start) => {
      const stem = segmentStem(start);
      return Promise.all([
        statOrUndefined(join(dir, `${stem}.log`)),
        statOrUndefined(join(dir, `${stem}.index`)),
      ]);
    }));
    for (const [j, [log, index]] of stats.entries()) {
      if (!log) continue; // removed by the broker while we listed
      const start = batch[j];
      const mtimeMs = Math.max(log.mtimeMs, index?.mtimeMs ?? 0);
      const hasSuccessor = from + j < starts.length - 1;
      out.push({
        start,
        logPath: join(dir, `${segmentStem(start)}.log`),
        indexPath: join(dir, `${segmentStem(start)}.index`),
        logSize: log.size,
        indexSize: index ? index.size : -1,
        mtimeMs,
        sealed: hasSuccessor && options.now - mtimeMs >= options.quiescenceMs,
      });
    }
  }
  return out;
}

/** Segments whose files are stat-ed at once. */
const STAT_BATCH = 32;

async function statOrUndefined(path: string) {
  try {
    return await stat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
