// Iggy 0.9's PollMessages answer after its head: batch records exactly as the segment stores
// them (a 256-byte batch header, then 48-byte-header frames), a batch selected whole sent as it
// is stored, and one selected in part (a poll starting inside it, or `count` ending inside it)
// sent as a rewritten header — batch_length, message_count and batch_checksum recomputed for the
// selected frames, every other field, and each frame's offset_delta, kept — followed by the
// selected frames' stored bytes (core/partitions/src/journal.rs:1025-1137 at cc269ef7,
// core/server/src/responses.rs:1655-1712). The SDK reads each message's offset as
// base_offset + offset_delta, its timestamp as the batch's base_timestamp and its origin
// timestamp as origin_timestamp + timestamp_delta (core/common/src/types/message/
// polled_messages.rs:95-150). At-rest encryption, which the broker undoes here, is not handled.
import { BATCH_HEADER_SIZE, FRAME_HEADER_SIZE } from "../format/iggy09.ts";
import { xxh3_64 } from "../hash.ts";
import {
  bytesAfterCount,
  checkCount,
  decodePollHead,
  POLL_HEAD_SIZE,
  type PolledMessage,
  polledPayload,
  type PolledRecord,
  type PollHead,
} from "./polled_binary.ts";
import { WireCursor, WireError, WireWriter } from "./wire.ts";

/** The fields of a batch header that a slice keeps. */
export interface BatchFields09 {
  /** The batch header's partition id (u64). */
  partitionId: bigint;
  baseOffset: bigint;
  /** The broker's append time, every message's `timestamp`. */
  baseTimestamp: bigint;
  /** What each frame's timestamp_delta counts from. */
  originTimestamp: bigint;
}

/** A batch as read from an answer, with its byte range in it and its messages'. */
export interface PolledBatch09 extends BatchFields09 {
  start: number;
  end: number;
  /** The stored batch_checksum. */
  checksum: bigint;
  messages: PolledRecord[];
}

/** A batch ready to send: its bytes in one or two parts (not joined), and what it holds. */
export interface OutgoingBatch09 {
  parts: Uint8Array[];
  /** Messages in it. */
  count: number;
  /** The offset of its last message. */
  lastOffset: bigint;
}

/** Which messages of a batch a poll selects, as the broker's `MessageLookup`. */
export type BatchLookup =
  /** Those at or after an offset. */
  | { offset: bigint }
  /** All of a batch whose base_timestamp is at or after the time (µs); none of an older one. */
  | { timestamp: bigint };

/** Options of {@link decodePolled09}. */
export interface DecodePolled09Options {
  /** Check every frame checksum and batch checksum (needs `initHashes()`). @default false */
  verify?: boolean;
}

interface ReadBatch {
  fields: BatchFields09;
  start: number;
  end: number;
  checksum: bigint;
  frames: PolledRecord[];
}

/** Reads the batch at `c.at` (its header and every frame), leaving the cursor after it. */
function readBatch(c: WireCursor): ReadBatch {
  const start = c.at;
  const partitionId = c.u64("batch partition id");
  const baseOffset = c.u64("batch base offset");
  const baseTimestamp = c.u64("batch base timestamp");
  const originTimestamp = c.u64("batch origin timestamp");
  const length = c.u64("batch length");
  const checksum = c.u64("batch checksum");
  const count = c.u32("batch message count");
  const reserved = c.take(BATCH_HEADER_SIZE - 52, "batch header reserved bytes");
  if (reserved.some((b) => b !== 0)) {
    throw new WireError("bad_batch", `batch ${baseOffset}'s reserved header bytes are set`, start);
  }
  if (length < BigInt(BATCH_HEADER_SIZE)) {
    throw new WireError("bad_batch", `batch ${baseOffset} has length ${length}`, start);
  }
  if (length - BigInt(BATCH_HEADER_SIZE) > BigInt(c.remaining)) {
    throw new WireError(
      "truncated",
      `batch ${baseOffset} announces ${length} bytes but only ${
        c.remaining + BATCH_HEADER_SIZE
      } are left`,
      start,
    );
  }
  const end = start + Number(length);
  const fields = { partitionId, baseOffset, baseTimestamp, originTimestamp };
  const frames: PolledRecord[] = [];
  const f = new WireCursor(c.bytes.subarray(0, end), c.at);
  while (f.remaining > 0) frames.push(readFrame(f, fields));
  c.at = end;
  if (frames.length !== count) {
    throw new WireError(
      "bad_batch",
      `batch ${baseOffset} counts ${count} messages but holds ${frames.length} frames`,
      start,
    );
  }
  return { fields, start, end, checksum, frames };
}

