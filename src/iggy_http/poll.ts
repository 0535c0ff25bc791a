// A message poll on the Iggy-compatible HTTP listener: decided and read by the shared plan
// (src/iggy_front/plan.ts: answered by tierd when it starts below the broker's first retained
// offset, otherwise forwarded to the broker untouched), with the broker calls made over HTTP with
// the client's own `Authorization` (client_calls.ts) and the answer written as the broker's JSON.
// Streams and topics named by name are resolved to ids through the broker first (names.ts).
import { pieceStream } from "../base/piece_stream.ts";
import type { Logger } from "../log.ts";
import type { PartitionId } from "../layout/partition.ts";
import type { ContinuityReaders } from "../read/continuity.ts";
import type { ReadContext } from "../read/context.ts";
import { type NameCache, sameIds } from "../iggy_front/names.ts";
import { type BrokerSide, planPoll } from "../iggy_front/plan.ts";
import type { BrokerPoll, ClientCalls, PollTarget } from "./client_calls.ts";
import { errorResponse } from "./errors.ts";
import type { PolledMessage } from "../iggy_front/remote_read.ts";
import { polledJsonHead } from "./polled_json.ts";
import { messagesPiece } from "./polled_json_bytes.ts";
import { numericIds, parsePollQuery, type PollQuery } from "./query.ts";

/** What a poll is served with. */
export interface PollDeps {
  read: ReadContext;
  calls: ClientCalls;
  continuity: ContinuityReaders;
  logger: Logger;
  /** Forwards the request to the broker unchanged. */
  forward: (req: Request) => Promise<Response>;
  /** Names of streams and topics resolved to ids, per token. */
  names: NameCache;
  /** Called when tierd answers a poll from the bucket. */
  answered?: () => void;
}

/** Read memory an answer's pieces reserve: the one being made and the one being sent. */
const PIECE_BYTES = 2 << 20;

/**
 * The poll answer as the broker writes it (`polledJson`), made as the client takes it: the
 * head, then the messages' JSON about a MiB at a time (tierd's made from the records it holds,
 * then the broker's as it sent them), then the tail. The answer never exists whole; the read
 * memory goes back once it has been sent (or abandoned).
 */
function streamedPoll(
  partition: number,
  current: bigint,
  tierd: PolledMessage[],
  broker: string[],
  release: () => void,
): ReadableStream<Uint8Array> {
  return pieceStream(pollPieces(partition, current, tierd, broker), { release });
}

function* pollPieces(
  partition: number,
  current: bigint,
  tierd: PolledMessage[],
  broker: string[],
): Generator<Uint8Array> {
  const encoder = new TextEncoder();
  const total = tierd.length + broker.length;
  yield encoder.encode(polledJsonHead(partition, current, total));
  let next = 0;
  while (next < tierd.length) {
    // tierd's messages, written as bytes (no string per message).
    const piece = messagesPiece(tierd, next, PIECE_BYTES / 2);
    next = piece.next;
    yield piece.bytes;
  }
  while (next < total) {
    let piece = "";
    while (next < total && piece.length < PIECE_BYTES / 2) {
      if (next > 0) piece += ",";
      piece += broker[next - tierd.length];
      next++;
    }
    yield encoder.encode(piece);
  }
  yield encoder.encode("]}");
}

/** The broker, for one HTTP client's poll. */
function brokerSide(
  calls: ClientCalls,
  auth: string | null,
  target: PollTarget,
  q: PollQuery,
): BrokerSide<BrokerPoll> {
  return {
    probe: (fresh) => calls.probe(auth, target, q, { fresh }),
    storedOffset: () => calls.storedOffset(auth, target, q),
    storeOffset: (offset) => calls.storeOffset(auth, target, q, offset),
    pollFrom: async (offset, count) => {
      const rest = await calls.pollFrom(auth, target, q, offset, count, false);
      return { ...rest, answer: rest };
    },
  };
}

/**
 * Answers `GET /streams/{s}/topics/{t}/messages`.
 * @returns tierd's answer, the broker's (forwarded), or an error in the broker's shape
 */
export async function servePoll(
  deps: PollDeps,
  req: Request,
  target: PollTarget,
): Promise<Response> {
  const url = new URL(req.url);
  const q = parsePollQuery(url.searchParams);
  if (!q || q.count === 0) return deps.forward(req);
  try {
    const auth = req.headers.get("authorization");
    const side = brokerSide(deps.calls, auth, target, q);
    let ids = numericIds(target.stream, target.topic);
    if (!ids) {
      const lookup = () => deps.calls.topicIds(auth, target);
      const client = auth ?? "";
      ids = await deps.names.resolve(client, target.stream, target.topic, lookup);
      // The broker does not know the names: its own answer (a 404) is the client's.
      if (!ids) return deps.forward(req);
      const planned = ids;
      side.confirm = async () =>
        sameIds(
          planned,
          await deps.names.resolve(client, target.stream, target.topic, lookup, true),
        );
    }
    const id: PartitionId = { ...ids, partition: q.partition };
    const answer = await planPoll(deps, side, q, id, () => PIECE_BYTES);
    if (!answer) return deps.forward(req);
    deps.answered?.();
    // The pieces being made and sent, beside the records the answer holds already.
    try {
      await answer.hold.hold(PIECE_BYTES);
    } catch (err) {
      answer.release();
      throw err;
    }
    const body = streamedPoll(
      q.partition,
      answer.current,
      answer.tierd,
      answer.broker?.answer.messages ?? [],
      answer.release,
    );
    return new Response(body, { status: 200, headers: { "content-type": "application/json" } });
  } catch (err) {
    const res = errorResponse(err);
    if (res.status >= 500) {
      deps.logger.warn("iggy poll failed", { path: url.pathname, status: res.status, err });
    }
    return res;
  }
}
