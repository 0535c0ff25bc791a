// A message poll on one of tierd's Iggy fronts (HTTP or binary), decided and read the same way
// whatever the wire: answered by tierd when the range it asks for starts below the broker's
// first retained offset of the partition, otherwise left to the broker (forwarded untouched, and
// so identical to the broker's own answer).
//
// Where a poll starts, as the broker resolves it (0.8.0 core/server/src/streaming/partitions/
// ops.rs `poll_messages`, 0.9 core/partitions/src/iggy_partition.rs `build_poll_plan`), with the
// partition's log extended back over tierd's copies:
// - `offset`: `value`;
// - `first`: the first offset tierd has (the broker's first segment, as before the eviction);
// - `last`: `current_offset - (count - 1)`, at least 0;
// - `next`: the consumer's stored offset + 1 (asked of the broker), or `first` without one;
// - `timestamp`: 0.9, the first batch whose timestamp is at or after `value` (its messages share
//   it); 0.8, where the broker's binary search of the segment index lands (timestamp_08.ts).
// Then `count` messages from there: tierd's read path up to the broker's first retained offset,
// then the broker's own poll for the rest (its local data, its journal), spliced into one answer
// whose `current_offset` is the broker's. An auto-committing poll stores the offset of the last
// message it answered through the broker, on the client's own session or token.
//
// Nothing is read from the bucket unless the broker accepted the client's session for a poll of
// that partition just before (the probe); its refusal is the client's answer.
import type { PartitionId } from "../layout/partition.ts";
import type { Logger } from "../log.ts";
import { type Catalog, catalogFormat, type CatalogSegment, loadCatalog } from "../read/catalog.ts";
import type { ReadContext } from "../read/context.ts";
import { AnswerHold } from "../read/read_budget.ts";
import type { ContinuityReaders } from "../read/continuity.ts";
import { OffsetPastEnd, UnknownPartition } from "../read/errors.ts";
import { readRecords } from "../read/read_records.ts";
import { deadlineIn } from "../read/_fetch.ts";
import type { FormatName } from "../format/types.ts";
import {
  DECODED_MESSAGE_BYTES,
  GUESS_MESSAGE_BYTES,
  type PolledMessage,
  readRemote,
} from "./remote_read.ts";
import { timestampStart08 } from "./timestamp_08.ts";

/** Record bytes one poll answered by tierd reads at most (at least one message is answered). */
export const MAX_POLL_BYTES = 32 * 1024 * 1024;
/** Rounds of "the broker dropped more while we read" a poll retries before answering. */
const MAX_ROUNDS = 3;

/** A polling strategy, as `PollingKind` names it. */
export type PollKind = "offset" | "timestamp" | "first" | "last" | "next";

/** The parts of a poll the plan needs, whatever the wire. */
export interface PollAsk {
  kind: PollKind;
  /** The offset or timestamp (µs) of `offset` and `timestamp` polls. */
  value: bigint;
  count: number;
  autoCommit: boolean;
  /**
   * The front checks a forwarded answer starts where this poll asked (an offset poll that
   * commits nothing, asked again at no cost when it does not): the broker's first local segment
   * is then the broker's to answer even while it may be evicted. Otherwise tierd answers that
   * segment itself when it has copied it.
   */
  checked?: boolean;
}

/** What a probe found out about a partition. */
export interface PartitionView {
  /** The first offset the broker still has; undefined when it answered no message. */
  first?: bigint;
  /** The broker's current (last) offset; 0 from a 0.8 broker that answered no message. */
  current: bigint;
  /** True when it was asked of the broker for this call (not reused from an earlier one). */
  fresh: boolean;
}

/** A poll the broker answered, in its own encoding `R`. */
export interface BrokerAnswer<R> {
  current: bigint;
  /** Offsets of the first and last message; undefined when it answered none. */
  firstOffset?: bigint;
  lastOffset?: bigint;
  answer: R;
  /** Bytes the answer holds (its text or frame), reserved from the read budget with tierd's. */
  size: number;
}

/**
 * The broker, as one client sees it: every call made with that client's own session (binary)
 * or token (HTTP), so the broker's permissions decide. A refusal is thrown, to be given to the
 * client as the broker gave it.
 */
