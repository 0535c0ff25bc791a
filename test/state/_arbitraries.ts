// fast-check arbitraries for journal events, and a small independent model of the segment
// lifecycle (docs/architecture.md, "Segment lifecycle") that generates legal event sequences for
// the reducer tests.
import fc from "fast-check";
import type { DeleteCause, JournalEvent, JournalEventType } from "../../src/state/events.ts";

export const U64_MAX = (1n << 64n) - 1n;

/** Any u64. */
export const u64 = (): fc.Arbitrary<bigint> => fc.bigInt({ min: 0n, max: U64_MAX });
/** Any u128. */
export const u128 = (): fc.Arbitrary<bigint> => fc.bigInt({ min: 0n, max: (1n << 128n) - 1n });
const nat = () => fc.maxSafeNat();
const text = () => fc.string({ unit: "binary", maxLength: 40 });
const cause = () => fc.constantFrom<DeleteCause>("dangling", "retention");

/** Every event type name. */
export const EVENT_TYPES: JournalEventType[] = [
  "incarnation",
  "generation",
  "copy_started",
  "multipart_started",
  "copy_finished",
  "dangling",
  "delete_started",
  "delete_finished",
  "lost_before_upload",
  "floor",
  "evicted",
  "unevicted",
  "hole",
  "retired",
  "retired_swept",
];

const seg = { segment: u64(), generation: u64(), at: nat() };

/** Any event of any type, fields over their full ranges, unicode in free-text fields. */
export function anyEvent(): fc.Arbitrary<JournalEvent> {
  return fc.oneof(
    fc.record({
      type: fc.constant("incarnation" as const),
      incarnation: u64(),
      device: nat(),
      inode: nat(),
      at: nat(),
    }, { noNullPrototype: true }),
    fc.record({ type: fc.constant("generation" as const), generation: u64(), at: nat() }, {
      noNullPrototype: true,
    }),
    fc.record(
      { type: fc.constant("copy_started" as const), ...seg, uploadId: text() },
      { requiredKeys: ["type", "segment", "generation", "at"], noNullPrototype: true },
    ),
    fc.record({
      type: fc.constant("multipart_started" as const),
      ...seg,
      key: text(),
      uploadId: text(),
    }, { noNullPrototype: true }),
    fc.record({
      type: fc.constant("copy_finished" as const),
      ...seg,
      endOffset: u64(),
      size: nat(),
      indexSize: nat(),
      startTimestamp: u64(),
      endTimestamp: u64(),
      maxTimestamp: u64(),
      checksum: u128(),
    }, { noNullPrototype: true }),
    fc.record({ type: fc.constant("dangling" as const), ...seg, reason: text() }, {
      noNullPrototype: true,
    }),
    fc.record({ type: fc.constant("delete_started" as const), ...seg, cause: cause() }, {
      noNullPrototype: true,
    }),
    fc.record({ type: fc.constant("delete_finished" as const), ...seg }, { noNullPrototype: true }),
    fc.record(
      { type: fc.constant("lost_before_upload" as const), ...seg, endOffset: u64() },
      { requiredKeys: ["type", "segment", "generation", "at"], noNullPrototype: true },
    ),
    fc.record({
      type: fc.constant("floor" as const),
      generation: u64(),
      tieredUpTo: u64(),
      at: nat(),
    }, { noNullPrototype: true }),
    fc.record({ type: fc.constant("evicted" as const), ...seg }, { noNullPrototype: true }),
    fc.record({ type: fc.constant("unevicted" as const), ...seg }, { noNullPrototype: true }),
    fc.record(
      { type: fc.constant("hole" as const), ...seg, endOffset: u64(), reason: text() },
      { requiredKeys: ["type", "segment", "generation", "reason", "at"], noNullPrototype: true },
    ),
    fc.record({
      type: fc.constant("retired" as const),
      incarnation: u64(),
      generation: u64(),
      reason: text(),
      at: nat(),
    }, { noNullPrototype: true }),
    fc.record({
      type: fc.constant("retired_swept" as const),
      incarnation: u64(),
      generation: u64(),
      at: nat(),
    }, { noNullPrototype: true }),
  );
}

