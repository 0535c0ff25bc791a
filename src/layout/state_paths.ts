// Where tierd keeps its own files for a partition under `agent.state_dir`: the same relative
// path as the broker's partition directory, holding the journal, `.remote` markers, kept index
// copies, and a quarantine folder for files that could not be trusted.
import { join } from "node:path";
import { type PartitionId, partitionRelPath, segmentStem } from "./partition.ts";

/** The state directory of one partition (journal, markers, index copies). */
export function partitionStateDir(stateDir: string, id: PartitionId): string {
  return join(stateDir, partitionRelPath(id));
}

/** The journal file inside a partition's state directory. */
export function journalPath(partitionStateDir: string): string {
  return join(partitionStateDir, "journal");
}

/** Where untrusted files of a partition's state directory are moved (never deleted). */
export function quarantineDir(partitionStateDir: string): string {
  return join(partitionStateDir, "quarantine");
}

/** Paths of a segment's marker and kept index copy. */
export function markerPaths(dir: string, start: bigint): { marker: string; index: string } {
  const stem = segmentStem(start);
  return { marker: join(dir, `${stem}.remote`), index: join(dir, `${stem}.index`) };
}
