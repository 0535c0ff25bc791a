// What `tierd verify` finds in one partition: the journal's records against what the bucket and
// the broker's directory really hold. Every copy the journal calls verified is HEADed (size and
// metadata, as the agent's verify pass does); one whose local files are still here has its bytes
// proven as eviction proves them — the local file re-hashed against the journal (a file changed
// after its copy is reported), and the store's own checksum compared with the local file's, or
// the object read back; `deep` reads every copy back instead of trusting a stored checksum. Objects
// under the partition's keys that the journal does not know are orphans. Lost segments and holes
// are said as such, never as differences. Nothing is written anywhere: the store is read-only and
// the journal is read, not opened. Beside a running agent the journal is read again at the end,
// and a difference whose record changed meanwhile is reported as `changed`, not as a difference.
import type { Clock } from "../base/clock.ts";
import { forEachBounded } from "../base/concurrency.ts";
import { probeAbsence } from "../../providers/absence.ts";
import { listBounded } from "../../providers/listing.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import type { FormatName } from "../format/types.ts";
import { hex128, xxh3_128 } from "../hash.ts";
import type { KeySpace } from "../layout/key_space.ts";
import { parseSegmentKey, partitionRoot, segmentKeys } from "../layout/object_keys.ts";
import { incarnationHex } from "../layout/partition.ts";
import { listSegments, type SegmentFiles } from "../partition/segments.ts";
import type { JournalStateReader } from "../read/state_source.ts";
import {
  type CopiedRecord,
  getSegment,
  type PartitionState,
  retiredKey,
  type SegmentRecord,
} from "../state/segment_state.ts";
import { checkCopy, type CopyProblem } from "../tier/copy_check.ts";
import { CopyMismatchError, SegmentChangedError } from "../tier/copy_segment.ts";
import { type Bandwidth, readBack, verifyContent } from "../tier/verify_content.ts";
import type { TieredPartition } from "./inventory.ts";

/**
 * What verify found about a segment or an object:
 * - `ok`: as the journal says;
 * - `missing`: an object of a verified copy is gone (confirmed by a HEAD, then a listing);
 * - `unreadable`: the store lists the object but answers NotFound to a HEAD of it;
 * - `size`, `metadata`: an object's size, or the `.log`'s metadata, is not the copy's;
 * - `checksum`: an object's bytes are not the copy's (the store's checksum, or read back);
 * - `local-changed`: the broker's `.log` is no longer the bytes that were copied;
 * - `orphan`: an object under the partition's keys that the journal does not know;
 * - `lost`, `hole`: the journal records the offsets lost before upload, or a hole;
 * - `in-progress`: a copy, a cleanup or a deletion under way (not checked);
 * - `retired`: objects of a retired incarnation or generation, waiting for the sweep;
 * - `changed`: the journal changed while this was checked (the agent is running): run again;
 * - `error`: the store failed while asking.
 */
export type VerifyStatus =
  | "ok"
  | "missing"
  | "unreadable"
  | "size"
  | "metadata"
  | "checksum"
  | "local-changed"
  | "orphan"
  | "lost"
  | "hole"
  | "in-progress"
  | "retired"
  | "changed"
  | "error";

/** The statuses that are differences: any of them makes `tierd verify` exit 1. */
export const DIFFERENCES: ReadonlySet<VerifyStatus> = new Set<VerifyStatus>([
  "missing",
  "unreadable",
  "size",
  "metadata",
  "checksum",
  "local-changed",
  "orphan",
  "error",
]);

/** One line of verify's report. */
export interface VerifyFinding {
  /** `stream/topic/partition`. */
  partition: string;
  /** The segment's start offset; undefined for an object that names no segment. */
  segment?: bigint;
  /** Its inclusive end offset, when the journal knows it. */
  end?: bigint;
  status: VerifyStatus;
  /** Where the segment's bytes are: `local`, `remote`, `local+remote`, or `-`. */
  location: string;
  /** The object the finding is about (the `.log` unless the `.index` is the one). */
  key?: string;
  /** How the bytes were checked (`head`, `stored crc64nvme`, `read-back`), for `ok`. */
  method?: string;
  detail: string;
}

/** One partition's findings. */
export interface PartitionVerify {
  partition: string;
  findings: VerifyFinding[];
  /** Verified copies checked. */
  checked: number;
  /** Local sealed segments without a copy yet (the next pass copies them; not a difference). */
  notCopied: number;
  /** Bytes read to check: local files hashed and objects read back. */
  bytesRead: number;
}

