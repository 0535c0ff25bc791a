// Iggy 0.8 (also 0.7) segments: one record per message with a 64-byte header, and a dense
// 16-byte `.index` of (relative offset, END position, timestamp). See shared/formats/iggy.md §2.1, §3.1.
import { xxh3_64 } from "../hash.ts";
import {
  allZero,
  checkU128,
  checkU32,
  checkU64,
  getU128,
  hex64,
  MAX_PAYLOAD_SIZE,
  MAX_USER_HEADERS_SIZE,
  setU128,
  viewOf,
} from "./_bytes.ts";
import {
  headerRecord,
  onlyRecord,
  recordAgain,
  type RecordFraming,
  walkRecords,
} from "./_checks.ts";
import type {
  DecodedRecord,
  DecodeRecordOptions,
  EncodeIndexOptions,
  EncodeRecordOptions,
  ParseIndexOptions,
  SegmentCodec,
  WalkOptions,
} from "./codec.ts";
import { FormatError, NEWER_FORMAT_HINT } from "./errors.ts";
import type { IndexEntry, Message, RecordInfo } from "./types.ts";

/** Size of a 0.8 message header. */
export const MESSAGE_HEADER_SIZE = 64;
/** Size of a 0.8 index entry. */
export const INDEX_ENTRY_SIZE_08 = 16;

/** Parses the header at `buf[at..at+64]` (the caller guarantees the 64 bytes are there). */
function parseHeader(buf: Uint8Array, at: number, file: string, filePosition: number): RecordInfo {
  const v = viewOf(buf);
  const where = filePosition + at;
  if (!allZero(buf, at + 56, at + 64)) {
    throw new FormatError(
      "reserved_nonzero",
      file,
      where,
      `message header bytes 56..64 are not zero: ${NEWER_FORMAT_HINT}`,
    );
  }
  const headersLength = v.getUint32(at + 48, true);
  const payloadLength = v.getUint32(at + 52, true);
  if (payloadLength > MAX_PAYLOAD_SIZE) {
    throw new FormatError(
      "bad_length",
      file,
      where,
      `payload_length ${payloadLength} exceeds Iggy's limit of ${MAX_PAYLOAD_SIZE}`,
    );
  }
  if (headersLength > MAX_USER_HEADERS_SIZE) {
    throw new FormatError(
      "bad_length",
      file,
      where,
      `user_headers_length ${headersLength} exceeds Iggy's limit of ${MAX_USER_HEADERS_SIZE}`,
    );
  }
  const offset = v.getBigUint64(at + 24, true);
  return {
    position: at,
    size: MESSAGE_HEADER_SIZE + payloadLength + headersLength,
    firstOffset: offset,
    lastOffset: offset,
    timestamp: v.getBigUint64(at + 32, true),
    messageCount: 1,
  };
}

/** A 0.8 record is one message behind its 64-byte header. */
const FRAMING: RecordFraming = { headerSize: MESSAGE_HEADER_SIZE, noun: "message", parseHeader };

function verifyChecksum(buf: Uint8Array, info: RecordInfo, file: string, filePosition: number) {
  const at = info.position;
  const stored = viewOf(buf).getBigUint64(at, true);
  const computed = xxh3_64(buf.subarray(at + 8, at + info.size));
  if (stored !== computed) {
    throw new FormatError(
      "checksum",
      file,
      filePosition + at,
      `message checksum mismatch at offset ${info.firstOffset}: stored ${hex64(stored)}, ` +
        `computed ${hex64(computed)}`,
    );
  }
}

function walk(log: Uint8Array, ctx: WalkOptions): Generator<RecordInfo> {
  return walkRecords(FRAMING, log, ctx, (buf, info, filePosition, verify) => {
    if (verify) verifyChecksum(buf, info, ctx.file, filePosition);
  });
}

function decodeMessage(buf: Uint8Array, info: RecordInfo): Message {
  const at = info.position;
  const v = viewOf(buf);
  const payloadStart = at + MESSAGE_HEADER_SIZE;
  const payloadEnd = payloadStart + v.getUint32(at + 52, true);
  return {
    offset: info.firstOffset,
    timestamp: info.timestamp,
    originTimestamp: v.getBigUint64(at + 40, true),
    id: getU128(v, at + 8),
    payload: buf.subarray(payloadStart, payloadEnd),
    userHeaders: buf.subarray(payloadEnd, at + info.size),
  };
}

function messages(log: Uint8Array, record: RecordInfo, file: string, filePosition = 0): Message[] {
  return [decodeMessage(log, recordAgain(FRAMING, log, record, file, filePosition))];
}

function decodeRecord(record: Uint8Array, ctx: DecodeRecordOptions): DecodedRecord {
  const filePosition = ctx.filePosition ?? 0;
  const info = onlyRecord(FRAMING, record, ctx.file, filePosition);
  if (ctx.verify ?? true) verifyChecksum(record, info, ctx.file, filePosition);
  return { info, partitionId: 0, messages: [decodeMessage(record, info)] };
}

/**
 * Validates every entry of a 0.8 dense index and calls `visit` with each entry's byte position
 * in the index and the start/end of its message in the `.log`. Returns the number of entries.
 * Allocation-free, so it suits the 50 MB index of a full 1 GiB segment.
 */
