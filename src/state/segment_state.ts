// Folds a partition's journal events into its state: incarnation, generation, floor and each
// segment's place in the remote lifecycle (docs/architecture.md, "Segment lifecycle"). Illegal
// transitions are refused loudly.
import type { JournalEvent, SegmentEvent } from "./events.ts";
import type { SegmentRecord, SegmentState } from "./segment_record.ts";
import { SegmentTable } from "./segment_table.ts";

export type {
  CopiedRecord,
  RecordWithCopy,
  SegmentRecord,
  SegmentState,
} from "./segment_record.ts";
export { hasCopy } from "./segment_record.ts";

/** A partition's state, folded from its journal. */
export interface PartitionState {
  /** Incarnation id; undefined until the partition directory was first recorded. */
  readonly incarnation?: bigint;
  /** `st_dev` of the directory the incarnation was recorded for. */
  readonly device?: number;
  /** `st_ino` of the directory the incarnation was recorded for. */
  readonly inode?: number;
  /** Current purge generation (0 until the first purge). */
  readonly generation: bigint;
  /** `tiered_up_to_offset` of the current generation; -1n if none yet. */
  readonly floor: bigint;
  /**
   * Segment records keyed by generation, then by start offset. Older generations stay (their
   * objects still need cleanup and retention); only the current one takes new copies.
   */
  readonly segments: ReadonlyMap<bigint, ReadonlyMap<bigint, SegmentRecord>>;
  /**
   * Incarnations and generations this agent retired and has not swept from the bucket yet, by
   * {@linkcode retiredKey}. Absent when there are none.
   */
  readonly retired?: ReadonlyMap<string, RetiredGeneration>;
}

/** An incarnation and generation this agent retired (the topic recreated, the partition purged). */
export interface RetiredGeneration {
  readonly incarnation: bigint;
  readonly generation: bigint;
  readonly reason: string;
  /** ms since the epoch when it was retired (the sweep's grace counts from here). */
  readonly at: number;
}

/** The key of a retired incarnation and generation: `{incarnation hex}-{generation}`. */
export function retiredKey(incarnation: bigint, generation: bigint): string {
  return `${incarnation.toString(16).padStart(16, "0")}-${generation}`;
}

/** The retired incarnations and generations of a state, oldest retirement first. */
export function retiredOf(state: PartitionState): RetiredGeneration[] {
  return [...(state.retired?.values() ?? [])].sort((a, b) => a.at - b.at);
}

/** An event that the partition's state does not allow; the worker must never journal one. */
export class JournalStateError extends Error {
  /** The refused event. */
  readonly event: JournalEvent;
  /** The segment's start offset, for segment events. */
  readonly segment?: bigint;
  /** The state the event was applied to: a segment state, "LOCAL" (no record) or "PARTITION". */
  readonly from: SegmentState | "LOCAL" | "PARTITION";

  /**
   * @param event The refused event.
   * @param from The segment state it met ("LOCAL" for none, "PARTITION" for partition events).
   * @param detail Why it is illegal.
   */
  constructor(event: JournalEvent, from: SegmentState | "LOCAL" | "PARTITION", detail: string) {
    const where = "segment" in event
      ? `segment ${event.segment} (generation ${event.generation}) in state ${from}`
      : "partition";
    super(`illegal ${event.type} event for ${where}: ${detail}`);
    this.name = "JournalStateError";
    this.event = event;
    this.from = from;
    if ("segment" in event) this.segment = event.segment;
  }
}

/**
 * The state of a partition with no journal yet.
 *
 * @returns Generation 0, no floor, no segments, no incarnation.
 */
export function emptyState(): PartitionState {
  return { generation: 0n, floor: -1n, segments: new Map() };
}

/**
 * Looks up one segment record.
 *
 * @param state The partition state.
 * @param generation The generation the segment was copied in.
 * @param start The segment's start offset.
 * @returns The record, or undefined if the segment is LOCAL (never journaled) in that generation.
 */
