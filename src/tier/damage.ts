// Which failures to open a partition's journal mean its local state is damaged (rebuild it
// from the bucket) rather than that the host is failing (retry later): a journal with damage
// in it or one that replays to an illegal transition (both `JournalDamaged`), or a journal
// path that is not a file.
import { JournalDamaged } from "../state/journal.ts";

/** Damage found in a partition's local state, with what names it for an operator. */
export interface LocalDamage {
  /** The damaged file. */
  path: string;
  /** Byte position of the first bad record, when known. */
  position?: number;
  reason: string;
  /** Where the damaged file was moved. */
  keptAt?: string;
}

/** The damage an error from opening a journal describes, or undefined when it is no damage. */
export function damageOf(err: unknown): LocalDamage | undefined {
  if (err instanceof JournalDamaged) {
    return { path: err.path, position: err.position, reason: err.message };
  }
  const code = (err as NodeJS.ErrnoException).code;
  const path = (err as NodeJS.ErrnoException).path;
  if (code === "EISDIR" || code === "ENOTDIR") {
    return { path: path ?? "journal", reason: `the journal is not a file (${code})` };
  }
  return undefined;
}