/** What verify works with. */
export interface VerifyEnv {
  /** The store, read-only (and with retries). */
  store: ObjectStore;
  keySpace: KeySpace;
  /** The configured format; undefined (auto) takes each `.log` object's own. */
  format?: FormatName;
  /** Read every copy back instead of trusting the store's checksum. */
  deep: boolean;
  /** Copies checked at once. */
  checkers: number;
  /** Paces read-backs (the agent's `fetch_bandwidth`). */
  bandwidth?: Bandwidth;
  /** Where the journals are read again at the end. */
  journals: JournalStateReader;
  clock: Clock;
  /** `agent.seal_quiescence`. */
  quiescenceMs: number;
  signal?: AbortSignal;
  /** Called after each copy checked, with the bytes read for it. */
  onChecked?: (partition: string, segment: bigint, bytesRead: number) => void;
}

/** The copies `state` calls verified (COPY_SEGMENT_FINISHED) outside retired generations. */
export function copiesToCheck(state: PartitionState): CopiedRecord[] {
  return recordsOf(state).filter((r): r is CopiedRecord =>
    r.state === "COPY_SEGMENT_FINISHED" && !isRetired(state, r.generation)
  );
}

/**
 * Checks one partition; changes nothing.
 * @throws {StoreError} when the partition's objects cannot be listed
 */
export async function verifyPartition(
  env: VerifyEnv,
  part: TieredPartition,
): Promise<PartitionVerify> {
  const { state } = part;
  const out: PartitionVerify = {
    partition: part.label,
    findings: [],
    checked: 0,
    notCopied: 0,
    bytesRead: 0,
  };
  const local = part.dir
    ? await listSegments(part.dir, { now: env.clock.now(), quiescenceMs: env.quiescenceMs })
    : [];
  const files = new Map(local.map((s) => [s.start, s]));
  const current = (start: bigint) => getSegment(state, state.generation, start);
  out.notCopied = local.filter((s) => s.sealed && !current(s.start)).length;
  // The journal was read before the listing: an object written after it is found in the
  // re-read at the end, not called an orphan.
  const root = partitionRoot({ ...part.id, ...env.keySpace });
  const objects = await listBounded(env.store, root, { signal: env.signal });

  for (const r of recordsOf(state)) {
    if (isRetired(state, r.generation)) continue;
    const local = files.has(r.start) && r.generation === state.generation;
    const finding = noteOf(part.label, r, local);
    if (finding) out.findings.push(finding);
  }
  const copies = copiesToCheck(state);
  const checked = new Array<VerifyFinding | undefined>(copies.length);
  await forEachBounded(copies, env.checkers, async (rec, i) => {
    const file = rec.generation === state.generation ? files.get(rec.start) : undefined;
    const { finding, bytesRead } = await checkOne(env, part, rec, file);
    checked[i] = finding;
    out.bytesRead += bytesRead;
    out.checked++;
    env.onChecked?.(part.label, rec.start, bytesRead);
  });
  out.findings.push(...checked.filter((f) => f !== undefined));
  out.findings.push(...strangers(part.label, root, state, objects.map((o) => o.key)));
  out.findings.sort(byPlace);
  await recheckChanged(env, part, out.findings);
  return out;
}