export function getSegment(
  state: PartitionState,
  generation: bigint,
  start: bigint,
): SegmentRecord | undefined {
  return state.segments.get(generation)?.get(start);
}

/**
 * The records of one generation in start-offset order.
 *
 * @param state The partition state.
 * @param generation Which generation; defaults to the current one.
 * @returns The records, oldest segment first.
 */
export function segmentsOf(
  state: PartitionState,
  generation: bigint = state.generation,
): SegmentRecord[] {
  return [...(state.segments.get(generation)?.values() ?? [])].sort(byStart);
}

/**
 * Throws if `event` is not a legal next event for `state`; changes nothing. The worker calls this
 * before journaling an event, then {@linkcode applyEvent} once it is durable.
 *
 * @param state The partition state.
 * @param event The candidate event.
 * @throws {JournalStateError} If the transition is illegal.
 */
export function checkEvent(state: PartitionState, event: JournalEvent): void {
  plan(state, event);
}

/**
 * Applies one event without changing `state`: returns a new state that shares unchanged parts.
 * Cost is linear in the touched generation's segment count; replay with {@linkcode fold}.
 *
 * @param state The partition state (not modified).
 * @param event The event.
 * @returns The state after the event.
 * @throws {JournalStateError} If the transition is illegal (see docs/architecture.md,
 * "Segment lifecycle").
 */
export function applyEvent(state: PartitionState, event: JournalEvent): PartitionState {
  return commit(state, plan(state, event), false);
}

/**
 * Folds events into a state; linear in the number of events.
 *
 * @param events The events, in journal order.
 * @param from The state to start from (not modified); defaults to {@linkcode emptyState}.
 * @returns The resulting state.
 * @throws {JournalStateError} At the first illegal event.
 */
export function fold(
  events: Iterable<JournalEvent>,
  from: PartitionState = emptyState(),
): PartitionState {
  let state: PartitionState = {
    ...from,
    segments: new Map([...from.segments].map(([g, m]) => [g, tableOf(g, m).clone()])),
  };
  for (const event of events) state = commit(state, plan(state, event), true);
  return state;
}

/**
 * A minimal event list that folds (from {@linkcode emptyState}) to exactly `state`: what
 * journal compaction writes. Segment records are restated as the chain of events that reaches
 * their current state, each at the record's `since`; partition facts carry `at`.
 *
 * @param state The partition state.
 * @param at Timestamp for the incarnation, generation and floor events (their times are not kept).
 * @returns The events, in replay order.
 */
export function snapshotEvents(state: PartitionState, at: number): JournalEvent[] {
  const out: JournalEvent[] = [];
  if (state.incarnation !== undefined) {
    out.push({
      type: "incarnation",
      incarnation: state.incarnation,
      device: state.device ?? 0,
      inode: state.inode ?? 0,
      at,
    });
  }
  let generation = 0n;
  const generations = [...state.segments.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const g of generations) {
    if (g > generation) {
      generation = g;
      out.push({ type: "generation", generation, at });
    }
    for (const record of segmentsOf(state, g)) out.push(...recordChain(record));
  }
  if (state.generation > generation) {
    out.push({ type: "generation", generation: state.generation, at });
  }
  if (state.floor >= 0n) {
    out.push({ type: "floor", generation: state.generation, tieredUpTo: state.floor, at });
  }
  for (const r of retiredOf(state)) {
    out.push({
      type: "retired",
      incarnation: r.incarnation,
      generation: r.generation,
      reason: r.reason,
      at: r.at,
    });
  }
  return out;
}

function byStart(a: SegmentRecord, b: SegmentRecord): number {
  return a.start < b.start ? -1 : a.start > b.start ? 1 : 0;
}

