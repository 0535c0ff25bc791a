// `tierd restore`: for a new, empty host. Rebuilds `state_dir` (journal, markers, kept index
// copies) from the bucket so the agent serves every retained offset; with data, also downloads
// each segment into the broker's (empty) partition directory, and an empty active segment after
// them (./broker_dir.ts), so a broker can boot from it and append without touching a restored
// segment — point-in-time recovery of a topic.
//
// Which incarnation and generation is a partition's is decided by evidence, never by date
// (../tier/remote_candidates.ts): retired ones and other agents' are not candidates; when several
// remain they are listed and the partition is left alone unless the operator names one. Every
// good segment of every partition is restored; each hole (a segment the manifest lists that is
// gone, an object whose metadata lies or whose bytes are another segment's, offsets no object
// covers) is reported with its reason and journaled as a hole, so reads answer it as a gap and
// nothing after it is evicted until it is settled. The result says whether all of it came back.
//
// Every downloaded `.log` is checked against the checksum in its object's metadata before it is
// renamed into place. Idempotent and resumable: a complete file already in place is checked and
// kept, a half-written one is redone, a journal that is already there is completed, not
// replaced, and a hole whose object is good now is filled.
import { open, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Clock } from "../base/clock.ts";
import { listBounded, type ListingProgress } from "../../providers/listing.ts";
import type { RetryingStore } from "../../providers/retrying_store.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import type { Config } from "../config/schema.ts";
import { tieredTopic } from "../config/topics.ts";
import { createXxh128Stream, hex128 } from "../hash.ts";
import { clusterRoot } from "../layout/object_keys.ts";
import {
  incarnationHex,
  type PartitionId,
  partitionLabel,
  partitionRelPath,
  segmentStem,
} from "../layout/partition.ts";
import { BrokerPresence } from "../tier/broker_presence.ts";
import type { Logger } from "../log.ts";
import { fsyncDir } from "../base/durable.ts";
import type { JournalEvent } from "../state/events.ts";
import { segmentsOf } from "../state/segment_state.ts";
import { bucketEvents, recordedStarts, writeEvictedEvidence } from "../tier/bucket_records.ts";
import { computeFloor, floorBeforeFirstCopy } from "../tier/policy.ts";
import { hashFile } from "../tier/file_hash.ts";
import { type KeySpace, PartitionLedger } from "../tier/partition_ledger.ts";
import {
  type Candidate,
  type CandidateSet,
  chooseCandidate,
  describeCandidate,
  findCandidates,
  type NamedCandidate,
} from "../tier/remote_candidates.ts";
import { judgeIncarnation } from "../tier/incarnation_evidence.ts";
import { knownSegment, localPrefixHash } from "../tier/rebuild.ts";
import { listSegments, type SegmentFiles } from "../partition/segments.ts";
import { headSegments, type RemoteSegment } from "../tier/remote_inventory.ts";
import {
  activeSegmentStart,
  BrokerDirNotEmpty,
  prepareBrokerDir,
  writeActiveSegment,
} from "./broker_dir.ts";
import { describeHole, findHoles, type Hole, sortProblems } from "./holes.ts";

/** How one partition's restore ended. */
export type RestoreOutcome =
  /** Every segment the chosen generation should hold came back. */
  | "restored"
  /** Restored with holes (reported): reads answer them as gaps. */
  | "partial"
  /** Several incarnations or generations compete; nothing restored (name one). */
  | "competing"
  /** The bucket holds nothing of this key space's for it (all retired or foreign). */
  | "nothing"
  /** A store or local failure stopped it; run restore again. */
  | "failed";

/** What one partition's restore did. */
export interface PartitionRestore {
  partition: string;
  outcome: RestoreOutcome;
  incarnation?: bigint;
  generation?: bigint;
  /** Why this incarnation and generation (the evidence). */
  chosen?: string;
  /** Segments restored (recorded as verified copies; with data, also downloaded or kept). */
  segments: number;
  bytes: number;
  /** Segments downloaded now (with data). */
  downloaded: number;
  /** Segments already in place and checked (a resumed restore). */
  kept: number;
  /**
   * With data: where the empty active segment was put, after the last restored one (the broker
   * appends there); undefined when the bucket lacks offsets past the last restored segment.
   */
  activeStart?: bigint;
  holes: Hole[];
  /** Holes recorded as lost on the operator's word (`--accept-holes`). */
  accepted: number;
  /** The candidates, in words, when several compete. */
  competing: string[];
  /** Generations set aside, in words, with why. */
  excluded: string[];
  /** Half-written copies at the end of the chain (a copy cut off), ignored, in words. */
  unfinished: string[];
  /** What stopped a failed restore. */
  error?: string;
}

