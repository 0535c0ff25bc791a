// The markers and kept index copies in a partition's state directory: reading and checking
// every `.remote` marker at boot (untrusted ones are quarantined, never deleted), and keeping
// a durable copy of a segment's `.index` before its broker files go.
import { mkdir, readFile, rename } from "node:fs/promises";
import { namesIn } from "../base/dir.ts";
import { join } from "node:path";
import { type Clock, systemClock, yieldToEventLoop } from "../base/clock.ts";
import { initHashes } from "../hash.ts";
import { quarantineDir } from "../layout/state_paths.ts";
import { fsyncDir, writeFileDurable } from "../base/durable.ts";
import { type Marker, MarkerError, readMarkerSync } from "./marker.ts";

/** Copies the broker's `.index` into the state dir durably (temp, fsync, rename, dir fsync). */
export async function keepIndexCopy(brokerIndex: string, dest: string): Promise<void> {
  await writeFileDurable(dest, await readFile(brokerIndex));
}

/** Marker files read one after another between two turns of the event loop. */
const MARKER_READ_BATCH = 256;

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

/** One marker file, read and checked: trusted (`found`) or with the reason it is not. */
interface Checked {
  name: string;
  path: string;
  found?: FoundMarker;
  reason?: string;
}

/** A marker's file name: the segment's start offset, 20 digits, then `.remote`. */
const MARKER_NAME = /^(\d{20})\.remote$/;

/** The `.remote` marker file names in `dir`, sorted (none when `dir` does not exist). */
export async function listMarkerNames(dir: string): Promise<string[]> {
  return (await namesIn(dir)).filter((n) => MARKER_NAME.test(n)).sort();
}

function checkMarker(dir: string, name: string, incarnation: bigint): Checked {
  const path = join(dir, name);
  const start = BigInt(MARKER_NAME.exec(name)![1]);
  try {
    const marker = readMarkerSync(path);
    if (marker.incarnation !== incarnation) {
      return {
        name,
        path,
        reason: `marker of incarnation ${marker.incarnation.toString(16)}, ` +
          `partition is ${incarnation.toString(16)}`,
      };
    }
    if (marker.startOffset !== start) {
      return {
        name,
        path,
        reason: `marker names start offset ${marker.startOffset}, file name says ${start}`,
      };
    }
    return { name, path, found: { start, path, marker } };
  } catch (err) {
    if (err instanceof MarkerError) return { name, path, reason: err.message };
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EISDIR") return { name, path, reason: `${path} is a directory, not a marker` };
    throw err;
  }
}

/**
 * Reads every `.remote` marker in `dir`. Markers that fail their checks, or belong to another
 * incarnation, are moved to `dir/quarantine/` (never trusted, never deleted).
 */
export async function scanMarkers(
  dir: string,
  incarnation: bigint,
  clock: Clock = systemClock,
): Promise<{ markers: FoundMarker[]; quarantined: QuarantinedMarker[] }> {
  const markers: FoundMarker[] = [];
  const quarantined: QuarantinedMarker[] = [];
  const sorted = await listMarkerNames(dir);
  // A partition may hold thousands of markers and boot time is mostly their reads: they are
  // read synchronously (open, read, close: a third of an async read's cost), in batches with a
  // turn of the event loop between, so the agent stays responsive. Quarantining renames after.
  await initHashes();
  const checked = new Array<Checked>(sorted.length);
  for (let i = 0; i < sorted.length; i++) {
    if (i > 0 && i % MARKER_READ_BATCH === 0) await yieldToEventLoop();
    checked[i] = checkMarker(dir, sorted[i], incarnation);
  }
  for (const c of checked) {
    if (c.found) {
      markers.push(c.found);
      continue;
    }
    const qdir = quarantineDir(dir);
    await mkdir(qdir, { recursive: true });
    const movedTo = join(qdir, `${c.name}.${clock.now()}`);
    await rename(c.path, movedTo);
    await fsyncDir(dir);
    quarantined.push({ path: c.path, movedTo, reason: c.reason! });
  }
  return { markers, quarantined };
}