/** The events that take a LOCAL segment to `r`. */
function recordChain(r: SegmentRecord): SegmentEvent[] {
  const id = { segment: r.start, generation: r.generation, at: r.since };
  if (r.state === "HOLE") {
    return [{
      type: "hole",
      ...id,
      ...(r.lostEndOffset !== undefined && { endOffset: r.lostEndOffset }),
      reason: r.holeReason ?? "",
    }];
  }
  if (r.state === "LOST_BEFORE_UPLOAD") {
    return [{
      type: "lost_before_upload",
      ...id,
      ...(r.lostEndOffset !== undefined && { endOffset: r.lostEndOffset }),
    }];
  }
  const chain: SegmentEvent[] = [{
    type: "copy_started",
    ...id,
    ...(r.uploadId !== undefined && r.multipartKey === undefined && { uploadId: r.uploadId }),
  }];
  if (r.multipartKey !== undefined && r.uploadId !== undefined) {
    chain.push({ type: "multipart_started", ...id, key: r.multipartKey, uploadId: r.uploadId });
  }
  if (r.meta) {
    chain.push({ type: "copy_finished", ...id, ...r.meta });
    if (r.evicted) chain.push({ type: "evicted", ...id });
  } else if (r.danglingReason !== undefined) {
    chain.push({ type: "dangling", ...id, reason: r.danglingReason });
  }
  if (r.deleteCause !== undefined) {
    chain.push({ type: "delete_started", ...id, cause: r.deleteCause });
  }
  if (r.state === "DELETE_SEGMENT_FINISHED") chain.push({ type: "delete_finished", ...id });
  return chain;
}

type Change =
  | { kind: "segment"; record: SegmentRecord }
  | {
    kind: "partition";
    fields: Pick<PartitionState, "incarnation" | "device" | "inode" | "generation" | "floor">;
    reset: boolean;
  }
  | { kind: "retired"; add?: RetiredGeneration; remove?: RetiredGeneration };

function commit(state: PartitionState, change: Change, inPlace: boolean): PartitionState {
  if (change.kind === "partition") {
    const segments = change.reset ? new Map() : state.segments;
    // What becomes current again (adopted anew) is no longer retired: never sweep the current.
    const { incarnation, generation } = change.fields;
    const key = incarnation === undefined ? undefined : retiredKey(incarnation, generation);
    let retired = state.retired;
    if (key !== undefined && retired?.has(key)) {
      const copy = new Map(retired);
      copy.delete(key);
      retired = copy.size > 0 ? copy : undefined;
    }
    return { ...change.fields, segments, ...(retired && { retired }) };
  }
  if (change.kind === "retired") {
    const retired = new Map(state.retired);
    let segments = state.segments;
    if (change.add) {
      retired.set(retiredKey(change.add.incarnation, change.add.generation), change.add);
    }
    if (change.remove) {
      const { incarnation, generation } = change.remove;
      retired.delete(retiredKey(incarnation, generation));
      // A swept generation of the current incarnation has no objects left: its records go too.
      if (incarnation === state.incarnation && state.segments.has(generation)) {
        const copy = new Map(state.segments);
        copy.delete(generation);
        segments = copy;
      }
    }
    const { retired: _old, ...rest } = state;
    return { ...rest, segments, ...(retired.size > 0 && { retired }) };
  }
  const { record } = change;
  // Only fold() passes inPlace, on maps it copied itself, so nobody else sees the mutation.
  const outer = (inPlace ? state.segments : new Map(state.segments)) as Map<
    bigint,
    ReadonlyMap<bigint, SegmentRecord>
  >;
  const existing = outer.get(record.generation);
  const base = existing && tableOf(record.generation, existing);
  const table = !base ? new SegmentTable(record.generation) : inPlace ? base : base.clone();
  table.set(record);
  outer.set(record.generation, table);
  return inPlace ? state : { ...state, segments: outer };
}

/** A generation's records as a table: itself, or a plain map's records copied into one. */
function tableOf(generation: bigint, records: ReadonlyMap<bigint, SegmentRecord>): SegmentTable {
  return records instanceof SegmentTable ? records : SegmentTable.of(generation, records.values());
}

function without<T extends object, K extends keyof T>(value: T, ...keys: K[]): Omit<T, K> {
  const copy = { ...value };
  for (const k of keys) delete copy[k];
  return copy;
}