/**
 * Reports each segment as it is done, and (`partial`) the bytes of one being downloaded, piece
 * by piece, so a big segment moves the progress while it comes.
 */
export type RestoreProgress = (
  partition: string,
  done: { segments: number; total: number; bytes: number; totalBytes: number },
  segment: bigint,
  partial?: boolean,
) => void;

/** Options of {@linkcode restore}. */
export interface RestoreOptions {
  config: Config;
  store: RetryingStore;
  keySpace: KeySpace;
  clock: Clock;
  logger: Logger;
  /** Only partitions this accepts (from `--stream/--topic/--partition`). */
  filter: (id: PartitionId) => boolean;
  /** Also download the segments into the broker's data dir. */
  withData: boolean;
  /** The store in words, for errors. */
  describe?: string;
  /** Agents whose manifests are this key space's (the owner record's lineage). */
  lineage?: ReadonlySet<string>;
  /** The operator's choice (`--incarnation`, `--generation`), for a single partition. */
  named?: NamedCandidate;
  /** Record every hole as lost (`--accept-holes`): reads skip it, eviction goes on. */
  acceptHoles?: boolean;
  progress?: RestoreProgress;
  /** Reports the pages and keys of each listing as they arrive. */
  listing?: (prefix: string, progress: ListingProgress) => void;
}

/** A restore that cannot go on for a reason the operator must fix. */
export class RestoreRefused extends Error {
  override readonly name = "RestoreRefused";
}

/** A downloaded object that is not what its metadata says: a hole, not a failure. */
class BadObject extends Error {
  override readonly name = "BadObject";
}

/** Bytes fetched per ranged GET while downloading a segment. */
const DOWNLOAD_PIECE = 8 * 1024 * 1024;
/** Index copies fetched at once. */
const INDEX_CONCURRENCY = 8;
/** A whole cluster's listing may hold this many keys (partition listings keep the default). */
const CLUSTER_MAX_KEYS = 20_000_000;

/**
 * Lists the tiered partitions the bucket holds (that `filter` accepts), read-only.
 * @throws {StoreError} when the store fails or a listing is endless
 */
export async function partitionsToRestore(o: RestoreOptions): Promise<PartitionId[]> {
  const deadline = o.store.deadline(Infinity);
  try {
    const store = o.store.within(deadline, "housekeeping");
    return (await remotePartitions(store, o)).filter((id) =>
      tieredTopic(o.config, id) !== undefined && o.filter(id)
    );
  } finally {
    deadline.dispose();
  }
}

/**
 * Restores every partition of `ids`, each on its own: one that fails or competes does not stop
 * the others.
 * @throws {RestoreRefused} with data, when a broker runs beside the data dir or a partition
 *   directory to fill is not empty; when the state dir already belongs to another incarnation
 */
export async function restore(
  o: RestoreOptions,
  ids: readonly PartitionId[],
): Promise<PartitionRestore[]> {
  if (o.withData) await refuseRunningBroker(o.config.agent.data_dir);
  const deadline = o.store.deadline(Infinity);
  try {
    const store = o.store.within(deadline, "housekeeping");
    const out: PartitionRestore[] = [];
    for (const id of ids) {
      try {
        out.push(await restorePartition(o, store, id));
      } catch (err) {
        if (err instanceof RestoreRefused) throw err;
        const label = partitionLabel(id);
        o.logger.error("partition not restored", { partition: label, err });
        out.push({ ...emptyResult(label), outcome: "failed", error: (err as Error).message });
      }
    }
    return out;
  } finally {
    deadline.dispose();
  }
}

/**
 * A broker running on the data dir holds its partitions open and appends to them: files written
 * beneath it are not what it serves, and what it writes meanwhile is lost at its next boot.
 */