/** The records of every generation, oldest generation and segment first. */
function recordsOf(state: PartitionState): SegmentRecord[] {
  const gens = [...state.segments.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return gens.flatMap((g) =>
    [...state.segments.get(g)!.values()].sort((a, b) => (a.start < b.start ? -1 : 1))
  );
}

function isRetired(state: PartitionState, generation: bigint): boolean {
  return state.incarnation !== undefined &&
    state.retired?.has(retiredKey(state.incarnation, generation)) === true;
}

/** A record that is not a verified copy: said as it is (lost, hole, under way), or nothing. */
function noteOf(
  partition: string,
  r: SegmentRecord,
  local: boolean,
): VerifyFinding | undefined {
  const base = { partition, segment: r.start, location: local ? "local" : "-" };
  const end = r.meta?.endOffset ?? r.lostEndOffset;
  const range = end === undefined ? `from offset ${r.start}` : `offsets ${r.start}-${end}`;
  switch (r.state) {
    case "LOST_BEFORE_UPLOAD":
      return {
        ...base,
        end,
        status: "lost",
        detail: `${range} recorded lost before upload (the broker deleted them before tierd ` +
          "copied them); reads report a gap",
      };
    case "HOLE":
      return {
        ...base,
        end,
        status: "hole",
        detail: `${range}: a hole, the bucket holds no usable copy` +
          (r.holeReason ? ` (${r.holeReason})` : "") +
          "; settled by a fresh copy, tierd restore, or tierd restore --accept-holes",
      };
    case "COPY_SEGMENT_STARTED":
    case "DANGLING":
    case "DELETE_SEGMENT_STARTED":
      return {
        ...base,
        end,
        status: "in-progress",
        detail: `${r.state}${r.deleteCause ? ` (${r.deleteCause})` : ""}` +
          (r.state === "DANGLING" && r.danglingReason ? `: ${r.danglingReason}` : "") +
          "; the agent's next pass finishes it",
      };
    default:
      return undefined;
  }
}

/** Checks one verified copy: HEADs, then its bytes (see the module comment). */
async function checkOne(
  env: VerifyEnv,
  part: TieredPartition,
  rec: CopiedRecord,
  file: SegmentFiles | undefined,
): Promise<{ finding: VerifyFinding; bytesRead: number }> {
  const meta = rec.meta;
  const keys = segmentKeys(
    {
      ...part.id,
      ...env.keySpace,
      incarnation: part.state.incarnation!,
      generation: rec.generation,
    },
    rec.start,
  );
  const base = {
    partition: part.label,
    segment: rec.start,
    end: meta.endOffset,
    location: file ? "local+remote" : "remote",
  };
  const found = (status: VerifyStatus, detail: string, extra: Partial<VerifyFinding> = {}) => ({
    ...base,
    key: keys.log,
    status,
    detail,
    ...extra,
  });
  let bytesRead = 0;
  try {
    const sameSize = file !== undefined && file.logSize === meta.size;
    const check = await checkCopy(env.store, keys, meta, env.format, {
      checksums: sameSize && !env.deep,
      signal: env.signal,
    });
    if (check.problem) return { finding: problemFinding(base, check.problem), bytesRead };
    if (file && !sameSize) {
      return {
        finding: found(
          "local-changed",
          `${file.logPath} is ${file.logSize} bytes, its verified copy ${meta.size}: changed ` +
            "after it was copied (it is never evicted so)",
        ),
        bytesRead,
      };
    }
    let method = "head";
    let detail = "size and metadata as recorded (bytes not read; --deep reads them)";
    let proven = false;
    if (file) {
      try {
        // Deep: no stored checksum is trusted, so the object is read back.
        const head = env.deep ? { ...check.log, checksums: undefined } : check.log;
        const proof = await verifyContent(env.store, head, {
          path: file.logPath,
          size: meta.size,
          checksum: meta.checksum,
        }, { signal: env.signal, bandwidth: env.bandwidth });
        bytesRead += meta.size + proof.bytesRead;
        proven = true;
        method = proof.method === "stored" ? `stored ${proof.algorithm}` : "read-back";
        detail = proof.method === "stored"
          ? `the local file equals its copy: the store's ${proof.algorithm} is the local file's`
          : "the local file equals its copy: read back, its xxh3-128 is the segment's" +
            (proof.setAside ? ` (the store's ${proof.setAside} set aside)` : "");
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
        // Evicted meanwhile (the agent runs): the copy is all there is; checked as remote.
        base.location = "remote";
      }
    }
    if (!proven && env.deep) {
      const proof = await readBack(env.store, keys.log, meta, {
        signal: env.signal,
        bandwidth: env.bandwidth,
      });
      bytesRead += proof.bytesRead;
      method = "read-back";
      detail = "read back, its xxh3-128 is the segment's";
    }
    if (env.deep) {
      const { bytes } = await env.store.get(keys.index, { signal: env.signal });
      bytesRead += bytes.length;
      const recorded = check.index.metadata["xxh3-128"];
      const actual = hex128(xxh3_128(bytes));
      if (recorded !== undefined && recorded !== actual) {
        return {
          finding: found(
            "checksum",
            `index object's bytes hash to xxh3-128 ${actual}, its metadata says ${recorded}`,
            { key: keys.index },
          ),
          bytesRead,
        };
      }
    }
    return { finding: found("ok", detail, { method }), bytesRead };
  } catch (err) {
    if (err instanceof SegmentChangedError) {
      return {
        finding: found(
          "local-changed",
          `${file?.logPath}: its bytes are not the verified copy's (xxh3-128 ` +
            `${hex128(meta.checksum)}): changed after it was copied`,
        ),
        bytesRead: bytesRead + meta.size,
      };
    }
    if (err instanceof CopyMismatchError) {
      const detail = err.message.startsWith(`${err.key}: `)
        ? err.message.slice(err.key.length + 2)
        : err.message;
      return { finding: found("checksum", detail, { key: err.key }), bytesRead };
    }
    if (err instanceof StoreError && err.kind === "NotFound" && err.detail.key !== undefined) {
      // Gone between the HEAD and the read: confirmed as the HEADs confirm it.
      const where = await probeAbsence(env.store, err.detail.key, { signal: env.signal });
      if (where !== "present") {
        return {
          finding: found(
            where === "absent" ? "missing" : "unreadable",
            where === "absent"
              ? "the object is gone"
              : "the store lists the object but cannot read it",
            { key: err.detail.key },
          ),
          bytesRead,
        };
      }
    }
    if (err instanceof StoreError) {
      return { finding: found("error", `the store failed: ${err.message}`), bytesRead };
    }
    // A local file that could not be read, say: reported, and the other copies checked.
    return { finding: found("error", (err as Error).message ?? String(err)), bytesRead };
  }
}

/** A problem `checkCopy` found, as a finding. */
function problemFinding(
  base: Omit<VerifyFinding, "status" | "detail">,
  p: CopyProblem,
): VerifyFinding {
  const status: VerifyStatus = p.kind === "mismatched" ? p.differs ?? "metadata" : p.kind;
  return { ...base, key: p.key, status, detail: p.detail };
}

/**
 * The objects under the partition's root that are not a known copy: orphans (never deleted), and
 * one line per retired incarnation or generation still waiting for the sweep.
 */
function strangers(
  partition: string,
  root: string,
  state: PartitionState,
  keys: readonly string[],
): VerifyFinding[] {
  const out: VerifyFinding[] = [];
  const retired = new Map<string, number>();
  for (const key of keys) {
    const parsed = parseSegmentKey(root, key);
    const orphan = (detail: string): VerifyFinding => ({
      partition,
      segment: parsed?.start,
      status: "orphan",
      location: "remote",
      key,
      detail: `${detail}; verify deletes nothing`,
    });
    if (!parsed) {
      out.push(orphan("not a segment object tierd writes"));
      continue;
    }
    const dir = retiredKey(parsed.incarnation, parsed.generation);
    if (state.retired?.has(dir)) {
      retired.set(dir, (retired.get(dir) ?? 0) + 1);
      continue;
    }
    if (parsed.incarnation !== state.incarnation) {
      out.push(orphan(
        `incarnation ${incarnationHex(parsed.incarnation)} is not the journal's` +
          (state.incarnation === undefined ? " (it has none yet)" : ""),
      ));
      continue;
    }
    const rec = getSegment(state, parsed.generation, parsed.start);
    if (!rec) {
      out.push(
        orphan(
          `the journal has no record of segment ${parsed.start} in generation ${parsed.generation}`,
        ),
      );
    } else if (rec.state === "DELETE_SEGMENT_FINISHED") {
      out.push(orphan(
        `the journal recorded its deletion (${rec.deleteCause ?? "cleanup"}), yet it is there`,
      ));
    }
  }
  for (const [dir, count] of retired) {
    const r = state.retired!.get(dir)!;
    out.push({
      partition,
      status: "retired",
      location: "remote",
      key: `${root}${dir}/`,
      detail: `${count} objects of retired incarnation-generation ${dir} (${r.reason}), ` +
        "waiting for the orphan sweep",
    });
  }
  return out;
}

function byPlace(a: VerifyFinding, b: VerifyFinding): number {
  const sa = a.segment ?? -1n;
  const sb = b.segment ?? -1n;
  if (sa !== sb) return sa < sb ? -1 : 1;
  return (a.key ?? "").localeCompare(b.key ?? "");
}

/**
 * Reads the journal again: a difference about a segment whose record changed meanwhile (the
 * agent copied, evicted, deleted or cleaned it up while verify looked) is `changed`, not a
 * difference: what verify saw was the agent at work.
 */
async function recheckChanged(
  env: VerifyEnv,
  part: TieredPartition,
  findings: VerifyFinding[],
): Promise<void> {
  if (!findings.some((f) => DIFFERENCES.has(f.status) && f.status !== "error")) return;
  const after = await env.journals.state(part.id);
  if (!after) return;
  const before = part.state;
  for (const f of findings) {
    if (!DIFFERENCES.has(f.status) || f.status === "error" || f.key === undefined) continue;
    const parsed = parseSegmentKey(partitionRoot({ ...part.id, ...env.keySpace }), f.key);
    const moved = before.incarnation !== after.incarnation ||
      (parsed !== undefined &&
        !sameRecord(
          getSegment(before, parsed.generation, parsed.start),
          getSegment(after, parsed.generation, parsed.start),
        ));
    if (moved) {
      const now = parsed && getSegment(after, parsed.generation, parsed.start);
      f.detail = `was ${f.status} (${f.detail}); the journal changed while it was checked` +
        (now ? ` (now ${now.state}${now.evicted ? ", evicted" : ""})` : "") +
        ": the agent is at work, run verify again";
      f.status = "changed";
    }
  }
}

function sameRecord(a: SegmentRecord | undefined, b: SegmentRecord | undefined): boolean {
  if (!a || !b) return a === b;
  return a.state === b.state && a.since === b.since && a.evicted === b.evicted;
}
