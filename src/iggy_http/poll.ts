// A message poll on the Iggy-compatible listener: answered by tierd when the range it asks for
// starts below the broker's first retained offset of the partition, otherwise forwarded to the
// broker untouched (and so byte-identical to the broker's own answer).
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
// message it answered through the broker's consumer-offsets API, with the client's token.
//
// Nothing is answered from the bucket unless the broker accepted the client's token for a poll of
// that topic just before (the probe in client_calls.ts); its refusal (401 for an unknown or
// expired token, 403, 404) is the client's answer.
import type { Logger } from "../log.ts";
import type { PartitionId } from "../layout/partition.ts";
import { type Catalog, catalogFormat, type CatalogSegment, loadCatalog } from "../read/catalog.ts";
import type { ReadContext } from "../read/context.ts";
import type { ContinuityReaders } from "../read/continuity.ts";
import { OffsetPastEnd, UnknownPartition } from "../read/errors.ts";
import { readRecords } from "../read/read_records.ts";
import { deadlineIn } from "../read/_fetch.ts";
import type { ClientCalls, PollTarget } from "./client_calls.ts";
import { errorResponse } from "./errors.ts";
import { messageJson, polledJson } from "./polled_json.ts";
import { numericIds, parsePollQuery, type PollQuery } from "./query.ts";
import { readRemote } from "./remote_read.ts";
import { timestampStart08 } from "./timestamp_08.ts";

/** Record bytes one poll answered by tierd reads at most (at least one message is answered). */
export const MAX_POLL_BYTES = 32 * 1024 * 1024;
/** Rounds of "the broker dropped more while we read" a poll retries before answering. */
const MAX_ROUNDS = 3;

/** What a poll is served with. */
export interface PollDeps {
  read: ReadContext;
  calls: ClientCalls;
  continuity: ContinuityReaders;
  logger: Logger;
  /** Forwards the request to the broker unchanged. */
  forward: (req: Request) => Promise<Response>;
}

/** The partition's shape in tierd's catalog. */
interface Shape {
  catalog: Catalog;
  /** The first offset tierd can read (copies included). */
  earliest: bigint;
  /** Start of the first segment whose files the broker still has. */
  firstLocal?: bigint;
  /**
   * Polls starting at or after this are certainly the broker's: the start of its second local
   * segment (its first may be going, a 0.9 broker deletes files after it answered).
   */
  certainlyLocal?: bigint;
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
    firstLocal: local[0]?.start,
    certainlyLocal: local[1]?.start ?? local[0]?.start,
    knownEnd: maxOf(segments.map((s) => s.end)),
  };
}

function maxOf(values: (bigint | undefined)[]): bigint | undefined {
  let out: bigint | undefined;
  for (const v of values) if (v !== undefined && (out === undefined || v > out)) out = v;
  return out;
}

/** Where the poll starts; undefined when the broker should answer it whole. */
async function startOf(
  deps: PollDeps,
  auth: string | null,
  target: PollTarget,
  q: PollQuery,
  id: PartitionId,
  shape: Shape,
  current: bigint,
): Promise<bigint | undefined> {
  switch (q.kind) {
    case "offset":
      return q.value;
    case "first":
      return shape.earliest;
    case "last": {
      const back = BigInt(q.count) - 1n;
      return current > back ? current - back : 0n;
    }
    case "next": {
      const stored = await deps.calls.storedOffset(auth, target, q);
      return stored === undefined ? shape.earliest : stored + 1n;
    }
    case "timestamp": {
      const deadline = deadlineIn(deps.read.fetchTimeoutMs, deps.read.clock);
      if (await catalogFormat(deps.read, shape.catalog, deadline) === "iggy-0.8") {
        const found = await timestampStart08(deps.read, id, shape.catalog.entries, q.value);
        return "offset" in found ? found.offset : undefined;
      }
      try {
        const r = await readRecords(deps.read, { partition: id, timestamp: q.value, maxBytes: 1 });
        return r.firstOffset;
      } catch (err) {
        if (err instanceof OffsetPastEnd) return undefined;
        throw err;
      }
    }
  }
}