function partitionFields(
  state: PartitionState,
): Pick<PartitionState, "incarnation" | "device" | "inode" | "generation" | "floor"> {
  const { incarnation, device, inode, generation, floor } = state;
  return {
    ...(incarnation !== undefined && { incarnation, device, inode }),
    generation,
    floor,
  };
}

/** Decides what `event` does to `state`, or throws if it is illegal. Pure. */
function plan(state: PartitionState, event: JournalEvent): Change {
  switch (event.type) {
    case "incarnation": {
      // A different id means the directory was recreated: a new partition starts from scratch;
      // the old incarnation's objects are left to the orphan sweep.
      const recreated = state.incarnation !== undefined && state.incarnation !== event.incarnation;
      const base = recreated ? partitionFields(emptyState()) : partitionFields(state);
      return {
        kind: "partition",
        fields: {
          ...base,
          incarnation: event.incarnation,
          device: event.device,
          inode: event.inode,
        },
        reset: recreated,
      };
    }
    case "generation": {
      if (event.generation < state.generation) {
        throw new JournalStateError(
          event,
          "PARTITION",
          `generation ${event.generation} is below the current generation ${state.generation}`,
        );
      }
      const bumped = event.generation > state.generation;
      return {
        kind: "partition",
        fields: {
          ...partitionFields(state),
          generation: event.generation,
          floor: bumped ? -1n : state.floor,
        },
        reset: false,
      };
    }
    case "floor": {
      if (event.generation !== state.generation) {
        throw new JournalStateError(
          event,
          "PARTITION",
          `floor of generation ${event.generation}, current generation is ${state.generation}`,
        );
      }
      if (event.tieredUpTo < state.floor) {
        throw new JournalStateError(
          event,
          "PARTITION",
          `floor ${event.tieredUpTo} would move back from ${state.floor}`,
        );
      }
      return {
        kind: "partition",
        fields: { ...partitionFields(state), floor: event.tieredUpTo },
        reset: false,
      };
    }
    case "retired": {
      if (event.incarnation === state.incarnation && event.generation === state.generation) {
        throw new JournalStateError(
          event,
          "PARTITION",
          `incarnation ${event.incarnation.toString(16)} generation ${event.generation} is the ` +
            "current one and cannot be retired",
        );
      }
      const { type: _type, ...retired } = event;
      return { kind: "retired", add: retired };
    }
    case "retired_swept": {
      const known = state.retired?.get(retiredKey(event.incarnation, event.generation));
      if (!known) {
        throw new JournalStateError(
          event,
          "PARTITION",
          `incarnation ${event.incarnation.toString(16)} generation ${event.generation} was ` +
            "not retired",
        );
      }
      return { kind: "retired", remove: known };
    }
    default:
      return { kind: "segment", record: planSegment(state, event) };
  }
}