/** Reads one frame; the cursor's buffer ends where its batch ends. */
function readFrame(c: WireCursor, batch: BatchFields09): PolledRecord {
  const start = c.at;
  try {
    const checksum = c.u64("frame checksum");
    const id = c.u128("frame id");
    const offset = batch.baseOffset + BigInt(c.u32("frame offset delta"));
    const originTimestamp = batch.originTimestamp + BigInt(c.u32("frame timestamp delta"));
    const userHeadersLength = c.u32("frame user headers length");
    const payloadLength = c.u32("frame payload length");
    if (c.u64("frame reserved bytes") !== 0n) {
      throw new WireError(
        "bad_batch",
        `the frame of offset ${offset} has reserved bytes set`,
        start,
      );
    }
    const payload = c.take(payloadLength, `payload of the frame of offset ${offset}`);
    const userHeaders = c.take(userHeadersLength, `user headers of the frame of offset ${offset}`);
    const message = {
      offset,
      timestamp: batch.baseTimestamp,
      originTimestamp,
      id,
      payload,
      userHeaders,
    };
    return { message, checksum, start, end: c.at };
  } catch (err) {
    // Bytes past the batch's end may exist; a frame that needs them breaks the batch's framing.
    if (err instanceof WireError && err.kind === "truncated") {
      throw new WireError("bad_batch", `${err.message}: the frame overruns batch_length`, start);
    }
    throw err;
  }
}

/**
 * The batch header for `blob`, its checksum over the header fields and each frame's checksum
 * (core/binary_protocol/src/batch.rs:439-459).
 */
function batchHeader(
  fields: BatchFields09,
  blob: Uint8Array,
  frameStarts: readonly number[],
): Uint8Array<ArrayBuffer> {
  const w = new WireWriter(BATCH_HEADER_SIZE)
    .u64(fields.partitionId, "partition id")
    .u64(fields.baseOffset, "base offset")
    .u64(fields.baseTimestamp, "base timestamp")
    .u64(fields.originTimestamp, "origin timestamp")
    .u64(BigInt(BATCH_HEADER_SIZE + blob.length), "batch length")
    .u64(0n, "batch checksum")
    .u32(frameStarts.length, "message count")
    .skip(BATCH_HEADER_SIZE - 52);
  const header = w.finish();
  const covered = new Uint8Array(44 + 8 * frameStarts.length);
  covered.set(header.subarray(0, 40), 0);
  covered.set(header.subarray(48, 52), 40);
  frameStarts.forEach((s, i) => covered.set(blob.subarray(s, s + 8), 44 + 8 * i));
  new DataView(header.buffer).setBigUint64(40, xxh3_64(covered), true);
  return header;
}

/**
 * One batch as a 0.9 broker sends it, from its header's fields and the messages selected from
 * it with their stored checksums: the stored batch when `messages` are all of it, else the
 * broker's rewrite of a partial selection. Needs `initHashes()`.
 * @param fields the stored batch header's fields (unchanged by slicing)
 * @param messages the messages, in offset order; each `timestamp` must be the batch's
 * @throws {WireError} `out_of_range` for a message the batch header cannot express
 */
export function encodeBatch09(
  fields: BatchFields09,
  messages: readonly PolledMessage[],
): OutgoingBatch09 {
  if (messages.length === 0) throw new WireError("out_of_range", "a batch needs a message");
  const size = messages.reduce(
    (n, p) => n + FRAME_HEADER_SIZE + p.message.payload.length + p.message.userHeaders.length,
    0,
  );
  const w = new WireWriter(size);
  const starts: number[] = [];
  let at = 0;
  for (const { message: m, checksum } of messages) {
    if (m.timestamp !== fields.baseTimestamp) {
      throw new WireError(
        "out_of_range",
        `message ${m.offset} has timestamp ${m.timestamp}, not its batch's ${fields.baseTimestamp}`,
      );
    }
    starts.push(at);
    w.u64(checksum, "checksum")
      .u128(m.id, "id")
      .u32(Number(m.offset - fields.baseOffset), `offset delta of message ${m.offset}`)
      .u32(
        Number(m.originTimestamp - fields.originTimestamp),
        `timestamp delta of message ${m.offset}`,
      )
      .u32(m.userHeaders.length, "user headers length")
      .u32(m.payload.length, "payload length")
      .u64(0n, "reserved")
      .put(m.payload)
      .put(m.userHeaders);
    at += FRAME_HEADER_SIZE + m.payload.length + m.userHeaders.length;
  }
  const blob = w.finish();
  return {
    parts: [batchHeader(fields, blob, starts), blob],
    count: messages.length,
    lastOffset: messages[messages.length - 1].message.offset,
  };
}

