// The broker partition directory `tierd restore --with-data` fills: what it may hold before (only
// what a broker makes for a new partition, or what an interrupted restore wrote), and the empty
// segment written after the restored ones, so the broker appends there — as after its own
// rotation — and every restored segment stays sealed, byte for byte the bucket's copy.
//
// Both Iggy 0.8 and 0.9 append to the segment with the highest start they find at boot. Without
// the empty one, that is the last restored segment: 0.8 writes into it (checked against the real
// 0.8.0 server), so it no longer matches its copy, and tiered_up_to_offset stayed one segment
// short of the bucket. The empty pair is what the brokers write themselves when a segment rolls:
// a `.log` and an `.index` of 0 bytes, named after the next offset (0.8 at the append that finds
// the segment full, 0.9 at the flush that fills it).
import { mkdir, open, readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { parseSegmentFileName, segmentStem } from "../layout/partition.ts";

/** A broker partition directory holds something restore must not write beside or over. */
export class BrokerDirNotEmpty extends Error {
  override readonly name = "BrokerDirNotEmpty";
  constructor(readonly dir: string, readonly strangers: readonly string[]) {
    super(
      `${dir} is not empty (${strangers.slice(0, 3).join(", ")}${
        strangers.length > 3 ? ", …" : ""
      }): restore --with-data writes only into an empty partition directory, or one a broker ` +
        "made for a new partition (empty segment files and an offsets directory without offsets)",
    );
  }
}

/**
 * Makes `dir` ready for the segments starting at `starts`: creates it, and removes the empty
 * segment files a broker made for a new partition that are not among them (an empty segment
 * before the restored ones would be read as a gap: 0.9 refuses such a partition).
 *
 * @param dir the broker's partition directory
 * @param starts the segments restore writes there, the empty active one included
 * @returns the names of the empty files removed
 * @throws {BrokerDirNotEmpty} when it holds anything else: a segment file with bytes that is
 *   not one of `starts`, a consumer offset, a file of the broker's own (0.9's superblocks)
 */
export async function prepareBrokerDir(
  dir: string,
  starts: readonly bigint[],
): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const ours = new Set(starts.map(segmentStem));
  const strangers: string[] = [];
  const empty: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const name = entry.name;
    if (name.endsWith(".restore")) continue; // an interrupted download's temp file
    if (entry.isDirectory()) {
      if (name === "offsets" && !(await holdsFiles(join(dir, name)))) continue;
      strangers.push(`${name}/`);
      continue;
    }
    const segment = entry.isFile() ? parseSegmentFileName(name) : undefined;
    if (segment && ours.has(segmentStem(segment.start))) continue;
    if (segment && (await stat(join(dir, name))).size === 0) empty.push(name);
    else strangers.push(name);
  }
  if (strangers.length > 0) throw new BrokerDirNotEmpty(dir, strangers.sort());
  for (const name of empty) await rm(join(dir, name));
  return empty.sort();
}

/** True when `dir`'s tree holds anything but directories. */
async function holdsFiles(dir: string): Promise<boolean> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (!entry.isDirectory() || await holdsFiles(join(dir, entry.name))) return true;
  }
  return false;
}

/**
 * Where the empty active segment goes: right after the last restored segment — unless the
 * bucket lacks offsets past it (a hole or a recorded loss there), where no start is right: the
 * broker counts on from the files it finds, over offsets tierd knows were written.
 *
 * @param restored the segments restored, each with its inclusive end offset
 * @param missing the starts of the holes and lost ranges
 * @returns the start, or undefined when nothing was restored or something is missing past it
 */
export function activeSegmentStart(
  restored: readonly { start: bigint; end: bigint }[],
  missing: readonly bigint[],
): bigint | undefined {
  if (restored.length === 0) return undefined;
  const last = restored.reduce((a, b) => (b.start > a.start ? b : a));
  return missing.some((from) => from > last.start) ? undefined : last.end + 1n;
}

/**
 * Writes the empty active segment at `start` — a `.log` and an `.index` of 0 bytes — unless a
 * file of that name is there already (a restore run before, after which a broker may have
 * appended: never truncated).
 *
 * @returns true when it wrote either file
 */
export async function writeActiveSegment(dir: string, start: bigint): Promise<boolean> {
  let wrote = false;
  for (const ext of [".log", ".index"]) {
    try {
      const fh = await open(join(dir, `${segmentStem(start)}${ext}`), "wx");
      await fh.sync();
      await fh.close();
      wrote = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
  return wrote;
}
