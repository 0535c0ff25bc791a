// The query of a message poll as the Iggy SDKs send it (`GET /streams/{s}/topics/{t}/messages?
// consumer_id=…&partition_id=…&kind=…&value=…&count=…&auto_commit=…`), read the way the broker's
// `PollMessages` deserializer reads it (core/common/src/http/messages/poll_messages.rs,
// types/message/polling_strategy.rs and polling_kind.rs, the same in 0.8.0 and 0.9): defaults
// `partition_id` 0, `kind` offset, `value` 0, `count` 10, `auto_commit` false, `consumer_id` 1;
// unknown parameters ignored. A query this parser does not understand is never answered by
// tierd: it goes to the broker, which gives its own error.
import type { PollKind } from "../iggy_front/plan.ts";

/** A parsed poll. */
export interface PollQuery {
  partition: number;
  kind: PollKind;
  /** The offset or timestamp (µs) of `offset` and `timestamp` polls. */
  value: bigint;
  count: number;
  autoCommit: boolean;
  /** The consumer id as given (a number or a name), or undefined for the default. */
  consumerId?: string;
  /** Everything the client sent, to forward derived polls with its own parameters. */
  params: URLSearchParams;
}

const KINDS: Record<string, PollKind> = {
  o: "offset",
  offset: "offset",
  t: "timestamp",
  timestamp: "timestamp",
  f: "first",
  first: "first",
  l: "last",
  last: "last",
  n: "next",
  next: "next",
};

const U32_MAX = 4_294_967_295n;
const U64_MAX = (1n << 64n) - 1n;

/** Rust's `u64::from_str`: decimal digits with an optional `+`. */
function unsigned(text: string, max: bigint): bigint | undefined {
  if (!/^\+?\d+$/.test(text)) return undefined;
  const n = BigInt(text);
  return n <= max ? n : undefined;
}

/**
 * Reads a poll query.
 * @returns the poll, or undefined when the broker should judge it (malformed, repeated keys)
 */
export function parsePollQuery(params: URLSearchParams): PollQuery | undefined {
  const seen = new Set<string>();
  for (const key of params.keys()) {
    if (seen.has(key)) return undefined;
    seen.add(key);
  }
  const get = (k: string) => params.get(k) ?? undefined;
  const partitionText = get("partition_id");
  const partition = partitionText === undefined ? 0n : unsigned(partitionText, U32_MAX);
  const kindText = get("kind");
  const kind = kindText === undefined ? "offset" : KINDS[kindText];
  const valueText = get("value");
  const value = valueText === undefined ? 0n : unsigned(valueText, U64_MAX);
  const countText = get("count");
  const count = countText === undefined ? 10n : unsigned(countText, U32_MAX);
  const commitText = get("auto_commit");
  const autoCommit = commitText === undefined
    ? false
    : commitText === "true"
    ? true
    : commitText === "false"
    ? false
    : undefined;
  const consumerId = get("consumer_id");
  if (consumerId !== undefined && (consumerId.length === 0 || consumerId.length > 255)) {
    return undefined;
  }
  if (
    partition === undefined || kind === undefined || value === undefined || count === undefined ||
    autoCommit === undefined
  ) return undefined;
  return {
    partition: Number(partition),
    kind,
    value,
    count: Number(count),
    autoCommit,
    consumerId,
    params,
  };
}

/** The client's query with some parameters replaced (for the polls tierd derives from it). */
export function derivedQuery(
  q: PollQuery,
  changes: { kind: PollKind; value: bigint; count: number; autoCommit: boolean },
): string {
  const out = new URLSearchParams(q.params);
  out.set("partition_id", String(q.partition));
  out.set("kind", changes.kind);
  out.set("value", changes.value.toString());
  out.set("count", String(changes.count));
  out.set("auto_commit", String(changes.autoCommit));
  return out.toString();
}

/** Stream and topic of a poll path, when both are numeric ids tierd can map to a partition. */
export function numericIds(
  stream: string,
  topic: string,
): { stream: number; topic: number } | undefined {
  const s = unsigned(stream, U32_MAX);
  const t = unsigned(topic, U32_MAX);
  if (s === undefined || t === undefined || stream.startsWith("+") || topic.startsWith("+")) {
    return undefined;
  }
  return { stream: Number(s), topic: Number(t) };
}
