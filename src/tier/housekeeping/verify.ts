// Housekeeping job: the verify pass. Every `verify_interval`, every verified copy below the floor
// is checked with HEADs — the `.log` object's size and metadata must still describe the segment
// the journal recorded, and its `.index` must be there with its size. A problem is never repaired
// silently: it is logged, counted and shown. A copy whose local files still exist goes DANGLING
// (cleaned up and copied again by the next pass); an evicted one cannot be repaired and is
// reported once, loudly. A pass spans runs: a cursor per partition says where it stands.
import { checkCopy, type CopyProblem } from "../copy_check.ts";
import type { CopiedRecord } from "../../state/segment_state.ts";
import { segmentsOf } from "../../state/segment_state.ts";
import type { JobEnv, JobOutcome, Tended } from "./job.ts";
import { noteFailure } from "../problem.ts";
import { QuotaExhausted } from "./quota.ts";

/** True when a verify pass is due (or one is under way). */
export function verifyDue(env: Omit<JobEnv, "store">, now: number): boolean {
  const every = env.config.tiered_storage.housekeeping.verify_interval;
  if (!Number.isFinite(every)) return false;
  const v = env.state.verify;
  return Object.keys(v.cursor).length > 0 || v.lastCompleted === undefined ||
    now - v.lastCompleted >= every;
}

/** Verifies copies below the floor, from each partition's cursor on, within the quota. */
export async function verifyCopies(env: JobEnv): Promise<JobOutcome> {
  const out: JobOutcome = {
    job: "verify",
    complete: true,
    counts: { checked: 0, missing: 0, mismatched: 0, unreadable: 0, recopy: 0 },
    problems: [],
  };
  const v = env.state.verify;
  const starting = Object.keys(v.cursor).length === 0;
  for (const t of [...env.targets].sort((a, b) => a.ledger.label.localeCompare(b.ledger.label))) {
    const label = t.ledger.label;
    if (t.ledger.state.incarnation === undefined) continue;
    if (!starting && v.cursor[label] === undefined) continue; // done in this pass already
    const from = v.cursor[label] === undefined ? -1n : BigInt(v.cursor[label]);
    v.cursor[label] = String(from);
    try {
      for (const rec of toVerify(t, from)) {
        const keys = t.ledger.keys(rec.start, rec.generation);
        const { problem } = await checkCopy(env.store, keys, rec.meta, t.format);
        out.counts.checked++;
        if (problem) await report(env, t, rec, problem, out);
        v.cursor[label] = String(rec.start);
      }
      delete v.cursor[label];
    } catch (err) {
      out.complete = false;
      if (err instanceof QuotaExhausted) return out;
      noteFailure(out, { kind: "housekeeping", what: `verify of ${label}` }, err);
      env.log.warn("verify pass stopped for a partition; it goes on next run", {
        partition: label,
        err,
      });
    }
  }
  if (out.complete) v.lastCompleted = env.clock.now();
  return out;
}

/** The partition's copies below the floor not yet verified in this pass, oldest first. */
function toVerify(t: Tended, after: bigint): CopiedRecord[] {
  const state = t.ledger.state;
  return segmentsOf(state)
    .filter((r): r is CopiedRecord =>
      r.state === "COPY_SEGMENT_FINISHED" && r.start > after && r.meta.endOffset <= state.floor
    )
    .sort((a, b) => (a.start < b.start ? -1 : 1));
}

async function report(
  env: JobEnv,
  t: Tended,
  rec: CopiedRecord,
  problem: CopyProblem,
  out: JobOutcome,
): Promise<void> {
  out.counts[problem.kind]++;
  const fields = {
    partition: t.ledger.label,
    segment: rec.start,
    end_offset: rec.meta.endOffset,
    key: problem.key,
    problem: problem.kind,
    detail: problem.detail,
  };
  if (!rec.evicted) {
    // The broker still has the bytes: copy them again (cleanup first, as for any failed copy).
    await t.ledger.record({
      type: "dangling",
      segment: rec.start,
      generation: rec.generation,
      reason: `verify: ${problem.key} ${problem.kind}: ${problem.detail}`.slice(0, 500),
      at: env.clock.now(),
    });
    out.counts.recopy++;
    if (problem.kind !== "unreadable") env.observer.remoteObjectsMissing?.(1);
    env.log.warn(
      "verify: a remote copy is gone or damaged; its local files are still here, so it will be copied again",
      fields,
    );
    return;
  }
  if (env.state.verify.reported.includes(problem.key)) return;
  env.state.verify.reported.push(problem.key);
  if (problem.kind !== "unreadable") env.observer.remoteObjectsMissing?.(1);
  env.log.error(
    "verify: the only copy of an evicted segment is gone or damaged; its offsets cannot be read",
    fields,
  );
}
