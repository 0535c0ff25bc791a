// `tierd restore`: for a new, empty host. Rebuilds `state_dir` (journal, markers, kept index
// copies) from the bucket so the agent serves every retained offset; with data, also downloads
// each segment into the broker's (empty) partition directory so a broker can boot from it —
// point-in-time recovery of a topic. Every downloaded `.log` is checked against the checksum in
// its object's metadata before it is renamed into place. Idempotent and resumable: a complete
// file already in place is checked and kept, a half-written one is redone, and a journal that
// is already there is completed, not replaced.
import { mkdir, open, readdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Clock } from "../../providers/clock.ts";
import type { RetryingStore } from "../../providers/retrying_store.ts";
import { listAll, type ObjectStore } from "../../providers/types.ts";
import type { Config } from "../config/schema.ts";
import { tieredTopic } from "../config/topics.ts";
import { createXxh128Stream, hex128 } from "../hash.ts";
import { clusterRoot, partitionRoot } from "../layout/object_keys.ts";
import {
  incarnationHex,
  type PartitionId,
  partitionLabel,
  partitionRelPath,
  segmentStem,
} from "../layout/partition.ts";
import type { Logger } from "../log.ts";
import { fsyncDir } from "../state/durable.ts";
import { copyFinishedEvent, type JournalEvent } from "../state/events.ts";
import { getSegment, segmentsOf } from "../state/segment_state.ts";
import { computeFloor, floorBeforeFirstCopy } from "../tier/policy.ts";
import { hashFile } from "../tier/file_hash.ts";
import { type KeySpace, PartitionLedger } from "../tier/partition_ledger.ts";
import {
  headSegments,
  type InventoryProblem,
  listRemoteGenerations,
  type RemoteSegment,
} from "../tier/remote_inventory.ts";
import { forEachBounded } from "../../providers/concurrency.ts";

/** What one partition's restore did. */
export interface PartitionRestore {
  partition: string;
  incarnation: bigint;
  generation: bigint;
  segments: number;
  bytes: number;
  /** Segments downloaded now (with data). */
  downloaded: number;
  /** Segments already in place and checked (a resumed restore). */
  kept: number;
  problems: InventoryProblem[];
}

/** Reports each segment as it is done. */
export type RestoreProgress = (
  partition: string,
  done: { segments: number; total: number; bytes: number; totalBytes: number },
  segment: bigint,
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
  progress?: RestoreProgress;
}

/** A restore that cannot go on for a reason the operator must fix. */
export class RestoreRefused extends Error {
  override readonly name = "RestoreRefused";
}

/** Bytes fetched per ranged GET while downloading a segment. */
const DOWNLOAD_PIECE = 8 * 1024 * 1024;
/** Index copies fetched at once. */
const INDEX_CONCURRENCY = 8;

/**
 * Restores every tiered partition the bucket holds (that `filter` accepts).
 * @throws {RestoreRefused} when a broker partition directory to fill is not empty
 */
export async function restore(o: RestoreOptions): Promise<PartitionRestore[]> {
  const deadline = o.store.deadline(Infinity);
  try {
    const store = o.store.within(deadline, "housekeeping");
    const ids = (await remotePartitions(store, o.keySpace)).filter((id) =>
      tieredTopic(o.config, id) !== undefined && o.filter(id)
    );
    const out: PartitionRestore[] = [];
    for (const id of ids) out.push(await restorePartition(o, store, id));
    return out;
  } finally {
    deadline.dispose();
  }
}

