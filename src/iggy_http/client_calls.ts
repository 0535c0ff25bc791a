// The broker calls tierd makes for a poll it may answer itself, each with the client's own
// `Authorization` (never tierd's broker credentials), so the broker's permissions decide:
// - the probe `GET …/messages?kind=first&count=1` (the client's query otherwise) checks that
//   the broker accepts the token for polling this topic and tells the partition's first
//   retained offset and current offset; kept per token and partition for `ttlMs`;
// - `GET …/consumer-offsets` resolves a `next` poll's stored offset;
// - `PUT …/consumer-offsets` stores the offset of an auto-committing poll;
// - a continuation poll reads on in the broker's local data.
// A refusal comes back as {@link BrokerRefused}, to be answered to the client as it is.
import { createHash } from "node:crypto";
import { type Clock, systemClock } from "../base/clock.ts";
import { BrokerRefused, IggyHttpError } from "./errors.ts";
import { arrayElements, JsonShapeError, objectMembers, unsignedMember } from "./json_scan.ts";
import type { TopicIds } from "../iggy_front/names.ts";
import type { PartitionView } from "../iggy_front/plan.ts";
import { derivedQuery, type PollQuery } from "./query.ts";
import type { Upstream } from "./upstream.ts";

/** A poll answered by the broker, its messages as JSON texts. */
export interface BrokerPoll {
  current: bigint;
  /** Each message's JSON text, as the broker wrote it. */
  messages: string[];
  /** Offsets of the first and last message. */
  firstOffset?: bigint;
  lastOffset?: bigint;
  /** Bytes of the answer's text. */
  size: number;
}

const decoder = new TextDecoder();

/**
 * Reads a broker poll answer.
 * @throws {IggyHttpError} 502 when it is not the `PolledMessages` shape
 */
export function parseBrokerPoll(text: string): BrokerPoll {
  try {
    const top = objectMembers(text);
    const messages = top.get("messages");
    const elements = messages ? arrayElements(text, messages) : [];
    const offsetOf = (i: number) =>
      unsignedMember(text, "offset", objectMembers(text, elements[i]).get("header"));
    return {
      current: unsignedMember(text, "current_offset"),
      messages: elements.map((e) => text.slice(e.start, e.end)),
      firstOffset: elements.length > 0 ? offsetOf(0) : undefined,
      lastOffset: elements.length > 0 ? offsetOf(elements.length - 1) : undefined,
      size: text.length,
    };
  } catch (err) {
    if (!(err instanceof JsonShapeError)) throw err;
    throw new IggyHttpError(
      502,
      "broker_answer_unreadable",
      `the broker's poll answer: ${err.message}`,
    );
  }
}

/** Where a poll goes: the path's stream and topic as the client wrote them. */
export interface PollTarget {
  stream: string;
  topic: string;
}

/** The broker calls of one listener. */
export class ClientCalls {
  readonly #upstream: Upstream;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #probes = new Map<string, { at: number; view: Omit<PartitionView, "fresh"> }>();

  /**
   * @param ttlMs how long a probe's answer is reused for the same token and partition
   */
  constructor(upstream: Upstream, ttlMs: number, clock: Clock = systemClock) {
    this.#upstream = upstream;
    this.#ttlMs = ttlMs;
    this.#clock = clock;
  }

