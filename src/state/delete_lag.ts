// A partition's remote-deletion lag (Kafka's KIP-958 `RemoteDeleteLagBytes` and
// `RemoteDeleteLagSegments`): the remote copies tierd has decided to delete whose objects are
// still in the store, and when the oldest of those deletions was due. Derived from the journal
// state, plus what total retention chose in its last pass but has not journaled yet (it waits
// for `delete_grace` or for the pass's delete budget).
import {
  type PartitionState,
  retiredKey,
  retiredOf,
  type SegmentRecord,
  segmentsOf,
} from "./segment_state.ts";

/**
 * A remote copy of the current generation that total retention chose to delete and has not
 * started deleting yet: it waits for `delete_grace`, or for the pass's delete budget.
 */
export interface ChosenDeletion {
  generation: bigint;
  start: bigint;
  /** Bytes of its `.log` copy. */
  size: number;
  /** ms since the epoch from when it may go: first found deletable, plus `delete_grace`. */
  dueAt: number;
}

/** The deletions a partition owes the store. */
export interface DeleteLag {
  /** Segments whose remote objects are to be deleted and may still be there. */
  segments: number;
  /**
   * Their bytes: each copy's `.log` size; for a dangling copy (whose objects may be partial or
   * absent) the local `.log` size when the broker still has it, else nothing.
   */
  bytes: number;
  /**
   * ms since the epoch when the oldest of them was due, undefined when none is pending. A
   * retention deletion is due once `delete_grace` has passed since it was first deletable; a
   * dangling copy's cleanup at once; a retired generation's sweep `orphan_grace` after it was
   * retired plus one `orphan_sweep_interval` for the sweep to come round (never, with sweeps
   * off). A retired incarnation counts here even though its records are gone (a recreated
   * topic's old copies: the journal no longer lists them, so their segments and bytes do not).
   */
  oldestDueAt?: number;
}

/** What {@link deleteLag} needs besides the state. */
export interface DeleteLagInputs {
  /** What total retention chose in its last pass (the agent knows; a bare journal does not). */
  chosen?: readonly ChosenDeletion[];
  /** The local `.log` size of a current-generation segment the broker still has. */
  localSize?: (start: bigint) => number | undefined;
  /** `housekeeping.orphan_grace`, ms. */
  orphanGraceMs: number;
  /** `housekeeping.orphan_sweep_interval`, ms (Infinity: never swept). */
  orphanSweepIntervalMs: number;
}

/**
 * The remote-deletion lag of a partition: retention deletions journaled and not finished,
 * chosen ones waiting their turn, dangling copies awaiting cleanup, and the copies of retired
 * generations awaiting the sweep. Pure.
 */
export function deleteLag(state: PartitionState, o: DeleteLagInputs): DeleteLag {
  const out: DeleteLag = { segments: 0, bytes: 0 };
  const due = (at: number) => {
    if (out.oldestDueAt === undefined || at < out.oldestDueAt) out.oldestDueAt = at;
  };
  const sweptBy = new Map<string, number>();
  for (const r of retiredOf(state)) {
    const at = r.at + o.orphanGraceMs + o.orphanSweepIntervalMs;
    sweptBy.set(retiredKey(r.incarnation, r.generation), at);
    due(at);
  }
  const local = (r: SegmentRecord) =>
    r.generation === state.generation ? o.localSize?.(r.start) : undefined;
  for (const generation of state.segments.keys()) {
    const retired = state.incarnation !== undefined &&
      sweptBy.has(retiredKey(state.incarnation, generation));
    for (const r of segmentsOf(state, generation)) {
      if (r.state === "DELETE_SEGMENT_STARTED") {
        out.segments++;
        out.bytes += r.meta?.size ?? local(r) ?? 0;
        due(r.since);
      } else if (r.state === "DANGLING") {
        out.segments++;
        out.bytes += local(r) ?? 0;
        due(r.since);
      } else if (retired && r.state === "COPY_SEGMENT_FINISHED") {
        out.segments++;
        out.bytes += r.meta?.size ?? 0;
      }
    }
  }
  for (const c of o.chosen ?? []) {
    // The state may have moved on since the pass chose it: deleted, its deletion started (counted
    // above), or its generation purged.
    if (c.generation !== state.generation) continue;
    if (state.segments.get(c.generation)?.get(c.start)?.state !== "COPY_SEGMENT_FINISHED") continue;
    out.segments++;
    out.bytes += c.size;
    due(c.dueAt);
  }
  return out;
}