export interface BrokerSide<R> {
  /**
   * Checks that the broker lets this client poll the partition and reads its bounds (a
   * `first`, count 1, no-commit poll). `fresh` asks it now rather than reusing an earlier answer.
   */
  probe(fresh: boolean): Promise<PartitionView>;
  /** The consumer's stored offset, or undefined when it has none. */
  storedOffset(): Promise<bigint | undefined>;
  /** Stores the consumer's offset (an auto-committing poll tierd answered). */
  storeOffset(offset: bigint): Promise<void>;
  /** The broker's own poll from `offset`, `count` messages at most, no auto-commit. */
  pollFrom(offset: bigint, count: number): Promise<BrokerAnswer<R>>;
  /**
   * Asked just before tierd answers: true when the partition is still the one planned for (a
   * stream or topic named by name still names the same ids). Absent: always true.
   */
  confirm?(): Promise<boolean>;
}

/**
 * tierd cannot tell now which partition a poll is of (its names changed meaning while it was
 * planned): the client gets a transient error and polls again, never an answer that may skip.
 */
export class PollNotJudged extends Error {
  override readonly name = "PollNotJudged";
  readonly retryAfterSeconds = 1;
}

/** A poll tierd answers: its own messages, then the broker's. */
export interface PollAnswer<R> {
  /** The broker's current offset, to be written in the answer. */
  current: bigint;
  /** What tierd read, in offset order; never empty. */
  tierd: PolledMessage[];
  /** The broker's continuation (its first message follows tierd's last), if any was taken. */
  broker?: BrokerAnswer<R>;
  /** The on-disk format of the partition (the broker's version). */
  format: FormatName;
  /** The read memory the answer holds: what the wire makes of it is held here too. */
  hold: AnswerHold;
  /** Gives the read memory back; call once the answer is sent or abandoned. */
  release(): void;
}

/**
 * What a front builds of an answer made of `bytes` of records and broker answer, beyond them and
 * the decoded messages (its encoding, its copies), in bytes at its peak.
 */
export type PollPeak = (bytes: number) => number;

/** What a poll is served with. */
export interface PlanDeps {
  read: ReadContext;
  continuity: ContinuityReaders;
  logger: Logger;
  /** Where each plan leaves what it learnt of the partition's local segments (see LocalHints). */
  hints?: LocalHints;
}

/**
 * What the last plan of each partition found: polls starting at or after the start of its first
 * local segment are the broker's. A hint may be stale (the agent evicts on): a front that forwards
 * on one must check the broker's answer starts where the poll asked, and plan afresh when not.
 */
export class LocalHints {
  readonly #ttlMs: number;
  readonly #entries = new Map<string, { at: number; firstLocal: bigint }>();

  /** @param ttlMs how long a hint is used */
  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  /** The partition's hint, if one younger than the TTL is kept. */
  firstLocal(id: PartitionId, now: number): bigint | undefined {
    const hit = this.#entries.get(hintKey(id));
    return hit && now - hit.at < this.#ttlMs ? hit.firstLocal : undefined;
  }

