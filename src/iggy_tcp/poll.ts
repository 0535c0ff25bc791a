// A `PollMessages` frame on the binary front: decided and read by the shared plan
// (src/iggy_front/plan.ts), with every broker call it needs made on the client's own connection —
// its session, its permissions — and the answer written in the broker's binary encoding for the
// broker's version (0.8 messages, 0.9 batches sliced as the broker slices them), tierd's messages
// first and the broker's own answer spliced after them.
//
// A poll without a partition id (a consumer group member's, or a consumer's that lets the broker
// choose) is first sent to the broker as it came but without auto-commit: the broker picks the
// partition (advancing a member's turn exactly as the client's poll would have) and answers from
// its own data. When the range asked for starts below the broker's first retained offset of that
// partition, tierd answers from the bucket instead; either way an auto-committing poll's offset
// is stored through the broker, for the consumer or group, as the broker itself would have.
import type { PartitionId } from "../layout/partition.ts";
import type { Logger } from "../log.ts";
import { type NameCache, sameIds, type TopicIds } from "../iggy_front/names.ts";
import {
  type BrokerAnswer,
  type BrokerSide,
  type LocalHints,
  planPoll,
  type PollAsk,
} from "../iggy_front/plan.ts";
import type { PolledMessage } from "../iggy_front/remote_read.ts";
import type { ReadContext } from "../read/context.ts";
import type { ContinuityReaders } from "../read/continuity.ts";
import { decodePolled08, encodeMessage08, polledPayload08 } from "./polled_08.ts";
import {
  decodePolled09,
  type OutgoingBatch09,
  polledPayload09,
  sliceRecord09,
} from "./polled_09.ts";
import { POLL_HEAD_SIZE, splicePolled } from "./polled_binary.ts";
import { BATCH_HEADER_SIZE } from "../format/iggy09.ts";
import {
  COMMAND,
  type Consumer,
  decodeConsumerOffset,
  decodeStreamId,
  decodeTopicId,
  encodeGetConsumerOffsetRequest,
  encodeGetStreamRequest,
  encodeGetTopicRequest,
  encodePollMessagesRequest,
  encodeStoreConsumerOffsetRequest,
  type Identifier,
  type PollingKind,
  type PollMessagesRequest,
  VSR_COMMAND,
  VSR_COMMAND_OFFSET,
  VSR_HEADER_SIZE,
  WireError,
} from "./wire.ts";

/** The broker refused a call tierd made on the client's session: its answer is the client's. */
export class BrokerStatus extends Error {
  override readonly name = "BrokerStatus";
  /**
   * @param status the broker's error code
   * @param frame the broker's whole answer frame, to be sent to the client as it is
   */
  constructor(readonly status: number, readonly frame: Uint8Array, what: string) {
    super(`the broker answered ${what} with status ${status}`);
  }
}

/** The broker's version, as its on-disk format names it. */
export type BrokerVersion = "iggy-0.8" | "iggy-0.9";

/** What a poll is served with. */
export interface TcpPollDeps {
  read: ReadContext;
  continuity: ContinuityReaders;
  logger: Logger;
  names: NameCache;
  /** How long a probe's answer is reused on one connection. */
  probeTtlMs: number;
  monotonic(): number;
  /** What the last plan of each partition found of its local segments. */
  hints?: LocalHints;
}

/**
 * One client connection's session with the broker, as a poll being served sees it: calls of
 * tierd's own made on it, and the answers to the client's poll.
 */
export interface TcpSession {
  version: BrokerVersion;
  /** A key naming this connection (for the name cache). */
  key: string;
  /** Probe answers kept for this connection. */
  probes: Map<string, { at: number; first?: bigint; current: bigint }>;
  /**
   * Sends a command of tierd's own on the client's session.
   * @returns the answer's payload
   * @throws {BrokerStatus} when the broker refuses it
   */
  call(code: number, payload: Uint8Array, what: string): Promise<Uint8Array>;
  /**
   * Forwards the client's poll frame unchanged. The broker's answer is passed to the client as
   * it arrives — always, or when `check` accepts its first {@link answerCheckBytes} bytes (all of
   * it when shorter); a refused answer comes back whole and nothing is sent.
   */
  forward(check?: (head: Uint8Array) => boolean): Promise<Forwarded>;
  /** A success answer to the client's poll, carrying `payload`. */
  answer(payload: Uint8Array): Uint8Array;
}

