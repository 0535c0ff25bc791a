// Housekeeping job: keeps each partition's `manifest.json` in step with its remote segments —
// rewritten when the remote set changed, at most every `manifest_upload_interval`.
import { xxh3_64 } from "../../hash.ts";
import {
  encodeManifest,
  type Manifest,
  type ManifestRange,
  type ManifestSegment,
} from "../../layout/manifest.ts";
import { manifestKey } from "../../layout/object_keys.ts";
import { type CopiedRecord, segmentsOf } from "../../state/segment_state.ts";
import { VERSION } from "../../version.ts";
import type { JobEnv, JobOutcome, Tended } from "./job.ts";
import { noteFailure } from "../problem.ts";
import { QuotaExhausted } from "./quota.ts";

/**
 * The manifest of a partition's current incarnation and generation, from its journal: its
 * verified copies, the ranges recorded lost before upload and the holes, and its owner.
 */
export function manifestOf(
  t: Tended,
  clusterId: string,
  writtenAt: number,
  owner?: string,
): Manifest {
  const state = t.ledger.state;
  const loc = t.ledger.location();
  const records = segmentsOf(state);
  const segments: ManifestSegment[] = records
    .filter((r): r is CopiedRecord => r.state === "COPY_SEGMENT_FINISHED")
    .map((r) => ({ start: r.start, evicted: r.evicted, ...r.meta }));
  // A range without a recorded end reaches up to the next record.
  const rangesIn = (kind: "LOST_BEFORE_UPLOAD" | "HOLE"): ManifestRange[] =>
    records.filter((r) => r.state === kind).map((r) => {
      const next = records.find((n) => n.start > r.start);
      return { from: r.start, to: r.lostEndOffset ?? (next ? next.start - 1n : r.start) };
    });
  return {
    ...t.ledger.id,
    clusterId,
    incarnation: loc.incarnation,
    generation: loc.generation,
    format: t.format,
    floor: state.floor,
    writtenAt,
    tierdVersion: VERSION,
    segments,
    ...(owner !== undefined && { owner }),
    lost: rangesIn("LOST_BEFORE_UPLOAD"),
    holes: rangesIn("HOLE"),
  };
}

/** What changes the manifest's meaning (not its timestamp). */
function digestOf(m: Manifest): string {
  const text = [
    m.incarnation,
    m.generation,
    m.format,
    m.floor,
    ...m.segments.map((s) => `${s.start}:${s.checksum}:${s.evicted}`),
    ...(m.lost ?? []).map((r) => `lost:${r.from}-${r.to}`),
    ...(m.holes ?? []).map((r) => `hole:${r.from}-${r.to}`),
  ].join("|");
  return xxh3_64(new TextEncoder().encode(text)).toString(16);
}

/** True when some partition's manifest is due. */
export function manifestsDue(env: Omit<JobEnv, "store">, now: number): boolean {
  return env.targets.some((t) => manifestDue(env, t, now));
}

function manifestDue(env: Omit<JobEnv, "store">, t: Tended, now: number): boolean {
  if (t.ledger.state.incarnation === undefined) return false;
  const last = env.state.manifests.uploaded[t.ledger.label];
  const every = env.config.tiered_storage.housekeeping.manifest_upload_interval;
  if (last && now - last.at < every) return false;
  return last?.digest !==
    digestOf(manifestOf(t, env.config.agent.cluster_id, now, env.owner?.agentId));
}

/** Uploads the manifests that are due. */
export async function uploadManifests(env: JobEnv): Promise<JobOutcome> {
  const out: JobOutcome = {
    job: "manifest",
    complete: true,
    counts: { uploaded: 0 },
    problems: [],
  };
  for (const t of env.targets) {
    const now = env.clock.now();
    if (!manifestDue(env, t, now)) continue;
    const m = manifestOf(t, env.config.agent.cluster_id, now, env.owner?.agentId);
    const key = manifestKey(t.ledger.location());
    try {
      await env.store.put(key, encodeManifest(m), { contentType: "application/json" });
    } catch (err) {
      out.complete = false;
      if (err instanceof QuotaExhausted) break;
      noteFailure(out, { kind: "housekeeping", what: key }, err);
      env.log.warn("manifest upload failed; tried again next run", { key, err });
      continue;
    }
    env.state.manifests.uploaded[t.ledger.label] = { at: now, digest: digestOf(m) };
    out.counts.uploaded++;
    env.log.debug("manifest uploaded", { key, segments: m.segments.length });
  }
  return out;
}