  /** Keeps what a plan found. */
  set(id: PartitionId, firstLocal: bigint | undefined, now: number): void {
    const key = hintKey(id);
    if (firstLocal === undefined) {
      this.#entries.delete(key);
      return;
    }
    if (this.#entries.size >= 10_000) this.#entries.clear();
    this.#entries.set(key, { at: now, firstLocal });
  }

  /** Forgets a hint found stale. */
  forget(id: PartitionId): void {
    this.#entries.delete(hintKey(id));
  }
}

function hintKey(id: PartitionId): string {
  return `${id.stream}/${id.topic}/${id.partition}`;
}

/** The partition's shape in tierd's catalog. */
interface Shape {
  catalog: Catalog;
  /** The first offset tierd can read (copies included). */
  earliest: bigint;
  /**
   * Polls starting at or after this are certainly the broker's: the start of its second local
   * segment (its first may be going, a 0.9 broker deletes files after it answered).
   */
  certainlyLocal?: bigint;
  /**
   * True when tierd has copied the broker's first local segment: it may be evicted while a poll
   * is served (and the broker, asked for an offset it just dropped, answers from a later one — or
   * nothing), so tierd answers it itself unless the front checks the broker's answer.
   */
  firstLocalCopied: boolean;
  /** Start of the first segment whose files the broker still has. */
  firstLocal?: bigint;
  /**
   * The last offset tierd knows the partition had (its copies' and sealed segments' ends): the
   * broker's current offset is never below it, unless the broker's partition is another one.
   */
  knownEnd?: bigint;
}

async function shapeOf(ctx: ReadContext, id: PartitionId): Promise<Shape | undefined> {
  let catalog;
  try {
    catalog = await loadCatalog(ctx, id);
  } catch (err) {
    if (err instanceof UnknownPartition) return undefined;
    throw err;
  }
  const entries = catalog.entries;
  const segments = entries.filter((e): e is CatalogSegment => e.kind === "segment");
  if (!segments.some((s) => s.remote)) return undefined; // nothing copied: all the broker's
  const local = segments.filter((s) => s.local);
  return {
    catalog,
    earliest: entries[0].start,
    certainlyLocal: local[1]?.start ?? local[0]?.start,
    firstLocalCopied: local[0]?.remote !== undefined,
    firstLocal: local[0]?.start,
    knownEnd: maxOf(segments.map((s) => s.end)),
  };
}

function maxOf(values: (bigint | undefined)[]): bigint | undefined {
  let out: bigint | undefined;
  for (const v of values) if (v !== undefined && (out === undefined || v > out)) out = v;
  return out;
}

/** Where the poll starts; undefined when the broker should answer it whole. */
async function startOf<R>(
  ctx: ReadContext,
  broker: BrokerSide<R>,
  ask: PollAsk,
  id: PartitionId,
  shape: Shape,
  current: bigint,
): Promise<bigint | undefined> {
  switch (ask.kind) {
    case "offset":
      return ask.value;
    case "first":
      return shape.earliest;
    case "last": {
      const back = BigInt(ask.count) - 1n;
      return current > back ? current - back : 0n;
    }
    case "next": {
      const stored = await broker.storedOffset();
      return stored === undefined ? shape.earliest : stored + 1n;
    }
    case "timestamp": {
      if (await formatOf(ctx, shape) === "iggy-0.8") {
        const found = await timestampStart08(ctx, id, shape.catalog.entries, ask.value);
        return "offset" in found ? found.offset : undefined;
      }
      try {
        const r = await readRecords(ctx, { partition: id, timestamp: ask.value, maxBytes: 1 });
        return r.firstOffset;
      } catch (err) {
        if (err instanceof OffsetPastEnd) return undefined;
        throw err;
      }
    }
  }
}

function formatOf(ctx: ReadContext, shape: Shape): Promise<FormatName | undefined> {
  return catalogFormat(ctx, shape.catalog, deadlineIn(ctx.fetchTimeoutMs, ctx.clock));
}

/**
 * Decides a poll of partition `id` and, when it is tierd's, reads it.
 *
 * @param peak what the front builds of the answer: reserved ahead with the records

 * @returns tierd's answer, or undefined when the broker should answer the poll as it came
 * @throws what the broker side throws (the broker's refusal), and the read path's errors
 */
export async function planPoll<R>(
  deps: PlanDeps,
  broker: BrokerSide<R>,
  ask: PollAsk,
  id: PartitionId,
  peak: PollPeak,
): Promise<PollAnswer<R> | undefined> {
  if (ask.count === 0) return undefined;
  const shape = await shapeOf(deps.read, id);
  // A partition with nothing copied is all the broker's: every offset is (until a copy appears).
  deps.hints?.set(id, shape ? shape.firstLocal : 0n, deps.read.clock.monotonic());
  if (!shape) return undefined;
  if (
    ask.kind === "offset" && shape.certainlyLocal !== undefined &&
    ask.value >= shape.certainlyLocal
  ) return undefined;
  let view = await broker.probe(false);
  let start = await startOf(deps.read, broker, ask, id, shape, view.current);
  // Where the broker's part begins: its first retained offset (what it says, unless its files
  // say it is further on), or the end of its first local segment when tierd has copied that.
  const until = shape.firstLocalCopied && !ask.checked ? shape.certainlyLocal : shape.firstLocal;
  let brokerFirst = maxOf([view.first, until]) ?? (1n << 64n);
  if (start === undefined || start >= brokerFirst) return undefined;
  if (!view.fresh) {
    // tierd answers this one: its picture of the broker must be of now, not of before a
    // delete and recreate of the topic.
    view = await broker.probe(true);
    // Only a `last` poll starts from the broker's current offset; the others stay where they
    // were resolved (the consumer's stored offset, a timestamp) without asking again.
    if (ask.kind === "last") start = await startOf(deps.read, broker, ask, id, shape, view.current);
    brokerFirst = maxOf([view.first, until]) ?? (1n << 64n);
    if (start === undefined || start >= brokerFirst) return undefined;
  }
  if (broker.confirm && !(await broker.confirm())) {
    throw new PollNotJudged("the stream or topic name changed meaning while the poll was planned");
  }
  const label = `${id.stream}/${id.topic}/${id.partition}`;
  if (shape.knownEnd !== undefined && shape.knownEnd > view.current) {
    // tierd knows offsets the broker's partition never had: it is not the partition tierd's
    // copies are of (the topic was recreated, or purged) until the agent settles it. The
    // broker answers for its own partition.
    deps.logger.warn("the broker's partition is behind tierd's copies: poll forwarded", {
      partition: label,
      broker_current_offset: view.current,
      tierd_known_end: shape.knownEnd,
    });
    return undefined;
  }

  // The answer's expected peak is reserved whole before the first read: concurrent polls then
  // wait in line for room (503 + Retry-After when it does not come), instead of each reading a
  // part and all of them waiting on each other for the rest.
  const hold = new AnswerHold(deps.read.budget);
  const release = () => hold.release();
  const records = Math.min(MAX_POLL_BYTES, Math.ceil(ask.count * GUESS_MESSAGE_BYTES * 1.25));
  const messages = Math.ceil(records / GUESS_MESSAGE_BYTES);
  await hold.prepay(records + messages * DECODED_MESSAGE_BYTES + peak(records));
  try {
    const readerId = deps.continuity.readerFor(label, start);
    const tierd: PolledMessage[] = [];
    let brokerRest: BrokerAnswer<R> | undefined;
    let current = view.current;
    let from = start;
    let until = brokerFirst;
    let bytesLeft = MAX_POLL_BYTES;
    let format: FormatName | undefined;
    for (let round = 0; round < MAX_ROUNDS && tierd.length < ask.count; round++) {
      const slice = await readRemote(deps.read, {
        partition: id,
        from,
        until,
        count: ask.count - tierd.length,
        maxBytes: Math.max(1, bytesLeft),
        readerId,
      }, hold);
      format ??= slice.format;
      for (const m of slice.messages) {
        tierd.push(m);
        bytesLeft -= m.message.payload.length + m.message.userHeaders.length + 64;
      }
      from = slice.next;
      if (!slice.reachedBroker || tierd.length >= ask.count || bytesLeft <= 0) break;
      // The rest is the broker's: its own poll, without auto-commit (tierd commits once below),
      // for no more messages than the poll's bytes left hold at the size of tierd's (an answer
      // may carry fewer than asked; the client polls on), and held against the read budget.
      const used = MAX_POLL_BYTES - bytesLeft;
      const perMessage = tierd.length > 0 ? Math.max(1, used / tierd.length) : 1;
      const room = Math.max(1, Math.floor(bytesLeft / perMessage));
      const rest = await broker.pollFrom(from, Math.min(ask.count - tierd.length, room));
      await hold.hold(rest.size);
      if (rest.firstOffset !== undefined && rest.firstOffset > from) {
        // The broker dropped more since the probe: those offsets are tierd's to read too.
        until = rest.firstOffset;
        continue;
      }
      if (rest.lastOffset !== undefined) {
        brokerRest = rest; // it was asked for no more than are missing
        current = rest.current;
      }
      break;
    }
    deps.continuity.ended(label, readerId, from);
    if (tierd.length === 0 || format === undefined) {
      release();
      return undefined;
    }
    const last = brokerRest?.lastOffset ?? tierd.at(-1)!.message.offset;
    if (ask.autoCommit) await broker.storeOffset(last);
    deps.logger.debug("iggy poll answered from tierd", {
      partition: label,
      kind: ask.kind,
      start,
      count: tierd.length,
      broker_first: brokerFirst,
    });
    return { current, tierd, broker: brokerRest, format, hold, release };
  } catch (err) {
    release();
    throw err;
  }
}