async function refuseRunningBroker(dataDir: string): Promise<void> {
  const seen = await new BrokerPresence({ dataDir }).check();
  if (seen.running) {
    throw new RestoreRefused(
      `a broker is running on ${dataDir} (${seen.evidence}): stop it before restore --with-data, ` +
        "which writes its partition directories",
    );
  }
}

function emptyResult(partition: string): PartitionRestore {
  return {
    partition,
    outcome: "nothing",
    segments: 0,
    bytes: 0,
    downloaded: 0,
    kept: 0,
    holes: [],
    accepted: 0,
    competing: [],
    excluded: [],
    unfinished: [],
  };
}

/** The partitions the bucket holds manifests or segment objects for. */
async function remotePartitions(store: ObjectStore, o: RestoreOptions): Promise<PartitionId[]> {
  const root = clusterRoot(o.keySpace);
  const ids = new Map<string, PartitionId>();
  const add = (m: RegExpExecArray | null) => {
    if (!m) return;
    const id = { stream: Number(m[1]), topic: Number(m[2]), partition: Number(m[3]) };
    if ([id.stream, id.topic, id.partition].every(Number.isSafeInteger)) {
      ids.set(partitionLabel(id), id);
    }
  };
  // Objects and manifests both: a partition copied since the last manifest has only objects.
  const listed = await listBounded(store, root, {
    clock: o.clock,
    describe: o.describe,
    maxKeys: CLUSTER_MAX_KEYS,
    maxPages: CLUSTER_MAX_KEYS / 100,
    onPage: (p) => o.listing?.(root, p),
  });
  for (const { key } of listed) {
    const rel = key.slice(root.length);
    add(/^meta\/(\d+)\/(\d+)\/(\d+)\/[0-9a-f]{16}-\d+\/manifest\.json$/.exec(rel));
    add(/^(\d+)\/(\d+)\/(\d+)\/[0-9a-f]{16}-\d+\/\d{20}\.(?:log|index)$/.exec(rel));
  }
  return [...ids.values()].sort((a, b) =>
    a.stream - b.stream || a.topic - b.topic || a.partition - b.partition
  );
}

