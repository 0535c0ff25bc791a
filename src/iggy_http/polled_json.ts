// The broker's poll answer (`PolledMessages`, core/common/src/types/message/polled_messages.rs)
// as JSON text, field for field and in the broker's order: `{"partition_id":u32,
// "current_offset":u64,"count":u32,"messages":[{"header":{"checksum":u64,"id":u128,"offset":u64,
// "timestamp":u64,"origin_timestamp":u64,"user_headers_length":u32,"payload_length":u32,
// "reserved":u64},"payload":base64,"user_headers":…}]}` — every integer a plain JSON number,
// u128 ids included (serde_json writes them so). The message values follow what each version
// puts in a header: 0.8 the stored 64-byte message header; 0.9 the stored frame (checksum, id,
// lengths) with `offset` = base offset + delta, `timestamp` = the batch's base timestamp and
// `origin_timestamp` = the batch's origin timestamp + the frame's delta — which is what tierd's
// codecs decode.
import type { PolledMessage } from "../iggy_front/remote_read.ts";
import { base64, userHeadersJson } from "./user_headers.ts";

/** One message as the broker writes it. */
export function messageJson(p: PolledMessage): string {
  const { head, tail } = messageJsonAround(p);
  return `${head}${base64(p.message.payload)}${tail}`;
}

/** A message header's fields in the broker's order, and what each holds. */
export const HEADER_FIELDS: readonly [string, (p: PolledMessage) => bigint | number][] = [
  ["checksum", (p) => p.checksum],
  ["id", (p) => p.message.id],
  ["offset", (p) => p.message.offset],
  ["timestamp", (p) => p.message.timestamp],
  ["origin_timestamp", (p) => p.message.originTimestamp],
  ["user_headers_length", (p) => p.message.userHeaders.length],
  ["payload_length", (p) => p.message.payload.length],
  ["reserved", () => 0],
];

/** What opens a message's JSON and its header's field `i` (then the value). */
export function fieldOpening(i: number): string {
  return `${i === 0 ? '{"header":{' : ","}"${HEADER_FIELDS[i][0]}":`;
}

/** What follows the header's last value, up to the payload's base64. */
export const PAYLOAD_OPENING = '},"payload":"';
/** What follows the payload's base64, up to the user headers' JSON (then `}`). */
export const USER_HEADERS_OPENING = '","user_headers":';

/** A message's JSON text before its payload's base64, and after it. */
export function messageJsonAround(p: PolledMessage): { head: string; tail: string } {
  let head = "";
  HEADER_FIELDS.forEach(([, value], i) => head += `${fieldOpening(i)}${value(p)}`);
  return {
    head: head + PAYLOAD_OPENING,
    tail: `${USER_HEADERS_OPENING}${userHeadersJson(p.message.userHeaders)}}`,
  };
}

/**
 * A whole poll answer.
 * @param messages each message's JSON text (from {@link messageJson} or the broker's own answer)
 */
export function polledJson(partition: number, currentOffset: bigint, messages: string[]): string {
  return `${polledJsonHead(partition, currentOffset, messages.length)}${messages.join(",")}]}`;
}

/** A poll answer's text up to its first message (then the messages, `,`-separated, and `]}`). */
export function polledJsonHead(partition: number, currentOffset: bigint, count: number): string {
  return `{"partition_id":${partition},"current_offset":${currentOffset},"count":${count},` +
    `"messages":[`;
}
