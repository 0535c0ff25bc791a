// The JSON form of a read (`format=json`, `tierd read --json`): decoded messages with 64-bit
// values as decimal strings, payloads in base64, and user headers parsed when they are valid.
//
// `headers` is the Iggy user-headers blob (shared/formats/iggy.md §2.1) parsed into entries
// `{ key, key_kind, value, value_kind }`: strings as text, bool as a boolean, integers up to 32
// bits and floats as numbers, 64- and 128-bit integers as decimal strings, raw as base64. An
// empty blob is `[]`. A blob that does not parse (bad kind, length or trailing bytes) is
// `headers: null` with the blob in `headers_raw` (base64), so nothing is hidden.
import { Buffer } from "node:buffer";
import { codecFor } from "../format/codecs.ts";
import type { FormatName, Message } from "../format/types.ts";
import type { ReadResult } from "./read_records.ts";

/** One user header. */
export interface JsonHeader {
  key: string | number | boolean;
  key_kind: string;
  value: string | number | boolean;
  value_kind: string;
}

/** One decoded message. */
export interface JsonMessage {
  offset: string;
  /** Server timestamp, µs since the epoch. */
  timestamp: string;
  /** Producer timestamp, µs since the epoch. */
  origin_timestamp: string;
  /** The u128 message id in decimal. */
  id: string;
  headers: JsonHeader[] | null;
  /** Only when `headers` is null: the undecodable blob, base64. */
  headers_raw?: string;
  /** base64 */
  payload: string;
}

/** The JSON body of a read. */
export interface JsonRead {
  stream: number;
  topic: number;
  partition: number;
  format: FormatName;
  first_offset: string;
  next_offset: string;
  source: string;
  gap: { from: string; to: string } | null;
  messages: JsonMessage[];
}

/** Iggy's header kind names by code (`HeaderKind::as_code`); code 0 is not a kind. */
export const HEADER_KINDS = [
  "",
  "raw",
  "string",
  "bool",
  "int8",
  "int16",
  "int32",
  "int64",
  "int128",
  "uint8",
  "uint16",
  "uint32",
  "uint64",
  "uint128",
  "float32",
  "float64",
] as const;

/** Value sizes of the fixed-width kinds. */
const FIXED: Record<string, number> = {
  bool: 1,
  int8: 1,
  int16: 2,
  int32: 4,
  int64: 8,
  int128: 16,
  uint8: 1,
  uint16: 2,
  uint32: 4,
  uint64: 8,
  uint128: 16,
  float32: 4,
  float64: 8,
};

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Renders one typed value; undefined when the bytes do not fit the kind. */
function typedValue(kind: string, b: Uint8Array): string | number | boolean | undefined {
  if (FIXED[kind] !== undefined && b.length !== FIXED[kind]) return undefined;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  switch (kind) {
    case "raw":
      return base64(b);
    case "string":
      try {
        return utf8.decode(b);
      } catch {
        return undefined;
      }
    case "bool":
      return b[0] === 0 ? false : b[0] === 1 ? true : undefined;
    case "int8":
      return v.getInt8(0);
    case "int16":
      return v.getInt16(0, true);
    case "int32":
      return v.getInt32(0, true);
    case "int64":
      return v.getBigInt64(0, true).toString();
    case "int128":
      return BigInt.asIntN(128, v.getBigUint64(0, true) | (v.getBigUint64(8, true) << 64n))
        .toString();
    case "uint8":
      return v.getUint8(0);
    case "uint16":
      return v.getUint16(0, true);
    case "uint32":
      return v.getUint32(0, true);
    case "uint64":
      return v.getBigUint64(0, true).toString();
    case "uint128":
      return (v.getBigUint64(0, true) | (v.getBigUint64(8, true) << 64n)).toString();
    case "float32":
      return v.getFloat32(0, true);
    case "float64":
      return v.getFloat64(0, true);
  }
  return undefined;
}

/**
 * Parses an Iggy 0.7+ user-headers blob: `(kind u8, len u32, bytes)` key then value, repeated.
 *
 * @returns the entries, or undefined when the blob is not valid
 */
export function parseUserHeaders(blob: Uint8Array): JsonHeader[] | undefined {
  const v = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  const out: JsonHeader[] = [];
  let p = 0;
  const part = () => {
    if (blob.length - p < 5) return undefined;
    const kind = HEADER_KINDS[blob[p]];
    const len = v.getUint32(p + 1, true);
    if (!kind || len < 1 || len > 255 || blob.length - p - 5 < len) return undefined;
    const value = typedValue(kind, blob.subarray(p + 5, p + 5 + len));
    if (value === undefined) return undefined;
    p += 5 + len;
    return { kind, value };
  };
  while (p < blob.length) {
    const key = part();
    const value = key && part();
    if (!key || !value) return undefined;
    out.push({ key: key.value, key_kind: key.kind, value: value.value, value_kind: value.kind });
  }
  return out;
}

function jsonMessage(m: Message): JsonMessage {
  const headers = parseUserHeaders(m.userHeaders);
  return {
    offset: m.offset.toString(),
    timestamp: m.timestamp.toString(),
    origin_timestamp: m.originTimestamp.toString(),
    id: m.id.toString(),
    headers: headers ?? null,
    ...(headers === undefined && { headers_raw: base64(m.userHeaders) }),
    payload: base64(m.payload),
  };
}

/**
 * Decodes a read's bytes into the JSON form, starting at the offset (or timestamp) asked for:
 * the raw bytes start at a whole record, so a 0.9 batch may begin below it, but its messages
 * before `start` are left out. `first_offset` stays the raw read's (the record boundary).
 * @param start what the read asked for; without it every decoded message is listed
 */
export function readToJson(
  ids: { stream: number; topic: number; partition: number },
  r: ReadResult,
  start: { offset?: bigint; timestamp?: bigint } = {},
): JsonRead {
  const codec = codecFor(r.format);
  const file = `partition ${ids.stream}/${ids.topic}/${ids.partition} read`;
  const messages: JsonMessage[] = [];
  const walk = codec.walk(r.bytes, { file, startOffset: r.firstOffset, verify: false });
  for (const record of walk) {
    for (const m of codec.messages(r.bytes, record, file)) {
      // Raw reads start at a whole record (an Iggy 0.9 batch); decoded messages start where
      // the read asked, so a consumer never sees one twice.
      if (start.offset !== undefined && m.offset < start.offset) continue;
      if (start.timestamp !== undefined && m.timestamp < start.timestamp) continue;
      messages.push(jsonMessage(m));
    }
  }
  return {
    stream: ids.stream,
    topic: ids.topic,
    partition: ids.partition,
    format: r.format,
    first_offset: r.firstOffset.toString(),
    next_offset: r.nextOffset.toString(),
    source: r.source,
    gap: r.gap ? { from: r.gap.from.toString(), to: r.gap.to.toString() } : null,
    messages,
  };
}