async function restorePartition(
  o: RestoreOptions,
  store: ObjectStore,
  id: PartitionId,
): Promise<PartitionRestore> {
  const label = partitionLabel(id);
  const result = emptyResult(label);
  const found = await findCandidates(store, o.keySpace, id, {
    lineage: o.lineage,
    listing: {
      clock: o.clock,
      describe: o.describe,
      onPage: (p) => o.listing?.(`partition ${label}`, p),
    },
  });
  // The broker's own segments, when its directory survived (restore without data).
  const brokerLocal = o.withData ? [] : await brokerSegments(o, id);
  const set = brokerLocal.length === 0
    ? found
    : await checkedAgainstBroker(o, store, id, found, brokerLocal);
  result.excluded = set.excluded.map((e) => `${describeCandidate(e.candidate)}: ${e.reason}`);
  for (const e of set.excluded) {
    o.logger.info("not a candidate for the partition", {
      partition: label,
      candidate: describeCandidate(e.candidate),
      reason: e.reason,
    });
  }
  const choice = chooseCandidate(set, o.named);
  switch (choice.kind) {
    case "none":
      return result;
    case "not-found":
      throw new RestoreRefused(
        `${label}: the bucket holds no incarnation ${
          choice.named.incarnation === undefined
            ? "(any)"
            : incarnationHex(choice.named.incarnation)
        } generation ${choice.named.generation ?? "(any)"} for this partition`,
      );
    case "competing":
      result.outcome = "competing";
      result.competing = choice.candidates.map(describeCandidate);
      o.logger.error("several incarnations or generations compete; partition not restored", {
        partition: label,
        candidates: result.competing,
      });
      return result;
  }
  const chosen = choice.candidate;
  result.incarnation = chosen.incarnation;
  result.generation = chosen.generation;
  result.chosen = choice.why;
  const { segments, problems } = await headSegments(store, chosen.objects);
  const sorted = sortProblems(
    problems,
    segments.map((s) => ({ start: s.start, end: s.facts.endOffset })),
    chosen.manifest,
  );
  const bad = new Map(sorted.bad.map((b) => [b.start, b]));
  for (const p of sorted.damaged) {
    o.logger.error("remote object not usable; its offsets are a hole", {
      key: p.key,
      reason: p.reason,
    });
  }
  for (const u of sorted.unfinished) {
    result.unfinished.push(`${u.key}: ${u.reason}`);
    o.logger.warn(
      "an unfinished copy at the end of the partition (never verified by its owner): not a " +
        "hole; the broker's segment is copied again",
      { key: u.key, reason: u.reason },
    );
  }
  const dir = join(o.config.agent.data_dir, partitionRelPath(id));
  let good = segments;
  let identity = { device: 0, inode: 0 };
  if (o.withData) {
    const last = segments.at(-1);
    const removed = await prepareBrokerDir(dir, [
      ...segments.map((s) => s.start),
      ...(last ? [last.facts.endOffset + 1n] : []),
    ]).catch((err) => {
      throw err instanceof BrokerDirNotEmpty ? new RestoreRefused(err.message) : err;
    });
    if (removed.length > 0) {
      o.logger.info("removed the empty segment files the broker made for a new partition", {
        partition: label,
        files: removed,
      });
    }
    const st = await stat(dir);
    identity = { device: st.dev, inode: st.ino };
    const totalBytes = segments.reduce((n, s) => n + s.facts.size, 0);
    const kept: RemoteSegment[] = [];
    let done = 0;
    let bytes = 0;
    for (const seg of segments) {
      const piece = (got: number) =>
        o.progress?.(
          label,
          { segments: done, total: segments.length, bytes: bytes + got, totalBytes },
          seg.start,
          true,
        );
      try {
        if (await download(store, dir, seg, piece)) result.downloaded++;
        else result.kept++;
        kept.push(seg);
      } catch (err) {
        if (!(err instanceof BadObject)) throw err;
        bad.set(seg.start, { start: seg.start, end: seg.facts.endOffset, reason: err.message });
        o.logger.error("remote object not usable; its offsets are a hole", {
          key: seg.keys.log,
          reason: err.message,
        });
      }
      done++;
      bytes += seg.facts.size;
      o.progress?.(label, { segments: done, total: segments.length, bytes, totalBytes }, seg.start);
    }
    good = kept;
  }
  const report = findHoles({
    good: good.map((s) => ({ start: s.start, end: s.facts.endOffset })),
    bad: [...bad.values()],
    manifest: chosen.manifest,
  });
  if (o.withData) {
    result.activeStart = activeSegmentStart(
      good.map((s) => ({ start: s.start, end: s.facts.endOffset })),
      [...report.holes, ...report.lost].map((h) => h.from),
    );
    if (result.activeStart !== undefined) await writeActiveSegment(dir, result.activeStart);
    else if (good.length > 0) {
      o.logger.warn(
        "no empty active segment written: the bucket lacks offsets after the last restored " +
          "segment, which a broker booting now would append to",
        { partition: label, segment: good.at(-1)!.start },
      );
    }
    await fsyncDir(dir);
  }
  result.holes = report.holes;
  result.segments = good.length;
  result.bytes = good.reduce((n, s) => n + s.facts.size, 0);
  const localStarts = new Set(brokerLocal.map((l) => l.start));
  result.accepted = await writeState(o, store, id, chosen, identity, good, report, {
    brokerHas: localStarts,
    lastIsActive: o.withData && result.activeStart === undefined,
  });
  result.outcome = report.holes.length > result.accepted ? "partial" : "restored";
  if (!o.withData) {
    o.progress?.(
      label,
      { segments: good.length, total: good.length, bytes: 0, totalBytes: 0 },
      good.at(-1)?.start ?? 0n,
    );
  }
  for (const h of report.holes) {
    o.logger.error(
      o.acceptHoles ? "hole recorded as lost (--accept-holes)" : "hole: the bucket lacks a copy",
      { partition: label, hole: describeHole(h) },
    );
  }
  o.logger.info("partition restored", {
    partition: label,
    incarnation: incarnationHex(chosen.incarnation),
    generation: chosen.generation,
    chosen: choice.why,
    segments: result.segments,
    holes: result.holes.length,
    downloaded: result.downloaded,
    kept: result.kept,
    with_data: o.withData,
    ...(result.activeStart !== undefined && { active_segment: result.activeStart }),
  });
  return result;
}

