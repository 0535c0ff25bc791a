// Retiring an incarnation or generation of a partition: when boot finds the topic recreated (a
// new incarnation) or a pass finds the partition purged (a new generation), the old one is
// journaled `retired` right after the new one is recorded, and a tombstone — its manifest with
// `retired` set — is written to the bucket, so a restore never takes it for the current one.
// Only what was retired this way is ever swept (housekeeping/orphan_sweep.ts), after
// `orphan_grace`. The journal comes first: a crash before the tombstone leaves it to the sweep,
// which writes any tombstone still missing before it deletes anything.
import { encodeManifest, type Manifest } from "../layout/manifest.ts";
import { manifestKey } from "../layout/object_keys.ts";
import { incarnationHex } from "../layout/partition.ts";
import type { JournalEvent } from "../state/events.ts";
import type { RetiredGeneration } from "../state/segment_state.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { VERSION } from "../version.ts";
import type { PartitionLedger } from "./partition_ledger.ts";
import { type PhaseContext, withSegmentDeadline } from "./phase.ts";

/** The `retired` events of every generation of `incarnation` listed, for `ledger.record`. */
export function retiredEvents(
  incarnation: bigint,
  generations: Iterable<bigint>,
  reason: string,
  at: number,
): JournalEvent[] {
  return [...new Set(generations)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map((
    generation,
  ) => ({ type: "retired", incarnation, generation, reason, at }));
}

/** The tombstone of a retired incarnation and generation: its manifest, `retired` set. */
export function tombstoneOf(
  ledger: PartitionLedger,
  r: RetiredGeneration,
  owner: string | undefined,
  writtenAt: number,
): Manifest {
  return {
    ...ledger.id,
    clusterId: ledger.location().clusterId,
    incarnation: r.incarnation,
    generation: r.generation,
    floor: -1n,
    writtenAt,
    tierdVersion: VERSION,
    segments: [],
    ...(owner !== undefined && { owner }),
    retired: { at: r.at, reason: r.reason },
  };
}

/** The manifest key of a retired incarnation and generation of the ledger's partition. */
export function tombstoneKey(ledger: PartitionLedger, r: RetiredGeneration): string {
  return manifestKey({
    ...ledger.location(),
    incarnation: r.incarnation,
    generation: r.generation,
  });
}

/** Writes a retired generation's tombstone (over its manifest, if it had one). */
export async function writeTombstone(
  store: ObjectStore,
  ledger: PartitionLedger,
  r: RetiredGeneration,
  owner: string | undefined,
  now: number,
): Promise<void> {
  await store.put(
    tombstoneKey(ledger, r),
    encodeManifest(tombstoneOf(ledger, r, owner, now)),
    { contentType: "application/json" },
  );
}

/**
 * Writes the tombstones of what was just retired, right away; a failure is logged and left to
 * the sweep, which writes missing tombstones before it deletes anything.
 */
export async function announceRetired(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  retired: readonly RetiredGeneration[],
): Promise<void> {
  for (const r of retired) {
    try {
      await withSegmentDeadline(
        ctx,
        "housekeeping",
        (store) => writeTombstone(store, ledger, r, ctx.owner?.agentId, ctx.clock.now()),
      );
    } catch (err) {
      ctx.log.warn("tombstone of a retired generation not written yet; the sweep writes it", {
        incarnation: incarnationHex(r.incarnation),
        generation: r.generation,
        err,
      });
    }
  }
}
