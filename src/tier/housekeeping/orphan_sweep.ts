// Housekeeping job: the orphan sweep. Every `orphan_sweep_interval`, each partition's key root is
// listed; an incarnation or generation this node no longer has — not the partition's current
// one, and no generation its journal still records — is deleted once it has been orphaned for
// `orphan_grace`. An incarnation the journal (or a live marker, which names only the journal's
// incarnation) still names is never touched, nor is any partition this node does not tier.
import { incarnationHex } from "../../layout/partition.ts";
import { manifestKey, partitionRoot } from "../../layout/object_keys.ts";
import { listRemoteGenerations, type RemoteGeneration } from "../remote_inventory.ts";
import type { JobEnv, JobOutcome, Tended } from "./job.ts";
import { QuotaExhausted } from "./quota.ts";

/** Keys deleted per request. */
const DELETE_BATCH = 100;

/** True when an orphan sweep is due. */
export function orphanSweepDue(env: Omit<JobEnv, "store">, now: number): boolean {
  const every = env.config.tiered_storage.housekeeping.orphan_sweep_interval;
  if (!Number.isFinite(every)) return false;
  const last = env.state.orphans.lastSweep;
  return last === undefined || now - last >= every;
}

/** Sweeps orphaned incarnations and generations past their grace. */
export async function sweepOrphans(env: JobEnv): Promise<JobOutcome> {
  const out: JobOutcome = {
    job: "orphan_sweep",
    complete: true,
    counts: { orphans: 0, swept: 0, objects: 0 },
    errors: [],
  };
  const grace = env.config.tiered_storage.housekeeping.orphan_grace;
  const seenNow = new Set<string>();
  for (const t of env.targets) {
    if (t.ledger.state.incarnation === undefined) continue;
    const root = partitionRoot(t.ledger.location());
    try {
      for (const g of await listRemoteGenerations(env.store, root)) {
        if (named(t, g)) continue;
        const dir = `${root}${incarnationHex(g.incarnation)}-${g.generation}/`;
        seenNow.add(dir);
        out.counts.orphans++;
        const now = env.clock.now();
        const first = env.state.orphans.firstSeen[dir] ??= now;
        if (now - first < grace) continue;
        const keys = [
          ...g.logs.values(),
          ...g.indexes.values(),
          manifestKey({
            ...t.ledger.location(),
            incarnation: g.incarnation,
            generation: g.generation,
          }),
        ];
        for (let i = 0; i < keys.length; i += DELETE_BATCH) {
          const failures = await env.store.deleteMany(keys.slice(i, i + DELETE_BATCH));
          if (failures.length > 0) throw failures[0].error;
        }
        delete env.state.orphans.firstSeen[dir];
        seenNow.delete(dir);
        out.counts.swept++;
        out.counts.objects += keys.length;
        env.log.info("orphaned incarnation/generation swept from the bucket", {
          partition: t.ledger.label,
          prefix: dir,
          objects: keys.length,
          orphaned_for_ms: now - first,
        });
      }
    } catch (err) {
      out.complete = false;
      if (err instanceof QuotaExhausted) return out;
      out.errors.push(`orphan sweep of ${t.ledger.label}: ${(err as Error).message}`);
      env.log.warn("orphan sweep stopped for a partition; it goes on next run", {
        partition: t.ledger.label,
        err,
      });
    }
  }
  // An orphan no longer seen (adopted again, or gone) starts its grace afresh if it returns.
  for (const dir of Object.keys(env.state.orphans.firstSeen)) {
    if (!seenNow.has(dir)) delete env.state.orphans.firstSeen[dir];
  }
  if (out.complete) env.state.orphans.lastSweep = env.clock.now();
  return out;
}

/** Whether the partition's journal still names this incarnation and generation. */
function named(t: Tended, g: RemoteGeneration): boolean {
  const s = t.ledger.state;
  if (g.incarnation !== s.incarnation) return false;
  return g.generation === s.generation || s.segments.has(g.generation);
}
