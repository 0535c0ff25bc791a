// Housekeeping job: the multipart sweep. Uploads under this cluster's prefix that are still
// incomplete a day after they started can belong to no live copy (a copy's upload is bounded by
// `segment_upload_timeout`): they are aborted, so a store never keeps paying for their parts.
// An upload outside the prefix is never aborted, whatever the store's listing says.
import { clusterRoot } from "../../layout/object_keys.ts";
import type { JobEnv, JobOutcome } from "./job.ts";
import { noteFailure } from "../problem.ts";
import { QuotaExhausted } from "./quota.ts";

/** An incomplete upload older than this is abandoned. */
export const ABANDONED_AFTER_MS = 24 * 60 * 60 * 1000;

/** True when a multipart sweep is due (once per housekeeping `interval`). */
export function multipartSweepDue(env: Omit<JobEnv, "store">, now: number): boolean {
  const last = env.state.multipart.lastSweep;
  return last === undefined || now - last >= env.config.tiered_storage.housekeeping.interval;
}

/** Aborts abandoned multipart uploads under the cluster's prefix. */
export async function sweepMultipart(env: JobEnv): Promise<JobOutcome> {
  const out: JobOutcome = {
    job: "multipart_sweep",
    complete: true,
    counts: { open: 0, aborted: 0 },
    problems: [],
  };
  try {
    const root = clusterRoot(env.keySpace);
    const listed = await env.store.listMultipartUploads(root);
    // Never another key space's: a store that ignores the prefix lists every upload it has.
    const uploads = listed.filter((u) => u.key.startsWith(root));
    if (uploads.length < listed.length) {
      env.log.warn("the store listed multipart uploads outside tierd's prefix; left alone", {
        prefix: root,
        outside: listed.length - uploads.length,
        first: listed.find((u) => !u.key.startsWith(root))!.key,
      });
    }
    out.counts.open = uploads.length;
    const now = env.clock.now();
    for (const u of uploads) {
      if (!u.initiated || now - u.initiated.getTime() < ABANDONED_AFTER_MS) continue;
      await env.store.abortMultipart(u.key, u.uploadId);
      out.counts.aborted++;
      env.log.info("abandoned multipart upload aborted", {
        key: u.key,
        upload_id: u.uploadId,
        initiated: u.initiated.toISOString(),
      });
    }
    env.state.multipart.lastSweep = now;
  } catch (err) {
    out.complete = false;
    if (!(err instanceof QuotaExhausted)) {
      noteFailure(out, { kind: "housekeeping", what: "multipart sweep" }, err);
      env.log.warn("multipart sweep failed; tried again next run", { err });
    }
  }
  return out;
}