  #headers(auth: string | null, json = false): Headers {
    const h = new Headers({ accept: "application/json" });
    if (auth !== null) h.set("authorization", auth);
    if (json) h.set("content-type", "application/json");
    return h;
  }

  /** A GET answered 200 (or 404, when `missing` allows it); anything else is a refusal. */
  async #get(
    auth: string | null,
    path: string,
    what: string,
    missing = false,
  ): Promise<{ status: number; text: string }> {
    const res = await this.#upstream.call({ method: "GET", path, headers: this.#headers(auth) });
    if (res.status !== 200 && !(missing && res.status === 404)) {
      throw new BrokerRefused(res.status, res.headers, res.body, what);
    }
    return { status: res.status, text: decoder.decode(res.body) };
  }

  /**
   * Checks the token and reads the partition's bounds (reused for `ttlMs` per token, unless
   * `fresh`: a poll tierd answers itself needs bounds read now, not before a recreate).
   * @throws {BrokerRefused} when the broker refuses the token or the poll
   */
  async probe(
    auth: string | null,
    target: PollTarget,
    q: PollQuery,
    options: { fresh?: boolean } = {},
  ): Promise<PartitionView> {
    const key = createHash("sha256")
      .update(`${auth}\n${target.stream}\n${target.topic}\n${q.partition}\n${q.consumerId ?? ""}`)
      .digest("base64");
    const now = this.#clock.monotonic();
    const hit = this.#probes.get(key);
    if (!options.fresh && hit && now - hit.at < this.#ttlMs) return { ...hit.view, fresh: false };
    const query = derivedQuery(q, { kind: "first", value: 0n, count: 1, autoCommit: false });
    const { text } = await this.#get(auth, `${messagesPath(target)}?${query}`, "a probe poll");
    const poll = parseBrokerPoll(text);
    const view = { first: poll.firstOffset, current: poll.current };
    if (this.#probes.size > 10_000) this.#probes.clear();
    this.#probes.set(key, { at: now, view });
    return { ...view, fresh: true };
  }

  /**
   * The consumer's stored offset, or undefined when it has none (the broker's 404).
   * @throws {BrokerRefused} when the broker refuses
   */
  async storedOffset(
    auth: string | null,
    target: PollTarget,
    q: PollQuery,
  ): Promise<bigint | undefined> {
    const params = new URLSearchParams();
    if (q.consumerId !== undefined) params.set("consumer_id", q.consumerId);
    params.set("partition_id", String(q.partition));
    const path = `/streams/${target.stream}/topics/${target.topic}/consumer-offsets?${params}`;
    const { status, text } = await this.#get(auth, path, "GET consumer-offsets", true);
    if (status === 404) return undefined;
    try {
      return unsignedMember(text, "stored_offset");
    } catch (err) {
      if (!(err instanceof JsonShapeError)) throw err;
      throw new IggyHttpError(
        502,
        "broker_answer_unreadable",
        `the broker's consumer offset: ${err.message}`,
      );
    }
  }

  /**
   * Stores the consumer's offset (an auto-committing poll that tierd answered).
   * @throws {BrokerRefused} when the broker refuses
   */
  async storeOffset(
    auth: string | null,
    target: PollTarget,
    q: PollQuery,
    offset: bigint,
  ): Promise<void> {
    const body = new TextEncoder().encode(
      `{"consumer_id":${JSON.stringify(q.consumerId ?? "1")},"partition_id":${q.partition},` +
        `"offset":${offset}}`,
    );
    const res = await this.#upstream.call({
      method: "PUT",
      path: `/streams/${target.stream}/topics/${target.topic}/consumer-offsets`,
      headers: this.#headers(auth, true),
      body,
    });
    if (res.status < 200 || res.status > 299) {
      throw new BrokerRefused(res.status, res.headers, res.body, "PUT consumer-offsets");
    }
  }

  /**
   * The numeric ids of the target's stream and topic as the broker names them for this token
   * (`GET /streams/{s}` and `GET /streams/{s}/topics/{t}`); undefined when it does not know them.
   * @throws {BrokerRefused} when the broker refuses
   */
  async topicIds(auth: string | null, target: PollTarget): Promise<TopicIds | undefined> {
    const stream = await this.#idOf(auth, `/streams/${target.stream}`, "GET stream");
    if (stream === undefined) return undefined;
    const topic = await this.#idOf(
      auth,
      `/streams/${target.stream}/topics/${target.topic}`,
      "GET topic",
    );
    return topic === undefined ? undefined : { stream, topic };
  }

  async #idOf(auth: string | null, path: string, what: string): Promise<number | undefined> {
    const { status, text } = await this.#get(auth, path, what, true);
    if (status === 404) return undefined;
    try {
      return Number(unsignedMember(text, "id"));
    } catch (err) {
      if (!(err instanceof JsonShapeError)) throw err;
      throw new IggyHttpError(
        502,
        "broker_answer_unreadable",
        `the broker's ${what}: ${err.message}`,
      );
    }
  }

  /**
   * A poll of the broker's own data, from `offset`, for `count` messages.
   * @throws {BrokerRefused} when the broker refuses
   */
  async pollFrom(
    auth: string | null,
    target: PollTarget,
    q: PollQuery,
    offset: bigint,
    count: number,
    autoCommit: boolean,
  ): Promise<BrokerPoll> {
    const query = derivedQuery(q, { kind: "offset", value: offset, count, autoCommit });
    const res = await this.#upstream.call({
      method: "GET",
      path: `${messagesPath(target)}?${query}`,
      headers: this.#headers(auth),
    });
    if (res.status !== 200) throw new BrokerRefused(res.status, res.headers, res.body, "a poll");
    return parseBrokerPoll(decoder.decode(res.body));
  }
}

/** `/streams/{s}/topics/{t}/messages`. */
export function messagesPath(target: PollTarget): string {
  return `/streams/${target.stream}/topics/${target.topic}/messages`;
}
