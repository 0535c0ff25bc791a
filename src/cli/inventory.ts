// What the CLI knows of the tiered partitions without the agent: each partition's segments, from
// the broker's directory and the journal (read-only: the agent may be running), with each
// segment's state and where its bytes are. `tierd ls` prints it; `tierd run --once` sizes its
// copy backlog from it for the progress line.
import { systemClock } from "../base/clock.ts";
import type { Config } from "../config/schema.ts";
import { tieredTopic } from "../config/topics.ts";
import { incarnationHex, type PartitionId, partitionLabel } from "../layout/partition.ts";
import { discoverPartitions } from "../partition/discover.ts";
import { listSegments } from "../partition/segments.ts";
import { JournalStateReader } from "../read/state_source.ts";
import { emptyState, type PartitionState, segmentsOf } from "../state/segment_state.ts";
import { filterAccepts, type PartitionFilter } from "./args.ts";

export type { PartitionFilter } from "./args.ts";

/** Where a segment's bytes are. */
export type Location = "local" | "remote" | "local+remote" | "-";

/** One segment of a partition, as `ls` shows it. */
export interface SegmentEntry {
  start: bigint;
  /** Inclusive end offset, when the journal knows it. */
  end?: bigint;
  /** The journal state, or `LOCAL (sealed)` / `LOCAL (active)` for a segment without a record. */
  state: string;
  location: Location;
  /** Bytes of the `.log`: the copy's size when there is one, else the local file's. */
  bytes: number;
  /** A local, sealed segment without a verified copy: the next pass copies it. */
  pendingCopy: boolean;
  /** Local bytes (0 when the broker's file is gone). */
  localBytes: number;
}

/** One tiered partition. */
export interface PartitionEntry {
  id: PartitionId;
  /** `stream/topic/partition`. */
  label: string;
  /** 16 hex digits, or `-` before the first pass. */
  incarnation: string;
  generation: bigint;
  /** `tiered_up_to_offset`; -1 before the first copy. */
  floor: bigint;
  segments: SegmentEntry[];
}

/** A tiered partition, found on the broker or only in tierd's state, with its journal state. */
export interface TieredPartition {
  id: PartitionId;
  /** `stream/topic/partition`. */
  label: string;
  /** The broker's partition directory; undefined when only tierd's state knows the partition. */
  dir?: string;
  /** The directory's device and inode (broker partitions only). */
  device?: number;
  inode?: number;
  /** The folded journal, read-only; an empty state for a broker partition without one. */
  state: PartitionState;
}

/**
 * The tiered partitions `filter` accepts, in id order, each with its journal read read-only
 * (the agent may be running and appending): the broker's partition directories under
 * `agent.data_dir`, and the partitions only tierd's state knows (a journal under
 * `agent.state_dir` without a broker directory: after a state-only restore, or once the broker
 * dropped the partition). `ls`, `verify` and `plan` select their partitions with it.
 *
 * @param config a loaded config
 * @param filter stream, topic and partition to keep
 * @param journals where the journals are read (one reader re-reads only what changed)
 * @throws {JournalStateError} when a journal holds an illegal transition
 */
export async function tieredPartitions(
  config: Config,
  filter: PartitionFilter = {},
  journals: JournalStateReader = new JournalStateReader(config.agent.state_dir),
): Promise<TieredPartition[]> {
  const wanted = (id: PartitionId) =>
    tieredTopic(config, id) !== undefined && filterAccepts(filter, id);
  const brokers = await discoverPartitions(config.agent.data_dir, wanted);
  const onBroker = new Set(brokers.map(partitionLabel));
  // The state dir has the broker's layout: its partition folders are found the same way.
  const stateOnly = (await discoverPartitions(config.agent.state_dir, wanted))
    .filter((p) => !onBroker.has(partitionLabel(p)))
    .map((p) => ({ ...p, dir: undefined, device: undefined, inode: undefined }));
  const parts = [...brokers, ...stateOnly].sort((a, b) =>
    a.stream - b.stream || a.topic - b.topic || a.partition - b.partition
  );
  const out: TieredPartition[] = [];
  for (const part of parts) {
    const state = (await journals.state(part)) ?? (part.dir ? emptyState() : undefined);
    if (!state) continue; // a state folder without a journal: nothing to know of it
    const id = { stream: part.stream, topic: part.topic, partition: part.partition };
    out.push({
      id,
      label: partitionLabel(id),
      dir: part.dir,
      device: part.device,
      inode: part.inode,
      state,
    });
  }
  return out;
}

/**
 * Lists the tiered partitions (those `filter` accepts) with their segments, oldest first (see
 * {@linkcode tieredPartitions}); a partition only tierd's state knows has all its segments
 * remote.
 *
 * @param config a loaded config
 * @param filter stream, topic and partition to keep
 * @throws {JournalStateError} when a journal holds an illegal transition
 */
export async function inventory(
  config: Config,
  filter: PartitionFilter = {},
): Promise<PartitionEntry[]> {
  const out: PartitionEntry[] = [];
  for (const { id, label, dir, state } of await tieredPartitions(config, filter)) {
    const local = dir
      ? await listSegments(dir, {
        now: systemClock.now(),
        quiescenceMs: config.agent.seal_quiescence,
      })
      : [];
    const records = new Map(segmentsOf(state).map((r) => [r.start, r]));
    const files = new Map(local.map((s) => [s.start, s]));
    const starts = [...new Set([...files.keys(), ...records.keys()])]
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const segments = starts.map((start): SegmentEntry => {
      const rec = records.get(start);
      const file = files.get(start);
      const remote = rec?.state === "COPY_SEGMENT_FINISHED";
      // A copy total retention deleted (or is deleting) was copied: it is not copied again.
      const retired = rec?.deleteCause === "retention" &&
        (rec.state === "DELETE_SEGMENT_STARTED" || rec.state === "DELETE_SEGMENT_FINISHED");
      return {
        start,
        end: rec?.meta?.endOffset ?? rec?.lostEndOffset,
        state: rec?.state ?? (file?.sealed ? "LOCAL (sealed)" : file ? "LOCAL (active)" : "-"),
        location: file && remote ? "local+remote" : file ? "local" : remote ? "remote" : "-",
        bytes: rec?.meta?.size ?? file?.logSize ?? 0,
        pendingCopy: file?.sealed === true && !remote && !retired,
        localBytes: file?.logSize ?? 0,
      };
    });
    out.push({
      id,
      label,
      incarnation: state.incarnation === undefined ? "-" : incarnationHex(state.incarnation),
      generation: state.generation,
      floor: state.floor,
      segments,
    });
  }
  return out;
}