// ---- the model -------------------------------------------------------------------------------

type ModelSegmentState =
  | "COPY_SEGMENT_STARTED"
  | "COPY_SEGMENT_FINISHED"
  | "DANGLING"
  | "DELETE_SEGMENT_STARTED"
  | "DELETE_SEGMENT_FINISHED"
  | "LOST_BEFORE_UPLOAD"
  | "HOLE";

interface ModelSegment {
  state: ModelSegmentState;
  cause?: DeleteCause;
  evicted: boolean;
}

/** The lifecycle rules, written independently of src/state/segment_state.ts. */
export class LifecycleModel {
  incarnation: bigint | undefined;
  generation = 0n;
  floor = -1n;
  segments = new Map<string, ModelSegment>();
  /** Retired and not swept: `{incarnation}:{generation}`. */
  retired = new Set<string>();

  /** Generations that have segment records. */
  generations(): bigint[] {
    return [...new Set([...this.segments.keys()].map((k) => BigInt(k.split(":")[0])))];
  }

  /** Model state of one segment, "LOCAL" if never journaled. */
  stateOf(generation: bigint, segment: bigint): ModelSegmentState | "LOCAL" {
    return this.segments.get(`${generation}:${segment}`)?.state ?? "LOCAL";
  }

  /** Whether the lifecycle allows `e` next. */
  legal(e: JournalEvent): boolean {
    switch (e.type) {
      case "incarnation":
        return true;
      case "generation":
        return e.generation >= this.generation;
      case "floor":
        return e.generation === this.generation && e.tieredUpTo >= this.floor;
      case "retired":
        return e.incarnation !== this.incarnation || e.generation !== this.generation;
      case "retired_swept":
        return this.retired.has(`${e.incarnation}:${e.generation}`);
    }
    if (e.generation > this.generation) return false;
    const s = this.segments.get(`${e.generation}:${e.segment}`);
    const cleaned = !s || (s.state === "DELETE_SEGMENT_FINISHED" && s.cause === "dangling");
    switch (e.type) {
      case "hole":
        return e.generation === this.generation && cleaned;
      case "copy_started":
      case "lost_before_upload":
        return e.generation === this.generation && (cleaned || s?.state === "HOLE");
      case "multipart_started":
        return s?.state === "COPY_SEGMENT_STARTED";
      case "copy_finished":
        return s?.state === "COPY_SEGMENT_STARTED" || s?.state === "DANGLING";
      case "dangling":
        return s?.state === "COPY_SEGMENT_STARTED" ||
          (s?.state === "DELETE_SEGMENT_STARTED" && s.cause === "dangling") ||
          (s?.state === "COPY_SEGMENT_FINISHED" && !s.evicted);
      case "delete_started":
        return e.cause === "dangling"
          ? s?.state === "DANGLING"
          : s?.state === "COPY_SEGMENT_FINISHED";
      case "delete_finished":
        return s?.state === "DELETE_SEGMENT_STARTED";
      case "evicted":
        return s?.state === "COPY_SEGMENT_FINISHED" && !s.evicted;
      case "unevicted":
        return s?.state === "COPY_SEGMENT_FINISHED" && s.evicted;
    }
  }

