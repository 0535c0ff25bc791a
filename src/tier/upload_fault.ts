// What keeps a partition's uploads stalled, across passes: the store faults met by the work that
// moves its copy chain — the copy of its oldest uncopied segment, and the cleanup of a failed
// copy that must come before the copy is tried again — since when that work has been failing,
// and its latest failure. Faults of other work (eviction, retention, housekeeping) do not keep
// uploads from flowing and do not count.
import type { Problem } from "./problem.ts";

/** A partition's copy chain failing on store faults. */
export interface UploadFault {
  /** ms since the epoch: when the first failure of this run was met. */
  since: number;
  /** Store faults met by the chain's work since then. */
  failures: number;
  /** The latest of them, as the pass noted it. */
  latest: Problem;
}

/** One store fault of the chain's work: when (ms since the epoch) and what the pass noted. */
export interface ChainFault {
  at: number;
  problem: Problem;
}

/** What one pass did to a partition's copy chain. */
export interface ChainPass {
  /** Store faults its copy and cleanup work met, in the order they happened. */
  faults: readonly ChainFault[];
  /** It copied (or adopted) at least one segment: the chain moved. */
  progressed: boolean;
}

/**
 * The partition's upload fault after `pass`: none when the pass met no store fault on its copy
 * chain; else the same run of failures going on, unless the chain moved (then the work failing
 * now is a newer segment's, failing since this pass).
 */
export function nextUploadFault(
  previous: UploadFault | undefined,
  pass: ChainPass,
): UploadFault | undefined {
  const first = pass.faults[0];
  if (first === undefined) return undefined;
  const carried = pass.progressed ? undefined : previous;
  return {
    since: carried?.since ?? first.at,
    failures: (carried?.failures ?? 0) + pass.faults.length,
    latest: pass.faults.at(-1)!.problem,
  };
}
