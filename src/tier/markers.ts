// tierd's own per-partition files beside the journal (DESIGN §4): `.remote` markers and the
// kept copies of evicted segments' indexes, plus quarantine of markers that cannot be trusted.
import { copyFile, mkdir, open, readdir, rename } from "node:fs/promises";
import { join } from "node:path";
import { type PartitionId, partitionRelPath, segmentStem } from "../partition/layout.ts";
import { fsyncDir } from "../state/durable.ts";
import { type Marker, MarkerError, readMarker } from "../state/marker.ts";

/** The state directory of one partition (journal, markers, index copies). */
export function partitionStateDir(stateDir: string, id: PartitionId): string {
  return join(stateDir, partitionRelPath(id));
}

/** Paths of a segment's marker and kept index copy. */
export function markerPaths(dir: string, start: bigint): { marker: string; index: string } {
  const stem = segmentStem(start);
  return { marker: join(dir, `${stem}.remote`), index: join(dir, `${stem}.index`) };
}

/** Copies the broker's `.index` into the state dir durably (temp, fsync, rename, dir fsync). */
export async function keepIndexCopy(brokerIndex: string, dest: string): Promise<void> {
  const tmp = `${dest}.tmp`;
  await copyFile(brokerIndex, tmp);
  const fh = await open(tmp, "r+");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, dest);
  await fsyncDir(join(dest, ".."));
}

/** A marker found at boot, trusted (decoded and of this incarnation). */
export interface FoundMarker {
  start: bigint;
  path: string;
  marker: Marker;
}

/** A marker moved aside because it could not be trusted. */
export interface QuarantinedMarker {
  path: string;
  movedTo: string;
  reason: string;
}

/**
 * Reads every `.remote` marker in `dir`. Markers that fail their checks, or belong to another
 * incarnation, are moved to `dir/quarantine/` (never trusted, never deleted).
 */
export async function scanMarkers(
  dir: string,
  incarnation: bigint,
): Promise<{ markers: FoundMarker[]; quarantined: QuarantinedMarker[] }> {
  const markers: FoundMarker[] = [];
  const quarantined: QuarantinedMarker[] = [];
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { markers, quarantined };
    throw err;
  }
  for (const name of names.sort()) {
    const m = /^(\d{20})\.remote$/.exec(name);
    if (!m) continue;
    const path = join(dir, name);
    let reason: string | undefined;
    let marker: Marker | undefined;
    try {
      marker = await readMarker(path);
      if (marker.incarnation !== incarnation) {
        reason = `marker of incarnation ${marker.incarnation.toString(16)}, ` +
          `partition is ${incarnation.toString(16)}`;
      } else if (marker.startOffset !== BigInt(m[1])) {
        reason = `marker names start offset ${marker.startOffset}, file name says ${BigInt(m[1])}`;
      }
    } catch (err) {
      if (!(err instanceof MarkerError)) throw err;
      reason = err.message;
    }
    if (reason === undefined && marker) {
      markers.push({ start: BigInt(m[1]), path, marker });
      continue;
    }
    const qdir = join(dir, "quarantine");
    await mkdir(qdir, { recursive: true });
    const movedTo = join(qdir, `${name}.${Date.now()}`);
    await rename(path, movedTo);
    await fsyncDir(dir);
    quarantined.push({ path, movedTo, reason: reason! });
  }
  return { markers, quarantined };
}