export function scanIndex08(
  index: Uint8Array,
  ctx: ParseIndexOptions,
  visit?: (entryAt: number, start: number, end: number) => void,
): number {
  const v = viewOf(index);
  const count = Math.floor(index.length / INDEX_ENTRY_SIZE_08);
  let prevEnd = 0;
  for (let i = 0; i < count; i++) {
    const at = i * INDEX_ENTRY_SIZE_08;
    const rel = v.getUint32(at, true);
    const end = v.getUint32(at + 4, true);
    if (rel !== i) {
      const unsorted = i > 0 && rel <= v.getUint32(at - INDEX_ENTRY_SIZE_08, true);
      throw new FormatError(
        unsorted ? "index_unsorted" : "offset_gap",
        ctx.file,
        at,
        `entry ${i} has relative offset ${rel}; a 0.8 index is dense, so it must be ${i}`,
      );
    }
    if (end <= prevEnd) {
      throw new FormatError(
        "index_unsorted",
        ctx.file,
        at,
        `entry ${i} ends at byte ${end}, not after the previous entry's end ${prevEnd}`,
      );
    }
    if (end > ctx.logSize) {
      throw new FormatError(
        "index_past_eof",
        ctx.file,
        at,
        `entry ${i} (offset ${ctx.startOffset + BigInt(rel)}) ends at byte ${end}, past the end ` +
          `of the ${ctx.logSize}-byte log`,
      );
    }
    if (end - prevEnd < MESSAGE_HEADER_SIZE) {
      throw new FormatError(
        "bad_length",
        ctx.file,
        at,
        `entry ${i} spans ${end - prevEnd} bytes, less than a ${MESSAGE_HEADER_SIZE}-byte header`,
      );
    }
    visit?.(at, prevEnd, end);
    prevEnd = end;
  }
  if (index.length % INDEX_ENTRY_SIZE_08 !== 0) {
    throw new FormatError(
      "truncated",
      ctx.file,
      count * INDEX_ENTRY_SIZE_08,
      `trailing partial index entry of ${index.length % INDEX_ENTRY_SIZE_08} bytes ` +
        `(entries are ${INDEX_ENTRY_SIZE_08} bytes)`,
    );
  }
  return count;
}

function parseIndex(index: Uint8Array, ctx: ParseIndexOptions): IndexEntry[] {
  const v = viewOf(index);
  const entries: IndexEntry[] = [];
  scanIndex08(index, ctx, (at, start) => {
    entries.push({
      offset: ctx.startOffset + BigInt(v.getUint32(at, true)),
      position: start,
      timestamp: v.getBigUint64(at + 8, true),
    });
  });
  return entries;
}

function encodeIndex(entries: IndexEntry[], ctx: EncodeIndexOptions): Uint8Array {
  const out = new Uint8Array(entries.length * INDEX_ENTRY_SIZE_08);
  const v = viewOf(out);
  entries.forEach((e, i) => {
    const rel = e.offset - ctx.startOffset;
    if (rel < 0n || rel > 0xffff_ffffn) {
      throw new RangeError(`offset ${e.offset} is not within u32 range of ${ctx.startOffset}`);
    }
    const end = i + 1 < entries.length ? entries[i + 1].position : ctx.logSize;
    const at = i * INDEX_ENTRY_SIZE_08;
    v.setUint32(at, Number(rel), true);
    v.setUint32(at + 4, checkU32(end, "end position"), true);
    v.setBigUint64(at + 8, checkU64(e.timestamp, "timestamp"), true);
  });
  return out;
}

function encodeRecord(messages: Message[], _ctx: EncodeRecordOptions): Uint8Array {
  if (messages.length !== 1) {
    throw new RangeError(`an Iggy 0.8 record holds exactly one message, got ${messages.length}`);
  }
  const m = messages[0];
  if (m.payload.length > MAX_PAYLOAD_SIZE) {
    throw new RangeError(`payload of ${m.payload.length} bytes exceeds ${MAX_PAYLOAD_SIZE}`);
  }
  if (m.userHeaders.length > MAX_USER_HEADERS_SIZE) {
    throw new RangeError(
      `user headers of ${m.userHeaders.length} bytes exceed ${MAX_USER_HEADERS_SIZE}`,
    );
  }
  const out = new Uint8Array(MESSAGE_HEADER_SIZE + m.payload.length + m.userHeaders.length);
  const v = viewOf(out);
  setU128(v, 8, checkU128(m.id, "id"));
  v.setBigUint64(24, checkU64(m.offset, "offset"), true);
  v.setBigUint64(32, checkU64(m.timestamp, "timestamp"), true);
  v.setBigUint64(40, checkU64(m.originTimestamp, "origin timestamp"), true);
  v.setUint32(48, m.userHeaders.length, true);
  v.setUint32(52, m.payload.length, true);
  out.set(m.payload, MESSAGE_HEADER_SIZE);
  out.set(m.userHeaders, MESSAGE_HEADER_SIZE + m.payload.length);
  v.setBigUint64(0, xxh3_64(out.subarray(8)), true);
  return out;
}

/** The Iggy 0.8 codec (one 64-byte-header record per message, dense 16-byte index). */
export const iggy08: SegmentCodec = {
  name: "iggy-0.8",
  indexEntrySize: INDEX_ENTRY_SIZE_08,
  headerSize: MESSAGE_HEADER_SIZE,
  recordHeader: (header, ctx) => headerRecord(FRAMING, header, ctx),
  walk,
  messages,
  parseIndex,
  encodeIndex,
  encodeRecord,
  decodeRecord,
};
