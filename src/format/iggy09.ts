// Iggy 0.9 segments: batch records (256-byte batch header, then 48-byte-header message frames)
// and a sparse 24-byte `.index` of (offset, timestamp, START position). See iggy.md §2.2, §3.2.
import { xxh3_64 } from "../hash.ts";
import {
  allZero,
  checkU128,
  checkU64,
  getU128,
  getU64Number,
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

/** Size of a 0.9 batch header. */
export const BATCH_HEADER_SIZE = 256;
/** Size of a 0.9 message frame header. */
export const FRAME_HEADER_SIZE = 48;
/** Size of a 0.9 index entry. */
export const INDEX_ENTRY_SIZE_09 = 24;

const MAX_FRAME_SIZE = BigInt(FRAME_HEADER_SIZE + MAX_PAYLOAD_SIZE + MAX_USER_HEADERS_SIZE);

/** Parses the batch header at `buf[at..at+256]` (the caller guarantees the bytes are there). */
function parseHeader(buf: Uint8Array, at: number, file: string, filePosition: number): RecordInfo {
  const v = viewOf(buf);
  const where = filePosition + at;
  if (!allZero(buf, at + 52, at + BATCH_HEADER_SIZE)) {
    throw new FormatError(
      "reserved_nonzero",
      file,
      where,
      `batch header bytes 52..256 are not zero: ${NEWER_FORMAT_HINT}`,
    );
  }
  const count = v.getUint32(at + 48, true);
  if (count === 0) {
    throw new FormatError("bad_length", file, where, "batch has message_count 0");
  }
  const length = v.getBigUint64(at + 32, true);
  const min = BigInt(BATCH_HEADER_SIZE + FRAME_HEADER_SIZE * count);
  const max = BigInt(BATCH_HEADER_SIZE) + BigInt(count) * MAX_FRAME_SIZE;
  if (length < min || length > max) {
    throw new FormatError(
      "bad_length",
      file,
      where,
      `batch_length ${length} is impossible for ${count} messages (must be ${min}..${max})`,
    );
  }
  const base = v.getBigUint64(at + 8, true);
  return {
    position: at,
    size: Number(length),
    firstOffset: base,
    lastOffset: base + BigInt(count) - 1n,
    timestamp: v.getBigUint64(at + 16, true),
    messageCount: count,
  };
}

/** A 0.9 record is a batch of message frames behind its 256-byte header. */
const FRAMING: RecordFraming = { headerSize: BATCH_HEADER_SIZE, noun: "batch", parseHeader };

/** XXH3-64 over partition_id..batch_length ‖ message_count ‖ every frame checksum. */
function batchChecksum(buf: Uint8Array, at: number, frameStarts: number[]): bigint {
  const input = new Uint8Array(44 + 8 * frameStarts.length);
  input.set(buf.subarray(at, at + 40), 0);
  input.set(buf.subarray(at + 48, at + 52), 40);
  frameStarts.forEach((f, i) => input.set(buf.subarray(f, f + 8), 44 + 8 * i));
  return xxh3_64(input);
}

/**
 * Checks that the frames of a batch tile its blob, that reserved bytes are zero, that offset
 * deltas run 0..n-1, and (when `verify`) every frame checksum and the batch checksum.
 * Returns the decoded messages when `decode` is set.
 */
function checkFrames(
  buf: Uint8Array,
  info: RecordInfo,
  file: string,
  filePosition: number,
  verify: boolean,
  decode: boolean,
): Message[] {
  const v = viewOf(buf);
  const batchAt = info.position;
  const end = batchAt + info.size;
  const originBase = v.getBigUint64(batchAt + 24, true);
  const starts: number[] = [];
  const out: Message[] = [];
  let p = batchAt + BATCH_HEADER_SIZE;
  for (let i = 0; i < info.messageCount; i++) {
    const where = filePosition + p;
    const context = `frame ${i} of the batch at byte ${filePosition + batchAt}`;
    if (end - p < FRAME_HEADER_SIZE) {
      throw new FormatError(
        "bad_length",
        file,
        where,
        `${context}: its header runs past the batch end at byte ${filePosition + end} ` +
          `(message_count ${info.messageCount} does not fit batch_length ${info.size})`,
      );
    }
    if (!allZero(buf, p + 40, p + FRAME_HEADER_SIZE)) {
      throw new FormatError(
        "reserved_nonzero",
        file,
        where,
        `${context}: frame header bytes 40..48 are not zero: ${NEWER_FORMAT_HINT}`,
      );
    }
    const headersLength = v.getUint32(p + 32, true);
    const payloadLength = v.getUint32(p + 36, true);
    if (payloadLength > MAX_PAYLOAD_SIZE || headersLength > MAX_USER_HEADERS_SIZE) {
      throw new FormatError(
        "bad_length",
        file,
        where,
        `${context}: payload_length ${payloadLength} / user_headers_length ${headersLength} ` +
          `exceed Iggy's limits (${MAX_PAYLOAD_SIZE} / ${MAX_USER_HEADERS_SIZE})`,
      );
    }
    const size = FRAME_HEADER_SIZE + payloadLength + headersLength;
    if (size > end - p) {
      throw new FormatError(
        "bad_length",
        file,
        where,
        `${context}: ${size} bytes run past the batch end at byte ${filePosition + end}`,
      );
    }
    if (verify) {
      const stored = v.getBigUint64(p, true);
      const computed = xxh3_64(buf.subarray(p + 8, p + size));
      if (stored !== computed) {
        throw new FormatError(
          "checksum",
          file,
          where,
          `${context}: frame checksum mismatch: stored ${hex64(stored)}, computed ${
            hex64(computed)
          }`,
        );
      }
    }
    const delta = v.getUint32(p + 24, true);
    if (delta !== i) {
      throw new FormatError(
        "offset_gap",
        file,
        where,
        `${context}: offset_delta is ${delta}, expected ${i}`,
      );
    }
    if (decode) {
      const payloadStart = p + FRAME_HEADER_SIZE;
      const payloadEnd = payloadStart + payloadLength;
      out.push({
        offset: info.firstOffset + BigInt(i),
        timestamp: info.timestamp,
        originTimestamp: originBase + BigInt(v.getUint32(p + 28, true)),
        id: getU128(v, p + 8),
        payload: buf.subarray(payloadStart, payloadEnd),
        userHeaders: buf.subarray(payloadEnd, p + size),
      });
    }
    starts.push(p);
    p += size;
  }
  if (p !== end) {
    throw new FormatError(
      "bad_length",
      file,
      filePosition + batchAt,
      `the batch's ${info.messageCount} frames end at byte ${filePosition + p} but ` +
        `batch_length says it ends at byte ${filePosition + end}`,
    );
  }
  if (verify) {
    const stored = v.getBigUint64(batchAt + 40, true);
    const computed = batchChecksum(buf, batchAt, starts);
    if (stored !== computed) {
      throw new FormatError(
        "checksum",
        file,
        filePosition + batchAt,
        `batch_checksum mismatch (base offset ${info.firstOffset}): stored ${hex64(stored)}, ` +
          `computed ${hex64(computed)}`,
      );
    }
  }
  return out;
}

function walk(log: Uint8Array, ctx: WalkOptions): Generator<RecordInfo> {
  return walkRecords(FRAMING, log, ctx, (buf, info, filePosition, verify) => {
    checkFrames(buf, info, ctx.file, filePosition, verify, false);
  });
}

function messages(log: Uint8Array, record: RecordInfo, file: string, filePosition = 0): Message[] {
  const info = recordAgain(FRAMING, log, record, file, filePosition);
  return checkFrames(log, info, file, filePosition, false, true);
}

function decodeRecord(record: Uint8Array, ctx: DecodeRecordOptions): DecodedRecord {
  const filePosition = ctx.filePosition ?? 0;
  const info = onlyRecord(FRAMING, record, ctx.file, filePosition);
  const decoded = checkFrames(record, info, ctx.file, filePosition, ctx.verify ?? true, true);
  const partitionId = Number(viewOf(record).getBigUint64(0, true));
  return { info, partitionId, messages: decoded };
}

/**
 * Validates a 0.9 index without making an object per entry: offsets at or above the segment's
 * start and rising, positions rising and inside the log, whole entries only. The u64 fields are
 * compared as pairs of u32 halves (a BigInt per field made parsing a 2,000-entry index cost
 * most of a millisecond on a cold read's path); a failure names the entry with its real values.
 *
 * @param visit called for each valid entry with its byte offset in the index, in order
 * @returns the number of entries
 * @throws {FormatError} `offset_gap`, `index_unsorted`, `index_past_eof` or `truncated`
 */
export function scanIndex09(
  index: Uint8Array,
  ctx: ParseIndexOptions,
  visit?: (entryAt: number) => void,
): number {
  const v = viewOf(index);
  const count = Math.floor(index.length / INDEX_ENTRY_SIZE_09);
  const startHi = Number(ctx.startOffset >> 32n);
  const startLo = Number(ctx.startOffset & 0xffff_ffffn);
  let prevHi = 0;
  let prevLo = 0;
  let prevPosition = -1;
  for (let i = 0; i < count; i++) {
    const at = i * INDEX_ENTRY_SIZE_09;
    const lo = v.getUint32(at, true);
    const hi = v.getUint32(at + 4, true);
    const position = getU64Number(v, at + 16);
    if (hi < startHi || (hi === startHi && lo < startLo)) {
      throw new FormatError(
        "offset_gap",
        ctx.file,
        at,
        `entry ${i} has offset ${v.getBigUint64(at, true)}, below the segment start offset ` +
          `${ctx.startOffset}`,
      );
    }
    if (i > 0 && (hi < prevHi || (hi === prevHi && lo <= prevLo) || position <= prevPosition)) {
      const prev = at - INDEX_ENTRY_SIZE_09;
      throw new FormatError(
        "index_unsorted",
        ctx.file,
        at,
        `entry ${i} (offset ${v.getBigUint64(at, true)}, byte ${v.getBigUint64(at + 16, true)}) ` +
          `does not come after entry ${i - 1} (offset ${v.getBigUint64(prev, true)}, byte ` +
          `${v.getBigUint64(prev + 16, true)})`,
      );
    }
    if (position >= ctx.logSize) {
      throw new FormatError(
        "index_past_eof",
        ctx.file,
        at,
        `entry ${i} (offset ${v.getBigUint64(at, true)}) points at byte ` +
          `${v.getBigUint64(at + 16, true)}, past the end of the ${ctx.logSize}-byte log`,
      );
    }
    visit?.(at);
    prevHi = hi;
    prevLo = lo;
    prevPosition = position;
  }
  if (index.length % INDEX_ENTRY_SIZE_09 !== 0) {
    throw new FormatError(
      "truncated",
      ctx.file,
      count * INDEX_ENTRY_SIZE_09,
      `trailing partial index entry of ${index.length % INDEX_ENTRY_SIZE_09} bytes ` +
        `(entries are ${INDEX_ENTRY_SIZE_09} bytes)`,
    );
  }
  return count;
}

/** Entry `i` of a valid 0.9 index (see {@link scanIndex09}). */
export function indexEntry09(view: DataView, i: number): IndexEntry {
  const at = i * INDEX_ENTRY_SIZE_09;
  return {
    offset: view.getBigUint64(at, true),
    timestamp: view.getBigUint64(at + 8, true),
    position: indexPosition09(view, i),
  };
}

/** The record position of entry `i` of a valid 0.9 index, without a BigInt. */
export function indexPosition09(view: DataView, i: number): number {
  return getU64Number(view, i * INDEX_ENTRY_SIZE_09 + 16);
}

function parseIndex(index: Uint8Array, ctx: ParseIndexOptions): IndexEntry[] {
  const v = viewOf(index);
  const entries: IndexEntry[] = [];
  scanIndex09(index, ctx, (at) => entries.push(indexEntry09(v, at / INDEX_ENTRY_SIZE_09)));
  return entries;
}

function encodeIndex(entries: IndexEntry[], _ctx: EncodeIndexOptions): Uint8Array {
  const out = new Uint8Array(entries.length * INDEX_ENTRY_SIZE_09);
  const v = viewOf(out);
  entries.forEach((e, i) => {
    const at = i * INDEX_ENTRY_SIZE_09;
    v.setBigUint64(at, checkU64(e.offset, "offset"), true);
    v.setBigUint64(at + 8, checkU64(e.timestamp, "timestamp"), true);
    v.setBigUint64(at + 16, checkU64(BigInt(e.position), "position"), true);
  });
  return out;
}

function encodeRecord(messages: Message[], ctx: EncodeRecordOptions): Uint8Array {
  if (messages.length === 0) throw new RangeError("an Iggy 0.9 batch needs at least one message");
  if (!Number.isSafeInteger(ctx.partitionId) || ctx.partitionId < 0) {
    throw new RangeError(`partition id ${ctx.partitionId} is not a non-negative integer`);
  }
  const first = messages[0];
  let origin = first.originTimestamp;
  let size = BATCH_HEADER_SIZE;
  messages.forEach((m, i) => {
    if (m.offset !== first.offset + BigInt(i)) {
      throw new RangeError(`batch offsets must be contiguous: message ${i} has offset ${m.offset}`);
    }
    if (m.timestamp !== first.timestamp) {
      throw new RangeError(
        `every message of a 0.9 batch shares one server timestamp: message ${i} has ` +
          `${m.timestamp}, the batch ${first.timestamp}`,
      );
    }
    if (m.payload.length > MAX_PAYLOAD_SIZE || m.userHeaders.length > MAX_USER_HEADERS_SIZE) {
      throw new RangeError(`message ${i} exceeds Iggy's payload or user-headers limit`);
    }
    if (m.originTimestamp < origin) origin = m.originTimestamp;
    size += FRAME_HEADER_SIZE + m.payload.length + m.userHeaders.length;
  });
  const out = new Uint8Array(size);
  const v = viewOf(out);
  const starts: number[] = [];
  let p = BATCH_HEADER_SIZE;
  messages.forEach((m, i) => {
    const delta = m.originTimestamp - origin;
    if (delta > 0xffff_ffffn) {
      throw new RangeError(`message ${i}'s origin timestamp is ${delta} µs after the batch's`);
    }
    const frameSize = FRAME_HEADER_SIZE + m.payload.length + m.userHeaders.length;
    setU128(v, p + 8, checkU128(m.id, "id"));
    v.setUint32(p + 24, i, true);
    v.setUint32(p + 28, Number(delta), true);
    v.setUint32(p + 32, m.userHeaders.length, true);
    v.setUint32(p + 36, m.payload.length, true);
    out.set(m.payload, p + FRAME_HEADER_SIZE);
    out.set(m.userHeaders, p + FRAME_HEADER_SIZE + m.payload.length);
    v.setBigUint64(p, xxh3_64(out.subarray(p + 8, p + frameSize)), true);
    starts.push(p);
    p += frameSize;
  });
  v.setBigUint64(0, BigInt(ctx.partitionId), true);
  v.setBigUint64(8, checkU64(first.offset, "base offset"), true);
  checkU64(first.offset + BigInt(messages.length - 1), "last offset");
  v.setBigUint64(16, checkU64(first.timestamp, "timestamp"), true);
  v.setBigUint64(24, checkU64(origin, "origin timestamp"), true);
  v.setBigUint64(32, BigInt(size), true);
  v.setUint32(48, messages.length, true);
  v.setBigUint64(40, batchChecksum(out, 0, starts), true);
  return out;
}

/** The Iggy 0.9 codec (256-byte batch headers, sparse 24-byte index). */
export const iggy09: SegmentCodec = {
  name: "iggy-0.9",
  indexEntrySize: INDEX_ENTRY_SIZE_09,
  headerSize: BATCH_HEADER_SIZE,
  recordHeader: (header, ctx) => headerRecord(FRAMING, header, ctx),
  walk,
  messages,
  parseIndex,
  encodeIndex,
  encodeRecord,
  decodeRecord,
};
