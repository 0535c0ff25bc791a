// Iggy 0.8's PollMessages answer after its head: the messages one after another, each exactly
// its stored segment record — a 64-byte header (checksum u64, id u128, offset u64, timestamp u64,
// origin_timestamp u64, user_headers_length u32, payload_length u32, reserved u64 = 0), then the
// payload, then the user headers. The broker writes its batches' message bytes as they are
// (poll_messages_handler.rs:59-85 at server-0.8.0); the SDK reads the header, then
// payload_length bytes of payload, then user_headers_length bytes of user headers, and refuses a
// nonzero reserved field (core/common/src/types/message/polled_messages.rs:83-124,
// message_header.rs:24-34, 97-105).
import { MESSAGE_HEADER_SIZE } from "../format/iggy08.ts";
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

/**
 * One message as a 0.8 broker sends it (and stores it), with its stored checksum.
 * @throws {WireError} `out_of_range` for a field that does not fit
 */
export function encodeMessage08(p: PolledMessage): Uint8Array<ArrayBuffer> {
  const m = p.message;
  return new WireWriter(MESSAGE_HEADER_SIZE + m.payload.length + m.userHeaders.length)
    .u64(p.checksum, "checksum")
    .u128(m.id, "id")
    .u64(m.offset, "offset")
    .u64(m.timestamp, "timestamp")
    .u64(m.originTimestamp, "origin timestamp")
    .u32(m.userHeaders.length, "user headers length")
    .u32(m.payload.length, "payload length")
    .u64(0n, "reserved")
    .put(m.payload)
    .put(m.userHeaders)
    .finish();
}

/** Reads the message at `c.at`, leaving the cursor after it. */
function readMessage(c: WireCursor): PolledRecord {
  const start = c.at;
  const checksum = c.u64("message checksum");
  const id = c.u128("message id");
  const offset = c.u64("message offset");
  const timestamp = c.u64("message timestamp");
  const originTimestamp = c.u64("message origin timestamp");
  const userHeadersLength = c.u32("user headers length");
  const payloadLength = c.u32("payload length");
  const reserved = c.u64("message reserved field");
  if (reserved !== 0n) {
    throw new WireError(
      "bad_value",
      `the message at offset ${offset} has reserved field ${reserved}, not 0`,
      start + 56,
    );
  }
  const payload = c.take(payloadLength, `payload of the message at offset ${offset}`);
  const userHeaders = c.take(userHeadersLength, `user headers of the message at offset ${offset}`);
  return {
    message: { offset, timestamp, originTimestamp, id, payload, userHeaders },
    checksum,
    start,
    end: c.at,
  };
}

/**
 * A whole 0.8 PollMessages answer from messages: records taken from a 0.8 segment as they are,
 * or made by {@link encodeMessage08}. Each part must hold whole messages; they are walked (not
 * copied) to count them.
 * @throws {WireError} when a part does not hold whole, well-formed messages
 */
export function polledPayload08(
  head: Pick<PollHead, "partitionId" | "currentOffset">,
  records: readonly Uint8Array[],
): Uint8Array {
  let count = 0;
  for (const record of records) {
    const c = new WireCursor(record);
    while (c.remaining > 0) {
      readMessage(c);
      count++;
    }
  }
  return polledPayload({ ...head, count }, records);
}

/**
 * Reads a 0.8 PollMessages answer: its head and every message, each with the byte range it
 * occupies in `payload` (to splice raw bytes).
 * @throws {WireError} `truncated` when a message runs past the end, `bad_value` for a nonzero
 *   reserved field, `count_mismatch` when the head's count is not the number of messages
 */
export function decodePolled08(payload: Uint8Array): { head: PollHead; messages: PolledRecord[] } {
  const head = decodePollHead(payload);
  const c = new WireCursor(payload, POLL_HEAD_SIZE);
  const messages: PolledRecord[] = [];
  while (c.remaining > 0) {
    if (messages.length === head.count) throw bytesAfterCount(head, c.at);
    messages.push(readMessage(c));
  }
  checkCount(head, messages.length);
  return { head, messages };
}