/** A response body that gives the read memory back once sent (or abandoned). */
function releasingBody(bytes: Uint8Array, release: () => void): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.length) {
        controller.close();
        release();
        return;
      }
      const end = Math.min(bytes.length, at + (1 << 20));
      controller.enqueue(bytes.subarray(at, end));
      at = end;
    },
    cancel() {
      release();
    },
  }, { highWaterMark: 0 });
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
  const ids = numericIds(target.stream, target.topic);
  if (!q || !ids || q.count === 0) return deps.forward(req);
  const id: PartitionId = { ...ids, partition: q.partition };
  const releases: (() => void)[] = [];
  const releaseAll = () => {
    for (const r of releases.splice(0)) r();
  };
  try {
    const shape = await shapeOf(deps.read, id);
    if (!shape) return deps.forward(req);
    if (
      q.kind === "offset" && shape.certainlyLocal !== undefined && q.value >= shape.certainlyLocal
    ) return deps.forward(req);
    const auth = req.headers.get("authorization");
    let view = await deps.calls.probe(auth, target, q);
    let start = await startOf(deps, auth, target, q, id, shape, view.current);
    // The broker's first retained offset: what it says, unless its files say it is further on.
    let brokerFirst = maxOf([view.first, shape.firstLocal]) ?? (1n << 64n);
    if (start === undefined || start >= brokerFirst) return deps.forward(req);
    if (!view.fresh) {
      // tierd answers this one: its picture of the broker must be of now, not of before a
      // delete and recreate of the topic.
      view = await deps.calls.probe(auth, target, q, { fresh: true });
      // Only a `last` poll starts from the broker's current offset; the others stay where they
      // were resolved (the consumer's stored offset, a timestamp) without asking again.
      if (q.kind === "last") start = await startOf(deps, auth, target, q, id, shape, view.current);
      brokerFirst = maxOf([view.first, shape.firstLocal]) ?? (1n << 64n);
      if (start === undefined || start >= brokerFirst) return deps.forward(req);
    }
    if (shape.knownEnd !== undefined && shape.knownEnd > view.current) {
      // tierd knows offsets the broker's partition never had: it is not the partition tierd's
      // copies are of (the topic was recreated, or purged) until the agent settles it. The
      // broker answers for its own partition.
      deps.logger.warn("the broker's partition is behind tierd's copies: poll forwarded", {
        partition: `${id.stream}/${id.topic}/${id.partition}`,
        broker_current_offset: view.current,
        tierd_known_end: shape.knownEnd,
      });
      return deps.forward(req);
    }

    const label = `${id.stream}/${id.topic}/${id.partition}`;
    const readerId = deps.continuity.readerFor(label, start);
    const answered: string[] = [];
    let last: bigint | undefined;
    let current = view.current;
    let from = start;
    let until = brokerFirst;
    let bytesLeft = MAX_POLL_BYTES;
    for (let round = 0; round < MAX_ROUNDS && answered.length < q.count; round++) {
      const slice = await readRemote(deps.read, {
        partition: id,
        from,
        until,
        count: q.count - answered.length,
        maxBytes: Math.max(1, bytesLeft),
        readerId,
      }, releases);
      for (const m of slice.messages) {
        answered.push(messageJson(m));
        bytesLeft -= m.message.payload.length + m.message.userHeaders.length + 64;
        last = m.message.offset;
      }
      from = slice.next;
      if (!slice.reachedBroker || answered.length >= q.count || bytesLeft <= 0) break;
      // The rest is the broker's: its own poll, without auto-commit (tierd commits once below).
      const rest = await deps.calls.pollFrom(
        auth,
        target,
        q,
        from,
        q.count - answered.length,
        false,
      );
      if (rest.firstOffset !== undefined && rest.firstOffset > from) {
        // The broker dropped more since the probe: those offsets are tierd's to read too.
        until = rest.firstOffset;
        continue;
      }
      if (rest.lastOffset !== undefined) {
        answered.push(...rest.messages); // it was asked for no more than are missing
        last = rest.lastOffset;
        current = rest.current;
      }
      break;
    }
    deps.continuity.ended(label, readerId, from);
    if (answered.length === 0) {
      releaseAll();
      return deps.forward(req);
    }
    if (q.autoCommit && last !== undefined) await deps.calls.storeOffset(auth, target, q, last);
    deps.logger.debug("iggy poll answered from tierd", {
      partition: label,
      kind: q.kind,
      start,
      count: answered.length,
      broker_first: brokerFirst,
    });
    const body = new TextEncoder().encode(polledJson(q.partition, current, answered));
    const release = releaseAll;
    return new Response(releasingBody(body, release), {
      status: 200,
      headers: { "content-type": "application/json", "content-length": String(body.length) },
    });
  } catch (err) {
    releaseAll();
    const res = errorResponse(err);
    if (res.status >= 500) {
      deps.logger.warn("iggy poll failed", { path: url.pathname, status: res.status, err });
    }
    return res;
  }
}