/** A forwarded frame's answer: passed to the client (its size), or refused and kept whole. */
export type Forwarded = { sent: number } | { frame: Uint8Array };

/** How much of the broker's answer to a poll {@link brokerHad} reads. */
export function answerCheckBytes(version: BrokerVersion): number {
  return version === "iggy-0.8"
    ? 8 + POLL_HEAD_SIZE + 32
    : VSR_HEADER_SIZE + POLL_HEAD_SIZE + BATCH_HEADER_SIZE + 28;
}

/** The answer to a poll. */
export interface TcpPollResult {
  /** The whole response frame to send the client; absent when the broker's was passed on. */
  frame?: Uint8Array;
  /** Bytes of the answer (sent, or to send). */
  bytes: number;
  /** True when tierd answered (some of) it from the bucket. */
  fromTierd: boolean;
  /** Gives the read memory back once the frame is written. */
  release(): void;
}

const NOTHING = () => {};
/**
 * What a binary answer builds of its records and the broker's answer: up to three copies
 * (tierd's messages encoded, spliced with the broker's, framed).
 */
const BUILT = (bytes: number) => 3 * bytes;
const U64_MAX = (1n << 64n) - 1n;

/** The head of a poll answer and its first and last offsets. */
function pollSummary(version: BrokerVersion, payload: Uint8Array) {
  const decoded = version === "iggy-0.8"
    ? decodePolled08(payload)
    : (({ head, batches }) => ({ head, messages: batches.flatMap((b) => b.messages) }))(
      decodePolled09(payload),
    );
  return {
    partitionId: decoded.head.partitionId,
    current: decoded.head.currentOffset,
    firstOffset: decoded.messages[0]?.message.offset,
    lastOffset: decoded.messages.at(-1)?.message.offset,
  };
}

/** How a client named a stream or topic, as text (for the name cache). */
function nameOf(id: Identifier): string {
  return id.kind === "numeric" ? String(id.id) : id.name;
}

/** The ids the identifiers name (a numeric one as it is, a name asked of the broker). */
async function idsOf(
  session: TcpSession,
  stream: Identifier,
  topic: Identifier,
): Promise<TopicIds | undefined> {
  const ask = async (code: number, payload: Uint8Array, what: string) => {
    try {
      return await session.call(code, payload, what);
    } catch (err) {
      // Not found is an error status at some versions; the broker's own answer to the
      // client's poll tells the client so.
      if (err instanceof BrokerStatus) return undefined;
      throw err;
    }
  };
  let streamId = stream.kind === "numeric" ? stream.id : undefined;
  if (streamId === undefined) {
    const payload = await ask(COMMAND.GET_STREAM, encodeGetStreamRequest(stream), "GET_STREAM");
    streamId = payload && payload.length > 0 ? decodeStreamId(payload)?.id : undefined;
    if (streamId === undefined) return undefined;
  }
  let topicId = topic.kind === "numeric" ? topic.id : undefined;
  if (topicId === undefined) {
    const payload = await ask(
      COMMAND.GET_TOPIC,
      encodeGetTopicRequest(stream, topic),
      "GET_TOPIC",
    );
    topicId = payload && payload.length > 0
      ? decodeTopicId(session.version, payload)?.id
      : undefined;
    if (topicId === undefined) return undefined;
  }
  return { stream: streamId, topic: topicId };
}

