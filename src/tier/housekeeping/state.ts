// What housekeeping remembers between runs and restarts, in `{state_dir}/housekeeping.json`
// (written durably): when each job last finished, where an unfinished verify pass stands,
// which retired generations have their tombstone written, what each manifest last said, and which
// missing objects were already reported (so a verify pass does not count them twice).
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { writeFileDurable } from "../../base/durable.ts";

/** The persisted housekeeping state. */
export interface HousekeepingState {
  version: 1;
  /** ms since the epoch of the last run's end. */
  lastRun?: number;
  verify: {
    /** When the last complete verify pass ended. */
    lastCompleted?: number;
    /** `"{s}/{t}/{p}"` → the first segment start not yet verified in this pass. */
    cursor: Record<string, string>;
    /** Keys already reported missing or mismatched. */
    reported: string[];
  };
  orphans: {
    lastSweep?: number;
    /**
     * Retired generations whose tombstone is written, `"{s}/{t}/{p}@{incarnation}-{generation}"`
     * (only bookkeeping: a lost file means the tombstones are written again).
     */
    tombstoned?: string[];
  };
  manifests: {
    /** `"{s}/{t}/{p}"` → the last manifest uploaded: when, and a digest of what it listed. */
    uploaded: Record<string, { at: number; digest: string }>;
  };
  multipart: { lastSweep?: number };
}

/** The state file inside `state_dir`. */
export const HOUSEKEEPING_FILE = "housekeeping.json";

/** A state with nothing done yet. */
export function emptyHousekeepingState(): HousekeepingState {
  return {
    version: 1,
    verify: { cursor: {}, reported: [] },
    orphans: {},
    manifests: { uploaded: {} },
    multipart: {},
  };
}

/** Reads the state, or an empty one when there is none (a file that does not parse is redone). */
export async function loadHousekeepingState(stateDir: string): Promise<HousekeepingState> {
  let text: string;
  try {
    text = await readFile(join(stateDir, HOUSEKEEPING_FILE), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return emptyHousekeepingState();
    throw err;
  }
  try {
    const parsed = JSON.parse(text) as Partial<HousekeepingState>;
    if (parsed.version !== 1) return emptyHousekeepingState();
    const empty = emptyHousekeepingState();
    return {
      version: 1,
      lastRun: parsed.lastRun,
      verify: { ...empty.verify, ...parsed.verify },
      orphans: {
        lastSweep: parsed.orphans?.lastSweep,
        tombstoned: parsed.orphans?.tombstoned,
      },
      manifests: { ...empty.manifests, ...parsed.manifests },
      multipart: { ...empty.multipart, ...parsed.multipart },
    };
  } catch {
    // Only bookkeeping lives here: starting over re-verifies and re-waits the orphan grace.
    return emptyHousekeepingState();
  }
}

/** Writes the state durably. */
export async function saveHousekeepingState(
  stateDir: string,
  state: HousekeepingState,
): Promise<void> {
  await writeFileDurable(
    join(stateDir, HOUSEKEEPING_FILE),
    new TextEncoder().encode(JSON.stringify(state, null, 1) + "\n"),
  );
}