/**
 * Where the broker's partition directory already holds segments (its state dir was lost, its
 * data was not), they are evidence too, as at boot: a candidate whose copies the local bytes
 * contradict is not this partition (restoring it would have the agent take the directory for a
 * recreated topic and retire the copies).
 */
async function checkedAgainstBroker(
  o: RestoreOptions,
  store: ObjectStore,
  id: PartitionId,
  set: CandidateSet,
  local: readonly SegmentFiles[],
): Promise<CandidateSet> {
  const dir = join(o.config.agent.data_dir, partitionRelPath(id));
  const eligible: Candidate[] = [];
  const excluded = [...set.excluded];
  for (const c of set.eligible) {
    const { segments } = await headSegments(store, c.objects);
    const verdict = await judgeIncarnation(
      local.map((l) => l.start),
      segments.map(knownSegment),
      localPrefixHash(local),
      "bucket",
    );
    if (verdict.verdict === "different") {
      excluded.push({
        candidate: c,
        reason: `the broker's directory ${dir} holds other bytes: ${verdict.reason}`,
      });
    } else eligible.push(c);
  }
  return { eligible, excluded };
}

/** The segments of the broker's partition directory, if it exists. */
async function brokerSegments(o: RestoreOptions, id: PartitionId): Promise<SegmentFiles[]> {
  const dir = join(o.config.agent.data_dir, partitionRelPath(id));
  return await listSegments(dir, {
    now: o.clock.now(),
    quiescenceMs: o.config.agent.seal_quiescence,
  }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT" || err.code === "ENOTDIR") return [];
    throw err;
  });
}

/**
 * Downloads one segment's `.log` (checked against its metadata checksum) and `.index` into
 * `dir` via temp files; a `.log` already there with the right size and checksum is kept.
 * @returns true when it was downloaded, false when it was already in place
 * @throws {BadObject} when the object is not what its metadata says (gone, short, other bytes)
 */
async function download(
  store: ObjectStore,
  dir: string,
  seg: RemoteSegment,
  onBytes?: (got: number) => void,
): Promise<boolean> {
  const stem = segmentStem(seg.start);
  const logPath = join(dir, `${stem}.log`);
  const indexPath = join(dir, `${stem}.index`);
  const inPlace = await stat(logPath).catch(() => undefined);
  const indexInPlace = await stat(indexPath).catch(() => undefined);
  if (
    inPlace?.size === seg.facts.size && indexInPlace?.size === seg.facts.indexSize &&
    await hashFile(logPath) === seg.facts.checksum
  ) {
    return false;
  }
  try {
    await fetchTo(store, seg.keys.log, seg.facts.size, logPath, seg.facts.checksum, onBytes);
    await fetchTo(store, seg.keys.index, seg.facts.indexSize, indexPath);
  } catch (err) {
    await rm(logPath, { force: true });
    await rm(indexPath, { force: true });
    if (err instanceof BadObject) throw err;
    if (err instanceof StoreError && (err.kind === "NotFound" || err.kind === "InvalidRange")) {
      throw new BadObject(`${err.detail.key ?? seg.keys.log}: ${err.message}`);
    }
    throw err;
  }
  return true;
}

