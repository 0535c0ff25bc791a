// A `PollMessages` frame on the binary front: decided and read by the shared plan
// (src/iggy_front/plan.ts), with every broker call it needs made on the client's own connection —
// its session, its permissions — and the answer written in the broker's binary encoding for the
// partition's version, tierd's messages first and the broker's own answer spliced after them.
//
// A poll without a partition id (a consumer group member's, or a consumer's that lets the broker
// choose) is first sent to the broker as it came but without auto-commit: the broker picks the
// partition (advancing a member's turn exactly as the client's poll would have) and answers from
// its own data. When the range asked for starts below the broker's first retained offset of that
// partition, tierd answers from the bucket instead; either way an auto-committing poll's offset
// is stored through the broker, for the group, as the broker itself would have.
import type { PartitionId } from "../layout/partition.ts";
import type { Logger } from "../log.ts";
import { type NameCache, sameIds, type TopicIds } from "../iggy_front/names.ts";
import { type BrokerAnswer, type BrokerSide, planPoll, type PollAsk } from "../iggy_front/plan.ts";
import type { ReadContext } from "../read/context.ts";
import type { ContinuityReaders } from "../read/continuity.ts";
import type { BrokerLink } from "./broker_link.ts";
import { decodePolled08, encodeMessage08, polledPayload08 } from "./polled_08.ts";
import { splicePolled } from "./polled_binary.ts";
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
  encodeRequest08,
  encodeResponse08,
  encodeStoreConsumerOffsetRequest,
  type Identifier,
  type PollingKind,
  type PollMessagesRequest,
  type RequestFrame08,
} from "./wire.ts";

/** The broker refused a call tierd made on the client's session: its status is the answer. */
export class BrokerStatus extends Error {
  override readonly name = "BrokerStatus";
  constructor(readonly status: number, what: string) {
    super(`the broker answered ${what} with status ${status}`);
  }
}

/** What a poll is served with. */
export interface TcpPollDeps {
  read: ReadContext;
  continuity: ContinuityReaders;
  logger: Logger;
  names: NameCache;
  /** How long a probe's answer is reused on one connection. */
  probeTtlMs: number;
  monotonic(): number;
}

/** One client connection's state that polls share. */
export interface TcpPollSession {
  link: BrokerLink;
  /** A key naming this connection (for the name cache). */
  key: string;
  probes: Map<string, { at: number; first?: bigint; current: bigint }>;
}

/** The answer to send the client: a whole response frame. */
export interface TcpPollResult {
  frame: Uint8Array;
  /** True when tierd answered (some of) it from the bucket. */
  fromTierd: boolean;
  /** Gives the read memory back once the frame is written. */
  release(): void;
}

const NOTHING = () => {};

async function call(link: BrokerLink, code: number, payload: Uint8Array, what: string) {
  const answer = await link.request(encodeRequest08(code, payload));
  if (answer.status !== 0) throw new BrokerStatus(answer.status, what);
  return answer.payload;
}

/** The head of a poll answer and its first and last offsets. */
function pollSummary(payload: Uint8Array) {
  const { head, messages } = decodePolled08(payload);
  return {
    partitionId: head.partitionId,
    current: head.currentOffset,
    firstOffset: messages[0]?.message.offset,
    lastOffset: messages.at(-1)?.message.offset,
  };
}

/** How a client named a stream or topic, as text (for the name cache). */
function nameOf(id: Identifier): string {
  return id.kind === "numeric" ? String(id.id) : id.name;
}

/** The ids the identifiers name (a numeric one as it is, a name asked of the broker). */
async function idsOf(
  link: BrokerLink,
  stream: Identifier,
  topic: Identifier,
): Promise<TopicIds | undefined> {
  let streamId = stream.kind === "numeric" ? stream.id : undefined;
  if (streamId === undefined) {
    const answer = await link.request(
      encodeRequest08(COMMAND.GET_STREAM, encodeGetStreamRequest(stream)),
    );
    // Not found is an error status, or an empty answer (the broker's "none").
    if (answer.status !== 0) return undefined;
    streamId = decodeStreamId(answer.payload)?.id;
    if (streamId === undefined) return undefined;
  }
  let topicId = topic.kind === "numeric" ? topic.id : undefined;
  if (topicId === undefined) {
    const answer = await link.request(
      encodeRequest08(COMMAND.GET_TOPIC, encodeGetTopicRequest(stream, topic)),
    );
    if (answer.status !== 0) return undefined;
    topicId = decodeTopicId("iggy-0.8", answer.payload)?.id;
    if (topicId === undefined) return undefined;
  }
  return { stream: streamId, topic: topicId };
}