/** The partitions the bucket holds objects for, from the manifests (or, lacking any, a listing). */
async function remotePartitions(store: ObjectStore, keySpace: KeySpace): Promise<PartitionId[]> {
  const root = clusterRoot(keySpace);
  const ids = new Map<string, PartitionId>();
  const add = (m: RegExpExecArray | null) => {
    if (!m) return;
    const id = { stream: Number(m[1]), topic: Number(m[2]), partition: Number(m[3]) };
    ids.set(partitionLabel(id), id);
  };
  for (const o of await listAll(store, `${root}meta/`)) {
    add(
      /^meta\/(\d+)\/(\d+)\/(\d+)\/[0-9a-f]{16}-\d+\/manifest\.json$/.exec(
        o.key.slice(root.length),
      ),
    );
  }
  if (ids.size === 0) {
    for (const o of await listAll(store, root)) {
      add(/^(\d+)\/(\d+)\/(\d+)\/[0-9a-f]{16}-\d+\/\d{20}\.log$/.exec(o.key.slice(root.length)));
    }
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
  const gens = await listRemoteGenerations(store, partitionRoot({ ...id, ...o.keySpace }));
  if (gens.length === 0) {
    return {
      partition: label,
      incarnation: 0n,
      generation: 0n,
      segments: 0,
      bytes: 0,
      downloaded: 0,
      kept: 0,
      problems: [],
    };
  }
  // The newest incarnation, at its highest generation.
  const newest = gens[0].incarnation;
  const gen = gens.filter((g) => g.incarnation === newest).reduce((a, b) =>
    b.generation > a.generation ? b : a
  );
  const { segments, problems } = await headSegments(store, gen);
  for (const p of problems) {
    o.logger.error("remote object not usable; not restored", { key: p.key, reason: p.reason });
  }
  const dir = join(o.config.agent.data_dir, partitionRelPath(id));
  const result: PartitionRestore = {
    partition: label,
    incarnation: gen.incarnation,
    generation: gen.generation,
    segments: segments.length,
    bytes: segments.reduce((n, s) => n + s.facts.size, 0),
    downloaded: 0,
    kept: 0,
    problems,
  };
  let identity = { device: 0, inode: 0 };
  if (o.withData) {
    await prepareDir(dir, segments);
    const st = await stat(dir);
    identity = { device: st.dev, inode: st.ino };
    let done = 0;
    let bytes = 0;
    for (const seg of segments) {
      if (await download(store, dir, seg)) result.downloaded++;
      else result.kept++;
      done++;
      bytes += seg.facts.size;
      o.progress?.(
        label,
        { segments: done, total: segments.length, bytes, totalBytes: result.bytes },
        seg.start,
      );
    }
    await fsyncDir(dir);
  }
  await writeState(o, store, id, gen.incarnation, gen.generation, identity, segments);
  if (!o.withData) {
    o.progress?.(
      label,
      { segments: segments.length, total: segments.length, bytes: 0, totalBytes: 0 },
      segments.at(-1)?.start ?? 0n,
    );
  }
  o.logger.info("partition restored", {
    partition: label,
    incarnation: incarnationHex(gen.incarnation),
    generation: gen.generation,
    segments: result.segments,
    downloaded: result.downloaded,
    kept: result.kept,
    with_data: o.withData,
  });
  return result;
}

/**
 * The broker partition directory must be new or hold only what an earlier, interrupted restore
 * of these same segments wrote (files named after them, and temp files).
 */
async function prepareDir(dir: string, segments: readonly RemoteSegment[]): Promise<void> {
  await mkdir(dir, { recursive: true });
  const ours = new Set(segments.flatMap((s) => {
    const stem = segmentStem(s.start);
    return [`${stem}.log`, `${stem}.index`];
  }));
  const strangers = (await readdir(dir)).filter((n) => !ours.has(n) && !n.endsWith(".restore"));
  if (strangers.length > 0) {
    throw new RestoreRefused(
      `${dir} is not empty (${strangers.slice(0, 3).join(", ")}${
        strangers.length > 3 ? ", …" : ""
      }): restore --with-data writes only into an empty partition directory`,
    );
  }
}

/**
 * Downloads one segment's `.log` (checked against its metadata checksum) and `.index` into
 * `dir` via temp files; a `.log` already there with the right size and checksum is kept.
 * @returns true when it was downloaded, false when it was already in place
 */
async function download(store: ObjectStore, dir: string, seg: RemoteSegment): Promise<boolean> {
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
  await fetchTo(store, seg.keys.log, seg.facts.size, logPath, seg.facts.checksum);
  await fetchTo(store, seg.keys.index, seg.facts.indexSize, indexPath);
  return true;
}

/** Fetches an object in ranged pieces into `path` (temp file, fsync, rename). */
async function fetchTo(
  store: ObjectStore,
  key: string,
  size: number,
  path: string,
  checksum?: bigint,
): Promise<void> {
  const tmp = `${path}.restore`;
  await rm(tmp, { force: true });
  const fh = await open(tmp, "w");
  const hasher = checksum === undefined ? undefined : await createXxh128Stream();
  try {
    for (let at = 0; at < size; at += DOWNLOAD_PIECE) {
      const length = Math.min(DOWNLOAD_PIECE, size - at);
      const { bytes } = await store.get(key, { range: { start: at, length } });
      if (bytes.length !== length) {
        throw new Error(`${key}: got ${bytes.length} bytes at ${at}, expected ${length}`);
      }
      hasher?.update(bytes);
      let written = 0;
      while (written < bytes.length) {
        written += (await fh.write(bytes, written, bytes.length - written, at + written))
          .bytesWritten;
      }
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
  if (hasher && checksum !== undefined) {
    const got = hasher.digest();
    if (got !== checksum) {
      await rm(tmp, { force: true });
      throw new Error(
        `${key}: downloaded bytes hash to ${hex128(got)}, the object's metadata says ${
          hex128(checksum)
        }; not restored`,
      );
    }
  }
  await rename(tmp, path);
}

/**
 * Writes (or completes) the partition's journal: incarnation, generation, a verified copy per
 * segment — evicted, with its marker and kept index copy, when its data was not restored.
 */
async function writeState(
  o: RestoreOptions,
  store: ObjectStore,
  id: PartitionId,
  incarnation: bigint,
  generation: bigint,
  identity: { device: number; inode: number },
  segments: readonly RemoteSegment[],
): Promise<void> {
  const ledger = await PartitionLedger.open(o.config.agent.state_dir, id, o.keySpace);
  try {
    const at = o.clock.now();
    const s = ledger.state;
    if (s.incarnation !== undefined && s.incarnation !== incarnation) {
      throw new RestoreRefused(
        `state for ${partitionLabel(id)} already names incarnation ${
          s.incarnation.toString(16)
        }, the bucket's newest is ${
          incarnation.toString(16)
        }; restore only into an empty state_dir`,
      );
    }
    const events: JournalEvent[] = [];
    if (s.incarnation === undefined || s.device !== identity.device || s.inode !== identity.inode) {
      events.push({ type: "incarnation", incarnation, ...identity, at });
    }
    if (generation > s.generation) events.push({ type: "generation", generation, at });
    if (events.length > 0) await ledger.record(...events);
    const more: JournalEvent[] = [];
    // With data, the last segment is left unrecorded: a broker booting from the directory may
    // go on appending to it, and then it is a different segment; once sealed it is copied (or
    // found already there) like any other.
    const recorded = o.withData ? segments.slice(0, -1) : segments;
    for (const seg of recorded) {
      if (getSegment(ledger.state, generation, seg.start)) continue;
      more.push(
        { type: "copy_started", segment: seg.start, generation, at },
        copyFinishedEvent(seg.start, generation, seg.facts, at),
      );
      if (!o.withData) more.push({ type: "evicted", segment: seg.start, generation, at });
    }
    if (more.length > 0) await ledger.record(...more);
    const base = floorBeforeFirstCopy(segments.map((s) => s.start), ledger.state.floor);
    const floor = computeFloor(
      segmentsOf(ledger.state).map((r) => ({
        start: r.start,
        endOffset: r.meta?.endOffset,
        copied: r.state === "COPY_SEGMENT_FINISHED",
        lost: false,
      })),
      base,
    );
    if (floor > ledger.state.floor) {
      await ledger.record({ type: "floor", generation, tieredUpTo: floor, at });
    }
    if (!o.withData) {
      await forEachBounded(segments, INDEX_CONCURRENCY, async (seg) => {
        const rec = getSegment(ledger.state, generation, seg.start);
        if (!rec?.evicted) return;
        const index = await store.get(seg.keys.index);
        await ledger.writeIndexCopy(seg.start, index.bytes);
        await ledger.writeMarker(rec);
      });
    }
    await ledger.compact(o.clock.now());
  } finally {
    await ledger.close();
  }
}