/** Fetches an object in ranged pieces into `path` (temp file, fsync, rename). */
async function fetchTo(
  store: ObjectStore,
  key: string,
  size: number,
  path: string,
  checksum?: bigint,
  onBytes?: (got: number) => void,
): Promise<void> {
  const tmp = `${path}.restore`;
  await rm(tmp, { force: true });
  const fh = await open(tmp, "w");
  const hasher = checksum === undefined ? undefined : await createXxh128Stream();
  try {
    for (let at = 0; at < size; at += DOWNLOAD_PIECE) {
      const length = Math.min(DOWNLOAD_PIECE, size - at);
      const got = await store.get(key, { range: { start: at, length } });
      if (got.bytes.length !== length || got.size !== size) {
        throw new BadObject(
          `${key}: ${got.bytes.length} bytes at ${at} of an object of ${got.size}, expected ` +
            `${length} of ${size} (the object is not the size its metadata says)`,
        );
      }
      hasher?.update(got.bytes);
      let written = 0;
      while (written < got.bytes.length) {
        written += (await fh.write(got.bytes, written, got.bytes.length - written, at + written))
          .bytesWritten;
      }
      onBytes?.(at + length);
    }
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  if (hasher && checksum !== undefined) {
    const got = hasher.digest();
    if (got !== checksum) {
      await rm(tmp, { force: true });
      throw new BadObject(
        `${key}: downloaded bytes hash to ${hex128(got)}, the object's metadata says ${
          hex128(checksum)
        } (another segment's bytes, or damaged)`,
      );
    }
  }
  await rename(tmp, path);
}

/**
 * Writes (or completes) the partition's journal: incarnation, generation, a verified copy per
 * good segment — evicted, with its marker and kept index copy, when its data was not restored —
 * a hole per hole (or, with `acceptHoles`, a recorded loss), and the manifest's lost ranges.
 * @returns how many holes were recorded as lost on the operator's word
 */
async function writeState(
  o: RestoreOptions,
  store: ObjectStore,
  id: PartitionId,
  chosen: Candidate,
  identity: { device: number; inode: number },
  segments: readonly RemoteSegment[],
  report: { holes: Hole[]; lost: { from: bigint; to: bigint }[] },
  local: {
    /** Starts of the segments the broker's directory held before (restore without data). */
    brokerHas: ReadonlySet<bigint>;
    /** The last restored segment is where the broker will append (no empty one after it). */
    lastIsActive: boolean;
  },
): Promise<number> {
  const { incarnation, generation } = chosen;
  const ledger = await PartitionLedger.open(o.config.agent.state_dir, id, o.keySpace);
  let accepted = 0;
  try {
    const at = o.clock.now();
    const s = ledger.state;
    if (s.incarnation !== undefined && s.incarnation !== incarnation) {
      throw new RestoreRefused(
        `state for ${partitionLabel(id)} already names incarnation ${
          incarnationHex(s.incarnation)
        }, the bucket's chosen one is ${
          incarnationHex(incarnation)
        }; restore only into an empty state_dir`,
      );
    }
    const events: JournalEvent[] = [];
    if (s.incarnation === undefined || s.device !== identity.device || s.inode !== identity.inode) {
      events.push({ type: "incarnation", incarnation, ...identity, at });
    }
    if (generation > s.generation) events.push({ type: "generation", generation, at });
    if (events.length > 0) await ledger.record(...events);
    // With data, every restored segment is sealed (an empty active one follows it) — but where
    // no active one could be written, the last is left unrecorded: a broker booting from the
    // directory appends to it, and then it is a different segment; once sealed it is copied (or
    // found already there) like any other.
    const found = {
      segments: local.lastIsActive ? segments.slice(0, -1) : segments,
      holes: report.holes,
      lost: report.lost,
    };
    const recorded = bucketEvents(ledger.state, generation, found, {
      at,
      // Without data, a copy is evicted — unless the broker's directory still holds it.
      kept: (start) => o.withData || local.brokerHas.has(start),
      holesAsLost: o.acceptHoles,
    });
    accepted = recorded.accepted;
    if (recorded.events.length > 0) await ledger.record(...recorded.events);
    const base = floorBeforeFirstCopy(
      recordedStarts({ segments, holes: report.holes, lost: report.lost }),
      ledger.state.floor,
    );
    const floor = computeFloor(
      segmentsOf(ledger.state).map((r) => ({
        start: r.start,
        endOffset: r.meta?.endOffset ?? r.lostEndOffset,
        copied: r.state === "COPY_SEGMENT_FINISHED",
        lost: r.state === "LOST_BEFORE_UPLOAD",
      })),
      base,
    );
    if (floor > ledger.state.floor) {
      await ledger.record({ type: "floor", generation, tieredUpTo: floor, at });
    }
    if (!o.withData) {
      await writeEvictedEvidence(ledger, store, generation, segments, INDEX_CONCURRENCY);
    }
    await ledger.compact(o.clock.now());
  } finally {
    await ledger.close();
  }
  return accepted;
}