/** The broker, for one poll of one connection, on partition `partition`. */
function brokerSide(
  deps: TcpPollDeps,
  session: TcpPollSession,
  req: PollMessagesRequest,
  partition: number,
): BrokerSide<Uint8Array> {
  // Probes and continuation reads commit nothing, so they poll as a plain consumer (a group
  // member's own poll would take a turn of the group's partitions).
  const reader: Consumer = req.consumer.kind === "consumer"
    ? req.consumer
    : { kind: "consumer", id: req.consumer.id };
  const poll = (kind: PollingKind, value: bigint, count: number) =>
    encodePollMessagesRequest({
      consumer: reader,
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
      const payload = await call(
        session.link,
        COMMAND.POLL_MESSAGES,
        poll("first", 0n, 1),
        "a probe poll",
      );
      const head = pollSummary(payload);
      session.probes.set(probeKey, { at: now, first: head.firstOffset, current: head.current });
      return { first: head.firstOffset, current: head.current, fresh: true };
    },
    storedOffset: async () => {
      const payload = await call(
        session.link,
        COMMAND.GET_CONSUMER_OFFSET,
        encodeGetConsumerOffsetRequest(target),
        "GET_CONSUMER_OFFSET",
      );
      return decodeConsumerOffset(payload)?.storedOffset;
    },
    storeOffset: async (offset) => {
      await call(
        session.link,
        COMMAND.STORE_CONSUMER_OFFSET,
        encodeStoreConsumerOffsetRequest("iggy-0.8", { ...target, offset }),
        "STORE_CONSUMER_OFFSET",
      );
    },
    pollFrom: async (offset, count): Promise<BrokerAnswer<Uint8Array>> => {
      const payload = await call(
        session.link,
        COMMAND.POLL_MESSAGES,
        poll("offset", offset, count),
        "a poll",
      );
      const head = pollSummary(payload);
      return {
        current: head.current,
        firstOffset: head.firstOffset,
        lastOffset: head.lastOffset,
        answer: payload,
      };
    },
  };
}

/**
 * Answers one `PollMessages` frame.
 *
 * @param frame the client's frame, forwarded unchanged when the broker should answer it
 * @param req its decoded payload
 * @throws {BrokerStatus} the broker's refusal of a call tierd made, to be answered as that status
 * @throws the read path's errors (mapped to a status by the connection)
 */
export async function servePoll(
  deps: TcpPollDeps,
  session: TcpPollSession,
  frame: RequestFrame08,
  req: PollMessagesRequest,
): Promise<TcpPollResult> {
  const forward = async (): Promise<TcpPollResult> => {
    const answer = await session.link.request(frame.bytes);
    return { frame: answer.bytes, fromTierd: false, release: NOTHING };
  };
  if (req.count === 0) return forward();
  const ask: PollAsk = {
    kind: req.strategy.kind,
    value: req.strategy.value,
    count: req.count,
    autoCommit: req.autoCommit,
  };

  let ids: TopicIds | undefined;
  const named = req.streamId.kind !== "numeric" || req.topicId.kind !== "numeric";
  const lookup = () => idsOf(session.link, req.streamId, req.topicId);
  const streamName = nameOf(req.streamId);
  const topicName = nameOf(req.topicId);
  if (named) ids = await deps.names.resolve(session.key, streamName, topicName, lookup);
  else ids = await lookup();
  // The broker does not know the names: its own answer is the client's.
  if (!ids) return forward();

  let partition = req.partitionId;
  let brokerOwn: { payload: Uint8Array; head: ReturnType<typeof pollSummary> } | undefined;
  if (partition === undefined) {
    // The broker picks the partition: its own poll, without auto-commit.
    const answer = await session.link.request(
      encodeRequest08(
        COMMAND.POLL_MESSAGES,
        encodePollMessagesRequest({ ...req, autoCommit: false }),
      ),
    );
    if (answer.status !== 0) return { frame: answer.bytes, fromTierd: false, release: NOTHING };
    const head = pollSummary(answer.payload);
    brokerOwn = { payload: answer.payload, head };
    partition = head.partitionId;
  }

  const side = brokerSide(deps, session, req, partition);
  if (named) {
    const planned = ids;
    side.confirm = async () =>
      sameIds(
        planned,
        await deps.names.resolve(session.key, streamName, topicName, lookup, true),
      );
  }
  const id: PartitionId = { ...ids, partition };
  const answer = await planPoll(deps, side, ask, id);
  if (!answer) {
    if (!brokerOwn) return forward();
    // The broker's own answer stands; its auto-commit is tierd's to do.
    if (req.autoCommit && brokerOwn.head.lastOffset !== undefined) {
      await side.storeOffset(brokerOwn.head.lastOffset);
    }
    return { frame: encodeResponse08(0, brokerOwn.payload), fromTierd: false, release: NOTHING };
  }
  try {
    if (answer.format !== "iggy-0.8") {
      throw new Error(`a ${answer.format} partition behind a 0.8 broker connection`);
    }
    const ours = polledPayload08(
      { partitionId: partition, currentOffset: answer.current },
      answer.tierd.map(encodeMessage08),
    );
    const payload = answer.broker ? splicePolled(ours, answer.broker.answer) : ours;
    return { frame: encodeResponse08(0, payload), fromTierd: true, release: answer.release };
  } catch (err) {
    answer.release();
    throw err;
  }
}