  /** Applies a legal event. */
  apply(e: JournalEvent): void {
    switch (e.type) {
      case "incarnation":
        if (this.incarnation !== undefined && this.incarnation !== e.incarnation) {
          this.generation = 0n;
          this.floor = -1n;
          this.segments.clear();
        }
        this.incarnation = e.incarnation;
        this.retired.delete(`${this.incarnation}:${this.generation}`);
        return;
      case "generation":
        if (e.generation > this.generation) this.floor = -1n;
        this.generation = e.generation;
        this.retired.delete(`${this.incarnation}:${this.generation}`);
        return;
      case "floor":
        this.floor = e.tieredUpTo;
        return;
      case "retired":
        this.retired.add(`${e.incarnation}:${e.generation}`);
        return;
      case "retired_swept":
        this.retired.delete(`${e.incarnation}:${e.generation}`);
        if (e.incarnation === this.incarnation) {
          for (const k of [...this.segments.keys()]) {
            if (k.startsWith(`${e.generation}:`)) this.segments.delete(k);
          }
        }
        return;
    }
    const key = `${e.generation}:${e.segment}`;
    const s = this.segments.get(key);
    const next: Record<typeof e.type, () => ModelSegment> = {
      copy_started: () => ({ state: "COPY_SEGMENT_STARTED", evicted: false }),
      lost_before_upload: () => ({ state: "LOST_BEFORE_UPLOAD", evicted: false }),
      hole: () => ({ state: "HOLE", evicted: false }),
      multipart_started: () => s!,
      copy_finished: () => ({ state: "COPY_SEGMENT_FINISHED", evicted: false }),
      dangling: () => ({ state: "DANGLING", evicted: false }),
      delete_started: () =>
        e.type === "delete_started"
          ? { ...s!, state: "DELETE_SEGMENT_STARTED", cause: e.cause }
          : s!,
      delete_finished: () => ({ ...s!, state: "DELETE_SEGMENT_FINISHED" }),
      evicted: () => ({ ...s!, evicted: true }),
      unevicted: () => ({ ...s!, evicted: false }),
    };
    this.segments.set(key, next[e.type]());
  }
}

/**
 * One raw choice. In "legal" mode {@linkcode concretize} picks among the events the model allows
 * next (so sequences go deep); in "any" mode it builds an event of `type` that may be illegal.
 */
export interface Choice {
  mode: "legal" | "any";
  /** In "legal" mode: pick a partition event (incarnation, generation, floor) instead. */
  partition: boolean;
  pick: number;
  type: JournalEventType;
  slot: number;
  generationDelta: number;
  floorDelta: number;
  incarnation: bigint;
  cause: DeleteCause;
  at: number;
  text: string;
  uploadId: string | null;
  lostEnd: bigint | null;
  meta: {
    endOffset: bigint;
    size: number;
    indexSize: number;
    startTimestamp: bigint;
    endTimestamp: bigint;
    maxTimestamp: bigint;
    checksum: bigint;
  };
}

const SLOTS = 6;

/** A random choice; segments come from a handful of slots so transitions hit the same segment. */
export function choice(): fc.Arbitrary<Choice> {
  return fc.record({
    mode: fc.constantFrom<Choice["mode"]>("legal", "legal", "legal", "any"),
    partition: fc.nat(9).map((n) => n === 0),
    pick: fc.nat(),
    type: fc.constantFrom(...EVENT_TYPES),
    slot: fc.nat(SLOTS - 1),
    generationDelta: fc.constantFrom(0, 0, 0, 0, 0, 0, -1, 1, 2),
    floorDelta: fc.integer({ min: -3, max: 10 }),
    incarnation: fc.constantFrom(7n, 7n, 7n, 7n, 7n, 8n, U64_MAX),
    cause: cause(),
    at: nat(),
    text: text(),
    uploadId: fc.option(text()),
    lostEnd: fc.option(u64()),
    meta: fc.record({
      endOffset: u64(),
      size: nat(),
      indexSize: nat(),
      startTimestamp: u64(),
      endTimestamp: u64(),
      maxTimestamp: u64(),
      checksum: u128(),
    }, { noNullPrototype: true }),
  }, { noNullPrototype: true });
}