/**
 * What a 0.9 broker sends of one stored batch for a poll (`select_batch_slice` and
 * `push_selected_batch_fragments`, journal.rs:1025-1137): the frames selected by `lookup`, at
 * most `count` of them; the record itself (a view, not a copy) when that is all of it, else a
 * rewritten header and a view of the selected frames. Needs `initHashes()` for a partial one.
 * The broker also stops at its commit frontier; a stored segment is all committed.
 * @param record one whole batch record as read from a segment
 * @param selection the lookup and how many messages the poll still wants
 * @returns undefined when no message is selected
 * @throws {WireError} when `record` is not one well-formed batch
 */
export function sliceRecord09(
  record: Uint8Array,
  selection: { lookup: BatchLookup; count: number },
): OutgoingBatch09 | undefined {
  const c = new WireCursor(record);
  const batch = readBatch(c);
  if (c.remaining > 0) {
    throw new WireError("bad_batch", `${c.remaining} bytes follow the batch record`, c.at);
  }
  const { lookup, count } = selection;
  const selected: PolledRecord[] = [];
  for (const frame of batch.frames) {
    if (selected.length >= count) break;
    const take = "offset" in lookup
      ? frame.message.offset >= lookup.offset
      : batch.fields.baseTimestamp >= lookup.timestamp;
    if (take) selected.push(frame);
  }
  if (selected.length === 0) return undefined;
  const lastOffset = selected[selected.length - 1].message.offset;
  if (selected.length === batch.frames.length) {
    return { parts: [record], count: selected.length, lastOffset };
  }
  const from = selected[0].start;
  const blob = record.subarray(from, selected[selected.length - 1].end);
  const header = batchHeader(batch.fields, blob, selected.map((f) => f.start - from));
  return { parts: [header, blob], count: selected.length, lastOffset };
}

/**
 * A whole 0.9 PollMessages answer from batches made by {@link sliceRecord09} or
 * {@link encodeBatch09}; the count is theirs summed.
 * @throws {WireError} `out_of_range`
 */
export function polledPayload09(
  head: Pick<PollHead, "partitionId" | "currentOffset">,
  batches: readonly OutgoingBatch09[],
): Uint8Array {
  const count = batches.reduce((n, b) => n + b.count, 0);
  return polledPayload({ ...head, count }, batches.flatMap((b) => b.parts));
}

function verifyBatch(payload: Uint8Array, batch: ReadBatch): void {
  for (const record of batch.frames) {
    const computed = xxh3_64(payload.subarray(record.start + 8, record.end));
    if (computed !== record.checksum) {
      throw new WireError(
        "bad_batch",
        `the frame of offset ${record.message.offset} fails its checksum`,
        record.start,
      );
    }
  }
  const blob = payload.subarray(batch.start + BATCH_HEADER_SIZE, batch.end);
  const first = batch.start + BATCH_HEADER_SIZE;
  const header = batchHeader(batch.fields, blob, batch.frames.map((f) => f.start - first));
  if (new DataView(header.buffer).getBigUint64(40, true) !== batch.checksum) {
    throw new WireError(
      "bad_batch",
      `batch ${batch.fields.baseOffset} fails its batch checksum`,
      batch.start,
    );
  }
}

/**
 * Reads a 0.9 PollMessages answer: its head and every batch, each with its byte range and its
 * messages' (to splice raw bytes).
 * @throws {WireError} `truncated` when a batch runs past the end, `bad_batch` for a batch whose
 *   frames do not tile it or whose reserved bytes are set (or, with `verify`, whose checksums
 *   fail), `count_mismatch` when the head's count is not the number of messages
 */
export function decodePolled09(
  payload: Uint8Array,
  options: DecodePolled09Options = {},
): { head: PollHead; batches: PolledBatch09[] } {
  const head = decodePollHead(payload);
  const c = new WireCursor(payload, POLL_HEAD_SIZE);
  const batches: PolledBatch09[] = [];
  let messages = 0;
  while (c.remaining > 0) {
    if (messages >= head.count) throw bytesAfterCount(head, c.at);
    const batch = readBatch(c);
    if (options.verify) verifyBatch(payload, batch);
    messages += batch.frames.length;
    batches.push({
      ...batch.fields,
      start: batch.start,
      end: batch.end,
      checksum: batch.checksum,
      messages: batch.frames,
    });
  }
  checkCount(head, messages);
  return { head, batches };
}