function planSegment(state: PartitionState, event: SegmentEvent): SegmentRecord {
  const prev = getSegment(state, event.generation, event.segment);
  const from = prev?.state ?? "LOCAL";
  const refuse = (detail: string): never => {
    throw new JournalStateError(event, from, detail);
  };
  if (event.generation > state.generation) {
    refuse(`generation is ahead of the partition's generation ${state.generation}`);
  }
  const base = { start: event.segment, generation: event.generation, evicted: false };
  // A new attempt may start on a LOCAL segment, after a dangling copy was cleaned up, or on a
  // hole (the broker still had the segment, or its object came back).
  const fresh = !prev || prev.state === "HOLE" ||
    (prev.state === "DELETE_SEGMENT_FINISHED" && prev.deleteCause === "dangling");
  switch (event.type) {
    case "hole": {
      if (event.generation !== state.generation) {
        refuse(`only the current generation ${state.generation} takes new segments`);
      }
      if (!fresh || prev?.state === "HOLE") {
        refuse("a hole is recorded only on a LOCAL or cleaned-up dangling segment");
      }
      return {
        ...base,
        state: "HOLE",
        since: event.at,
        holeReason: event.reason,
        ...(event.endOffset !== undefined && { lostEndOffset: event.endOffset }),
      };
    }
    case "copy_started":
    case "lost_before_upload": {
      if (event.generation !== state.generation) {
        refuse(`only the current generation ${state.generation} takes new segments`);
      }
      if (!fresh) refuse("a copy may start only on a LOCAL or cleaned-up dangling segment");
      if (event.type === "copy_started") {
        return {
          ...base,
          state: "COPY_SEGMENT_STARTED",
          since: event.at,
          ...(event.uploadId !== undefined && { uploadId: event.uploadId }),
        };
      }
      return {
        ...base,
        state: "LOST_BEFORE_UPLOAD",
        since: event.at,
        ...(event.endOffset !== undefined && { lostEndOffset: event.endOffset }),
      };
    }
    case "multipart_started":
      if (prev?.state !== "COPY_SEGMENT_STARTED") refuse("no copy in progress");
      return { ...prev!, uploadId: event.uploadId, multipartKey: event.key };
    case "copy_finished": {
      // From DANGLING this is adoption: cleanup found a complete, matching object.
      if (prev?.state !== "COPY_SEGMENT_STARTED" && prev?.state !== "DANGLING") {
        refuse("expected COPY_SEGMENT_STARTED or DANGLING");
      }
      const { type: _type, segment: _segment, generation: _generation, at, ...meta } = event;
      return { ...base, state: "COPY_SEGMENT_FINISHED", since: at, meta };
    }
    case "dangling":
      // From COPY_SEGMENT_FINISHED: the verified copy is no longer good (gone or damaged in the
      // store) while the local files still exist — clean it up and copy again.
      if (
        prev?.state !== "COPY_SEGMENT_STARTED" &&
        !(prev?.state === "DELETE_SEGMENT_STARTED" && prev.deleteCause === "dangling") &&
        !(prev?.state === "COPY_SEGMENT_FINISHED" && !prev.evicted)
      ) {
        refuse(
          "expected COPY_SEGMENT_STARTED, a dangling cleanup in progress, or a copy not evicted",
        );
      }
      return {
        ...without(prev!, "deleteCause", "meta"), // a copy that went bad is no copy
        state: "DANGLING",
        since: event.at,
        danglingReason: event.reason,
      };
    case "delete_started": {
      const at = { state: "DELETE_SEGMENT_STARTED", since: event.at } as const;
      if (event.cause === "dangling") {
        if (prev?.state !== "DANGLING") return refuse("a dangling delete starts from DANGLING");
        return { ...prev, ...at, deleteCause: "dangling" };
      }
      if (prev?.state !== "COPY_SEGMENT_FINISHED") {
        return refuse(`a ${event.cause} delete starts from COPY_SEGMENT_FINISHED`);
      }
      return { ...prev, ...at, deleteCause: event.cause };
    }
    case "delete_finished": {
      if (prev?.state !== "DELETE_SEGMENT_STARTED") return refuse("no delete in progress");
      const { uploadId: _u, multipartKey: _m, ...rest } = prev;
      return { ...rest, state: "DELETE_SEGMENT_FINISHED", since: event.at };
    }
    case "evicted":
      if (prev?.state !== "COPY_SEGMENT_FINISHED") refuse("only a verified copy can be evicted");
      if (prev!.evicted) refuse("already evicted");
      return { ...prev!, evicted: true };
    case "unevicted":
      if (prev?.state !== "COPY_SEGMENT_FINISHED" || !prev.evicted) {
        refuse("only an evicted verified copy can be local again");
      }
      return { ...prev!, evicted: false };
  }
}

/** A cleaned-up failed copy: its record no longer holds anything back. */
export function isCleanedDangling(r: SegmentRecord): boolean {
  return r.state === "DELETE_SEGMENT_FINISHED" && r.deleteCause === "dangling";
}

/**
 * True when a fresh copy of the segment may start: it has no record, its failed copy was cleaned
 * up, or it is a hole (the bucket lost its copy and the broker still has the segment).
 */
export function mayStartCopy(r: SegmentRecord | undefined): boolean {
  return r === undefined || r.state === "HOLE" || isCleanedDangling(r);
}