/** Builds the event a choice describes, for a given type, segment slot and generation. */
function build(
  model: LifecycleModel,
  c: Choice,
  type: JournalEventType,
  segment: bigint,
  generation: bigint,
): JournalEvent {
  const at = c.at;
  switch (type) {
    case "incarnation":
      return { type: "incarnation", incarnation: c.incarnation, device: 1, inode: c.slot, at };
    case "generation":
      return { type: "generation", generation, at };
    case "floor": {
      const t = model.floor + BigInt(c.floorDelta);
      return { type: "floor", generation, tieredUpTo: t < 0n ? 0n : t, at };
    }
    case "copy_started":
      return {
        type: "copy_started",
        segment,
        generation,
        at,
        ...(c.uploadId !== null && { uploadId: c.uploadId }),
      };
    case "multipart_started":
      return {
        type: "multipart_started",
        segment,
        generation,
        key: `k/${c.text}`,
        uploadId: c.uploadId ?? "u",
        at,
      };
    case "copy_finished":
      return { type: "copy_finished", segment, generation, ...c.meta, at };
    case "dangling":
      return { type: "dangling", segment, generation, reason: c.text, at };
    case "delete_started":
      return { type: "delete_started", segment, generation, cause: c.cause, at };
    case "delete_finished":
      return { type: "delete_finished", segment, generation, at };
    case "lost_before_upload":
      return {
        type: "lost_before_upload",
        segment,
        generation,
        at,
        ...(c.lostEnd !== null && { endOffset: c.lostEnd }),
      };
    case "evicted":
      return { type: "evicted", segment, generation, at };
    case "unevicted":
      return { type: "unevicted", segment, generation, at };
    case "hole":
      return {
        type: "hole",
        segment,
        generation,
        reason: c.text,
        at,
        ...(c.lostEnd !== null && { endOffset: c.lostEnd }),
      };
    case "retired":
      return {
        type: "retired",
        incarnation: c.slot % 2 === 0 ? c.incarnation : model.incarnation ?? c.incarnation,
        generation,
        reason: c.text,
        at,
      };
    case "retired_swept": {
      const known = [...model.retired];
      const [inc, gen] = known.length > 0
        ? known[c.pick % known.length].split(":").map(BigInt)
        : [c.incarnation, generation];
      return { type: "retired_swept", incarnation: inc, generation: gen, at };
    }
  }
}

const PARTITION_TYPES: JournalEventType[] = [
  "incarnation",
  "generation",
  "floor",
  "retired",
  "retired_swept",
];
const SEGMENT_TYPES = EVENT_TYPES.filter((t) => !PARTITION_TYPES.includes(t));

/** Turns a choice into an event aimed at the model's current state ("any" mode: maybe illegal). */
export function concretize(model: LifecycleModel, c: Choice, base: bigint): JournalEvent {
  const shifted = model.generation + BigInt(c.generationDelta);
  const generation = shifted < 0n ? 0n : shifted > U64_MAX ? U64_MAX : shifted;
  if (c.mode === "any") {
    return build(model, c, c.type, base + BigInt(c.slot) * 1000n, generation);
  }
  const candidates: JournalEvent[] = [];
  if (c.partition) {
    for (const type of PARTITION_TYPES) {
      const g = type === "generation" && generation < model.generation
        ? model.generation
        : generation;
      candidates.push(build(model, c, type, 0n, type === "floor" ? model.generation : g));
    }
  } else {
    const generations = new Set([model.generation, ...model.generations()]);
    for (const g of generations) {
      for (let slot = 0; slot < SLOTS; slot++) {
        for (const type of SEGMENT_TYPES) {
          // Losing a segment is final; offer it rarely so slots live long enough to go deep.
          if (type === "lost_before_upload" && c.floorDelta >= 0) continue;
          const segment = base + BigInt(slot) * 1000n;
          candidates.push(build(model, c, type, segment, g));
          if (type === "delete_started") {
            const other = c.cause === "dangling" ? "retention" : "dangling";
            candidates.push(build(model, { ...c, cause: other }, type, segment, g));
          }
        }
      }
    }
  }
  const legal = candidates.filter((e) => model.legal(e));
  return legal.length > 0 ? legal[c.pick % legal.length] : candidates[c.pick % candidates.length];
}

/** Random legal event sequences, built by walking the model. */
export function legalEvents(): fc.Arbitrary<JournalEvent[]> {
  return fc.record({
    base: fc.bigInt({ min: 0n, max: U64_MAX - 10_000n }),
    choices: fc.array(choice(), { maxLength: 80, size: "max" }),
  }, { noNullPrototype: true }).map(({ base, choices }) => {
    const model = new LifecycleModel();
    const events: JournalEvent[] = [];
    for (const c of choices) {
      const e = concretize(model, c, base);
      if (!model.legal(e)) continue;
      model.apply(e);
      events.push(e);
    }
    return events;
  });
}