/** The broker, for one poll of one connection, on partition `partition`. */
function brokerSide(
  deps: TcpPollDeps,
  session: TcpSession,
  req: PollMessagesRequest,
  partition: number,
): BrokerSide<Uint8Array> {
  // Probes commit nothing and must not count as a group member's poll (the broker remembers a
  // member's last polled offset for rebalancing): they poll as a plain consumer. The broker's
  // part of an answer is the member's own poll of its partition, remembered as the broker would.
  const prober: Consumer = req.consumer.kind === "consumer"
    ? req.consumer
    : { kind: "consumer", id: req.consumer.id };
  const poll = (consumer: Consumer, kind: PollingKind, value: bigint, count: number) =>
    encodePollMessagesRequest({
      consumer,
      streamId: req.streamId,
      topicId: req.topicId,
      partitionId: partition,
      strategy: { kind, value },
      count,
      autoCommit: false,
    });
  const target = { ...req, partitionId: partition };
  const probeKey = `${nameOf(req.streamId)}\n${nameOf(req.topicId)}\n${partition}`;
  return {
    probe: async (fresh) => {
      const now = deps.monotonic();
      const hit = session.probes.get(probeKey);
      if (!fresh && hit && now - hit.at < deps.probeTtlMs) {
        return { first: hit.first, current: hit.current, fresh: false };
      }
      const payload = await session.call(
        COMMAND.POLL_MESSAGES,
        poll(prober, "first", 0n, 1),
        "a probe poll",
      );
      const head = pollSummary(session.version, payload);
      if (session.probes.size > 1000) session.probes.clear();
      session.probes.set(probeKey, { at: now, first: head.firstOffset, current: head.current });
      return { first: head.firstOffset, current: head.current, fresh: true };
    },
    storedOffset: async () => {
      const payload = await session.call(
        COMMAND.GET_CONSUMER_OFFSET,
        encodeGetConsumerOffsetRequest(target),
        "GET_CONSUMER_OFFSET",
      );
      return decodeConsumerOffset(payload)?.storedOffset;
    },
    storeOffset: async (offset) => {
      await session.call(
        COMMAND.STORE_CONSUMER_OFFSET,
        encodeStoreConsumerOffsetRequest(session.version, { ...target, offset }),
        "STORE_CONSUMER_OFFSET",
      );
    },
    pollFrom: async (offset, count): Promise<BrokerAnswer<Uint8Array>> => {
      const payload = await session.call(
        COMMAND.POLL_MESSAGES,
        poll(req.consumer, "offset", offset, count),
        "a poll",
      );
      const head = pollSummary(session.version, payload);
      return {
        current: head.current,
        firstOffset: head.firstOffset,
        lastOffset: head.lastOffset,
        answer: payload,
        size: payload.length,
      };
    },
  };
}

/**
 * tierd's messages as the broker's answer would carry them: 0.8 messages as stored; 0.9 batches
 * as stored, or sliced as the broker slices a batch a poll takes only part of.
 */
function encodeOurs(
  version: BrokerVersion,
  head: { partitionId: number; currentOffset: bigint },
  messages: PolledMessage[],
): Uint8Array {
  if (version === "iggy-0.8") {
    return polledPayload08(head, messages.map((m) => m.record ?? encodeMessage08(m)));
  }
  const batches: OutgoingBatch09[] = [];
  for (let i = 0; i < messages.length;) {
    const record = messages[i].record;
    let j = i + 1;
    while (j < messages.length && messages[j].record === record) j++;
    if (!record) throw new WireError("bad_batch", "a 0.9 message read without its batch");
    const batch = sliceRecord09(record, {
      lookup: { offset: messages[i].message.offset },
      count: j - i,
    });
    if (!batch || batch.count !== j - i) {
      throw new WireError(
        "bad_batch",
        `the batch of offset ${messages[i].message.offset} slices wrong`,
      );
    }
    batches.push(batch);
    i = j;
  }
  return polledPayload09(head, batches);
}

/**
 * Answers one `PollMessages` frame.
 *
 * @param req the frame's decoded payload
 * @throws {BrokerStatus} the broker's refusal of a call tierd made, to be answered with its frame
 * @throws the read path's errors (answered by the connection as a failure status)
 */
