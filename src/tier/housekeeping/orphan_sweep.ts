// Housekeeping job: the sweep of retired incarnations and generations. Every
// `orphan_sweep_interval`, each partition's journal is asked what this agent retired (the topic
// recreated, the partition purged — see ../retirement.ts); each one's tombstone is written if it
// is not yet, and once `orphan_grace` has passed since it was retired, its objects are deleted
// (listed under its own prefix, bounded; a listing that names any key outside that prefix
// deletes nothing), its manifest last, and the sweep is journaled.
//
// Nothing else is ever deleted here. "Not named by my journal" is no reason: another agent's
// objects, an incarnation this journal never had, a copy planted by hand all stay. The
// partition's current incarnation and generation are never swept, whatever the journal says.
import { listBounded } from "../../../providers/listing.ts";
import { StoreError } from "../../../providers/types.ts";
import { incarnationHex } from "../../layout/partition.ts";
import { partitionRoot } from "../../layout/object_keys.ts";
import { type RetiredGeneration, retiredKey, retiredOf } from "../../state/segment_state.ts";
import { tombstoneKey, writeTombstone } from "../retirement.ts";
import type { JobEnv, JobOutcome, Tended } from "./job.ts";
import { noteFailure } from "../problem.ts";
import { QuotaExhausted } from "./quota.ts";

/** Keys deleted per request. */
const DELETE_BATCH = 100;

/** True when a sweep is due. */
export function orphanSweepDue(env: Omit<JobEnv, "store">, now: number): boolean {
  const every = env.config.tiered_storage.housekeeping.orphan_sweep_interval;
  if (!Number.isFinite(every)) return false;
  if (!env.targets.some((t) => retiredOf(t.ledger.state).length > 0)) return false;
  const last = env.state.orphans.lastSweep;
  return last === undefined || now - last >= every;
}

/** Writes missing tombstones and sweeps what was retired longer than `orphan_grace` ago. */
export async function sweepOrphans(env: JobEnv): Promise<JobOutcome> {
  const out: JobOutcome = {
    job: "orphan_sweep",
    complete: true,
    counts: { retired: 0, waiting: 0, swept: 0, objects: 0 },
    problems: [],
  };
  const grace = env.config.tiered_storage.housekeeping.orphan_grace;
  const written = new Set(env.state.orphans.tombstoned ?? []);
  const stillRetired = new Set<string>();
  for (const t of env.targets) {
    const s = t.ledger.state;
    if (s.incarnation === undefined) continue;
    for (const r of retiredOf(s)) {
      const id = `${t.ledger.label}@${retiredKey(r.incarnation, r.generation)}`;
      if (r.incarnation === s.incarnation && r.generation === s.generation) continue; // never
      stillRetired.add(id);
      out.counts.retired++;
      try {
        if (!written.has(id)) {
          await writeTombstone(env.store, t.ledger, r, env.owner?.agentId, env.clock.now());
          written.add(id);
        }
        if (env.clock.now() - r.at < grace) {
          out.counts.waiting++;
          continue;
        }
        out.counts.objects += await sweep(env, t, r);
        stillRetired.delete(id);
        written.delete(id);
        out.counts.swept++;
      } catch (err) {
        out.complete = false;
        if (err instanceof QuotaExhausted) break;
        noteFailure(
          out,
          { kind: "housekeeping", what: `sweep of ${t.ledger.label} ${dirOf(r)}` },
          err,
        );
        env.log.warn("sweep of a retired generation stopped; it goes on next run", {
          partition: t.ledger.label,
          retired: dirOf(r),
          err,
        });
      }
    }
  }
  env.state.orphans.tombstoned = [...written].filter((id) => stillRetired.has(id));
  if (out.complete) env.state.orphans.lastSweep = env.clock.now();
  return out;
}

/** Deletes a retired generation's objects (its manifest last) and journals it. */
async function sweep(env: JobEnv, t: Tended, r: RetiredGeneration): Promise<number> {
  const prefix = `${partitionRoot(t.ledger.location())}${dirOf(r)}/`;
  const objects = await listBounded(env.store, prefix, { clock: env.clock });
  const stray = objects.find((o) => !o.key.startsWith(prefix));
  if (stray) {
    // A store that answers a listing with keys from elsewhere (it ignored the prefix, or a proxy
    // mangled it) cannot be trusted with what to delete: nothing is, this run or any until it
    // answers for the prefix alone.
    throw new StoreError(
      "Malformed",
      `${env.store.kind} store: the listing of ${JSON.stringify(prefix)} named ` +
        `${JSON.stringify(stray.key)}, outside it; nothing was deleted`,
      { op: "list", key: stray.key, code: "ListingOutsidePrefix" },
    );
  }
  const keys = [...objects.map((o) => o.key), tombstoneKey(t.ledger, r)];
  for (let i = 0; i < keys.length; i += DELETE_BATCH) {
    const failures = await env.store.deleteMany(keys.slice(i, i + DELETE_BATCH));
    if (failures.length > 0) throw failures[0].error;
  }
  await t.ledger.record({
    type: "retired_swept",
    incarnation: r.incarnation,
    generation: r.generation,
    at: env.clock.now(),
  });
  env.log.info("retired incarnation/generation swept from the bucket", {
    partition: t.ledger.label,
    prefix,
    objects: keys.length,
    reason: r.reason,
    retired_for_ms: env.clock.now() - r.at,
  });
  return keys.length;
}

function dirOf(r: RetiredGeneration): string {
  return `${incarnationHex(r.incarnation)}-${r.generation}`;
}
