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
  for (const [i, start] of starts.entries()) {
    const logPath = join(dir, `${segmentStem(start)}.log`);
    const indexPath = join(dir, `${segmentStem(start)}.index`);
    const log = await statOrUndefined(logPath);
    if (!log) continue; // removed by the broker while we listed
    const index = await statOrUndefined(indexPath);
    const mtimeMs = Math.max(log.mtimeMs, index?.mtimeMs ?? 0);
    const hasSuccessor = i < starts.length - 1;
    out.push({
      start,
      logPath,
      indexPath,
      logSize: log.size,
      indexSize: index ? index.size : -1,
      mtimeMs,
      sealed: hasSuccessor && options.now - mtimeMs >= options.quiescenceMs,
    });
  }
  return out;
}

async function statOrUndefined(path: string) {
  try {
    return await stat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