export async function servePoll(
  deps: TcpPollDeps,
  session: TcpSession,
  req: PollMessagesRequest,
): Promise<TcpPollResult> {
  const forward = async () => forwarded(await session.forward());
  // An offset poll's answer is the broker's to give when it starts where asked (brokerHad).
  const hadIt = (head: Uint8Array) => brokerHad(session.version, head, req.strategy.value);
  if (req.count === 0) return forward();
  const ask: PollAsk = {
    kind: req.strategy.kind,
    value: req.strategy.value,
    count: req.count,
    autoCommit: req.autoCommit,
  };

  const named = req.streamId.kind !== "numeric" || req.topicId.kind !== "numeric";
  const lookup = () => idsOf(session, req.streamId, req.topicId);
  const streamName = nameOf(req.streamId);
  const topicName = nameOf(req.topicId);
  const ids = named
    ? await deps.names.resolve(session.key, streamName, topicName, lookup)
    : await lookup();
  // The broker does not know the names: its own answer is the client's.
  if (!ids) return forward();

  // A consumer's poll without a partition reads partition 0 (0.8 and 0.9 alike).
  let partition = req.partitionId ?? 0;
  const group = req.consumer.kind === "consumer_group";
  // A group member's poll is the broker's to admit: which partition (0.8 picks the member's
  // next one when none is given), and whether the member may poll it now (0.9 refuses a
  // partition being handed to another member, which makes the client re-sync). Asked with the
  // client's poll but past any end: it answers no message, so the broker does not take it for
  // the member's last polled offset (which a rebalance waits for the member to commit).
  // An offset poll that commits nothing can be asked again at no cost: the broker's answer to it
  // is checked, and tierd plans again when it shows the broker no longer has the offset.
  const checked = !group && req.strategy.kind === "offset" && !req.autoCommit;
  if (checked && deps.hints) {
    // The fast way for an offset poll of what the broker has: forwarded on the partition's last
    // plan, without reading tierd's catalog again — and planned afresh when the broker's answer
    // shows it no longer has the offset (the agent evicted since; asking again commits nothing).
    const id = { ...ids, partition };
    const local = deps.hints.firstLocal(id, deps.monotonic());
    if (local !== undefined && req.strategy.value >= local) {
      const answer = await session.forward(hadIt);
      if ("sent" in answer) return forwarded(answer);
      deps.hints.forget(id);
    }
  }
  const admit = async (partitionId: number | undefined) => {
    const payload = await session.call(
      COMMAND.POLL_MESSAGES,
      encodePollMessagesRequest({
        ...req,
        partitionId,
        strategy: { kind: "offset", value: U64_MAX },
        count: 1,
        autoCommit: false,
      }),
      "the member's partition",
    );
    const head = pollSummary(session.version, payload);
    // No partition for the member (0.8 answers partition 0 at offset 0, 0.9 u32::MAX when it
    // must sync first), or an answer tierd does not expect: the broker's answer stands.
    const refused = head.partitionId === 0xffff_ffff ||
      (head.partitionId === 0 && head.current === 0n) || head.firstOffset !== undefined;
    return { payload, partition: refused ? undefined : head.partitionId };
  };
  if (group) {
    const admitted = await admit(req.partitionId);
    if (admitted.partition === undefined) return forward();
    partition = admitted.partition;
  }
  const side = brokerSide(deps, session, req, partition);
  if (named) {
    side.confirm = async () =>
      sameIds(ids, await deps.names.resolve(session.key, streamName, topicName, lookup, true));
  }
  const id: PartitionId = { ...ids, partition };
  let answer;
  try {
    answer = await planPoll(deps, side, { ...ask, checked }, id, BUILT);
    if (!answer && checked) {
      const brokers = await session.forward(hadIt);
      if ("sent" in brokers) return forwarded(brokers);
      // The broker dropped the offset since the plan: tierd answers what it has copied.
      deps.hints?.forget(id);
      answer = await planPoll(deps, side, ask, id, BUILT);
      if (!answer) return forwarded(brokers);
    }
  } catch (err) {
    if (!(group && err instanceof BrokerStatus)) throw err;
    // A rebalance took the partition from the member while tierd read it (the broker admits,
    // reads and commits a member's poll at once; tierd cannot): the member gets what the broker
    // answers a poll of a partition it no longer has — 0.9 its refusal, which makes the client
    // re-sync, 0.8 no message — and what was read goes to the partition's new owner.
    const again = await admit(partition);
    if (again.partition === undefined) return forwardAnswer(session, again.payload);
    throw err;
  }
  if (!answer) {
    if (!group || req.partitionId !== undefined) return forward();
    // The member's poll as it came, of the partition the broker picked above (asking again
    // without one would take another turn).
    return forwardAnswer(
      session,
      await session.call(
        COMMAND.POLL_MESSAGES,
        encodePollMessagesRequest({ ...req, partitionId: partition }),
        "the member's poll",
      ),
    );
  }
  try {
    // The answer is built beside the records it is made of: held against the read budget too.
    const records = new Set<Uint8Array>();
    let recordBytes = 0;
    for (const m of answer.tierd) {
      if (m.record && !records.has(m.record)) {
        records.add(m.record);
        recordBytes += m.record.length;
      }
    }
    await answer.hold.hold(BUILT(recordBytes + (answer.broker?.size ?? 0)));
    if (answer.format !== session.version) {
      throw new WireError(
        "bad_value",
        `partition ${id.stream}/${id.topic}/${id.partition} is ${answer.format} on disk, the ` +
          `broker's connection speaks ${session.version}`,
      );
    }
    const ours = encodeOurs(session.version, {
      partitionId: partition,
      currentOffset: answer.current,
    }, answer.tierd);
    const payload = answer.broker ? splicePolled(ours, answer.broker.answer) : ours;
    const frame = session.answer(payload);
    return { frame, bytes: frame.length, fromTierd: true, release: answer.release };
  } catch (err) {
    answer.release();
    throw err;
  }
}

