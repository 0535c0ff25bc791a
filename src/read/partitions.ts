// A summary of every tiered partition — where its segments are, its floor, its bytes — for
// `GET /v1/partitions`, the status page and the per-partition gauges.
import type { FormatName } from "../format/types.ts";
import { discoverPartitions } from "../partition/discover.ts";
import { type DeleteLag, deleteLag, type DeleteLagInputs } from "../state/delete_lag.ts";
import { getSegment, type PartitionState, segmentsOf } from "../state/segment_state.ts";
import { tieredTopic } from "../config/topics.ts";
import { type Catalog, catalogFormat, loadCatalog } from "./catalog.ts";
import type { ReadContext } from "./context.ts";
import { UnknownPartition } from "./errors.ts";
import { deadlineIn } from "./_fetch.ts";
import type { PartitionHealth } from "./state_source.ts";

/** One partition's tiering at a glance. */
export interface PartitionSummary {
  stream: number;
  topic: number;
  partition: number;
  /** Undefined until there are bytes to tell from. */
  format?: FormatName;
  incarnation?: bigint;
  generation: bigint;
  /** `tiered_up_to_offset`; -1n before the first copy. */
  floor: bigint;
  segments: {
    /** Segments with local files (the active one included). */
    local: number;
    /** Local segments also verified in the store. */
    uploaded: number;
    /** Segments only in the store (evicted locally). */
    remote: number;
    /** Segments in DANGLING, every generation. */
    dangling: number;
  };
  /** Bytes of local `.log` files. */
  localBytes: number;
  /** Bytes of verified copies in the store (uploaded and remote). */
  remoteBytes: number;
  /** Local bytes of DANGLING segments. */
  danglingBytes: number;
  /**
   * Sealed local segments of the current generation not yet copied (no record, or a copy
   * that has not finished), and their `.log` bytes: the copy backlog (KIP-958's copy lag).
   */
  copyLag: { segments: number; bytes: number };
  /**
   * Remote copies tierd has decided to delete whose objects may still be in the store, and
   * when the oldest deletion was due (KIP-958's delete lag; see `state/delete_lag.ts`).
   */
  deleteLag: DeleteLag;
  /** How the partition's local state stands, when the agent knows. */
  health?: PartitionHealth;
  /** Offsets the bucket was found not to hold (HOLE records), with why. */
  holes: { from: bigint; to?: bigint; reason: string }[];
}

/**
 * Summarizes every tiered partition found in the data directory. A partition whose format
 * cannot be told (store down, no local bytes) is still listed, without a format.
 */
export async function summarizePartitions(ctx: ReadContext): Promise<PartitionSummary[]> {
  const found = await discoverPartitions(
    ctx.config.agent.data_dir,
    (id) => tieredTopic(ctx.config, id) !== undefined,
  );
  const out: PartitionSummary[] = [];
  for (const part of found) {
    let catalog: Catalog;
    try {
      catalog = await loadCatalog(ctx, part, { pending: "ignore", keepView: false });
    } catch (err) {
      if (err instanceof UnknownPartition) continue; // removed while we listed
      throw err;
    }
    const format = await catalogFormat(ctx, catalog, deadlineIn(ctx.fetchTimeoutMs, ctx.clock))
      .catch(() => undefined);
    const housekeeping = ctx.config.tiered_storage.housekeeping;
    const summary = summarize(catalog, {
      format,
      lag: {
        chosen: ctx.states.chosenDeletions?.(part),
        orphanGraceMs: housekeeping.orphan_grace,
        orphanSweepIntervalMs: housekeeping.orphan_sweep_interval,
      },
    });
    out.push({ ...summary, health: ctx.states.health?.(part) });
  }
  return out;
}

/** What {@link summarize} needs besides the catalog. */
export interface SummaryOptions {
  /** The partition's format, when it could be told. */
  format?: FormatName;
  /**
   * For the delete lag: what retention chose and the sweep's timing.
   * @default nothing chosen, sweeps never due
   */
  lag?: Omit<DeleteLagInputs, "localSize">;
}

/** The summary of one catalog. */
export function summarize(catalog: Catalog, o: SummaryOptions = {}): PartitionSummary {
  const format = o.format;
  const s: PartitionSummary = {
    ...catalog.id,
    format,
    incarnation: catalog.state?.incarnation,
    generation: catalog.state?.generation ?? 0n,
    floor: catalog.state?.floor ?? -1n,
    segments: { local: 0, uploaded: 0, remote: 0, dangling: 0 },
    localBytes: 0,
    remoteBytes: 0,
    danglingBytes: 0,
    copyLag: { segments: 0, bytes: 0 },
    deleteLag: { segments: 0, bytes: 0 },
    holes: [],
  };
  const localSize = new Map<bigint, number>();
  const state = catalog.state;
  for (const e of catalog.entries) {
    if (e.kind !== "segment") continue;
    if (e.local) {
      s.segments.local++;
      s.localBytes += e.local.logSize;
      localSize.set(e.start, e.local.logSize);
      if (e.local.sealed && !e.remote && !copied(state, e.start)) {
        s.copyLag.segments++;
        s.copyLag.bytes += e.local.logSize;
      }
    }
    if (e.remote) {
      if (e.local) s.segments.uploaded++;
      else s.segments.remote++;
      s.remoteBytes += e.remote.meta.size;
    }
  }
  if (state) {
    for (const r of segmentsOf(state)) {
      if (r.state !== "HOLE") continue;
      s.holes.push({
        from: r.start,
        ...(r.lostEndOffset !== undefined && { to: r.lostEndOffset }),
        reason: r.holeReason ?? "",
      });
    }
    for (const generation of state.segments.keys()) {
      for (const r of segmentsOf(state, generation)) {
        if (r.state !== "DANGLING") continue;
        s.segments.dangling++;
        if (generation === state.generation) s.danglingBytes += localSize.get(r.start) ?? 0;
      }
    }
    s.deleteLag = deleteLag(state, {
      orphanGraceMs: Infinity,
      orphanSweepIntervalMs: 0,
      ...o.lag,
      localSize: (start) => localSize.get(start),
    });
  }
  return s;
}

/** True when the segment was copied (and perhaps since deleted remotely by total retention). */
function copied(state: PartitionState | undefined, start: bigint): boolean {
  if (!state) return false;
  const r = getSegment(state, state.generation, start);
  return r !== undefined && (r.state === "COPY_SEGMENT_FINISHED" || r.deleteCause === "retention");
}