/**
 * True when the broker's answer `frame` (or its first {@link answerCheckBytes} bytes) to an
 * offset poll from `offset` is the broker's to give:
 * a refusal, messages from `offset` on, or none because `offset` is past its end. False when it
 * answered from a later offset, or nothing for an offset it should have (it dropped them).
 */
function brokerHad(version: BrokerVersion, frame: Uint8Array, offset: bigint): boolean {
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  let payload: Uint8Array;
  if (version === "iggy-0.8") {
    if (frame.length < 8 || view.getUint32(0, true) !== 0) return true;
    payload = frame.subarray(8);
  } else {
    if (frame.length < VSR_HEADER_SIZE || frame[VSR_COMMAND_OFFSET] !== VSR_COMMAND.REPLY) {
      return true;
    }
    if (view.getUint32(VSR_STATUS_OFFSET, true) !== 0) return true;
    payload = frame.subarray(VSR_HEADER_SIZE);
  }
  const head = firstPolled(version, payload);
  if (!head) return true; // not a poll answer tierd can read: the broker's answer goes
  return head.count === 0 ? offset > head.current : head.firstOffset === offset;
}

/**
 * The head of a poll answer and its first message's offset, read where they lie (this runs on
 * every forwarded poll: no message is walked): 0.8, the first message's `offset` field; 0.9, the
 * first batch's base offset plus its first frame's offset delta. Undefined when too short.
 */
function firstPolled(version: BrokerVersion, payload: Uint8Array) {
  if (payload.length < POLL_HEAD_SIZE) return undefined;
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const current = view.getBigUint64(4, true);
  const count = view.getUint32(12, true);
  if (count === 0) return { current, count, firstOffset: undefined };
  const at = POLL_HEAD_SIZE;
  if (version === "iggy-0.8") {
    if (payload.length < at + 32) return undefined;
    return { current, count, firstOffset: view.getBigUint64(at + 24, true) };
  }
  if (payload.length < at + BATCH_HEADER_SIZE + 28) return undefined;
  const base = view.getBigUint64(at + 8, true);
  const delta = view.getUint32(at + BATCH_HEADER_SIZE + 24, true);
  return { current, count, firstOffset: base + BigInt(delta) };
}

/** Where a 0.9 reply header keeps its status (`ReplyHeader`, header.rs). */
const VSR_STATUS_OFFSET = 216;

function forwardAnswer(session: TcpSession, payload: Uint8Array): TcpPollResult {
  return forwarded({ frame: session.answer(payload) });
}

/** The broker's answer as the poll's: passed on already, or whole to send. */
function forwarded(answer: Forwarded): TcpPollResult {
  return "sent" in answer
    ? { bytes: answer.sent, fromTierd: false, release: NOTHING }
    : { frame: answer.frame, bytes: answer.frame.length, fromTierd: false, release: NOTHING };
}
