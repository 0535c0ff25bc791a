// Checks both Iggy codecs make while walking records, and the record framing they share: a
// fixed-size header that gives the record's size (private to src/format).
import type { WalkOptions } from "./codec.ts";
import { FormatError } from "./errors.ts";
import type { RecordInfo } from "./types.ts";

/** The error for a record (or its header) that the data ends inside of. */
export function straddlesEof(
  file: string,
  position: number,
  needed: number,
  available: number,
  what: string,
): FormatError {
  return new FormatError(
    "straddles_eof",
    file,
    position,
    `${what} needs ${needed} bytes but the data ends after ${available} (torn or cut record)`,
  );
}

/**
 * Checks a record's first offset against the one expected (contiguity), or, when nothing is
 * expected yet, against the segment start. Returns the offset the next record must start at.
 */
export function checkRecordOffset(
  info: RecordInfo,
  expected: bigint | undefined,
  startOffset: bigint,
  file: string,
  filePosition: number,
): bigint {
  if (expected !== undefined && info.firstOffset !== expected) {
    throw new FormatError(
      "offset_gap",
      file,
      filePosition + info.position,
      `record starts at offset ${info.firstOffset}, expected ${expected} (offsets must be ` +
        `contiguous from the segment start ${startOffset})`,
    );
  }
  if (info.firstOffset < startOffset) {
    throw new FormatError(
      "offset_gap",
      file,
      filePosition + info.position,
      `record offset ${info.firstOffset} is below the segment start offset ${startOffset}`,
    );
  }
  return info.lastOffset + 1n;
}

/** Validates a caller-supplied start position inside a buffer. */
export function checkFromPosition(from: number, length: number): number {
  if (!Number.isInteger(from) || from < 0 || from > length) {
    throw new RangeError(`fromPosition ${from} is outside the buffer (0..${length})`);
  }
  return from;
}

/** How a codec frames its records: a fixed-size header that tells the record's size. */
export interface RecordFraming {
  /** Bytes of a record header. */
  headerSize: number;
  /** What a record is called in errors: `message` (0.8) or `batch` (0.9). */
  noun: string;
  /** Parses the header at `buf[at..]`; the caller guarantees `headerSize` bytes are there. */
  parseHeader(buf: Uint8Array, at: number, file: string, filePosition: number): RecordInfo;
}

/**
 * Parses the header at `at` and checks the whole record lies inside `buf`; with
 * `allowPartialTail`, returns undefined instead of throwing when it does not.
 */
export function wholeRecordAt(
  framing: RecordFraming,
  buf: Uint8Array,
  at: number,
  file: string,
  filePosition: number,
  allowPartialTail: boolean,
): RecordInfo | undefined {
  const { headerSize, noun } = framing;
  const available = buf.length - at;
  if (available < headerSize) {
    if (allowPartialTail) return undefined;
    throw straddlesEof(file, filePosition + at, headerSize, available, `${noun} header`);
  }
  const info = framing.parseHeader(buf, at, file, filePosition);
  if (info.size > available) {
    if (allowPartialTail) return undefined;
    throw straddlesEof(file, filePosition + at, info.size, available, noun);
  }
  return info;
}

/** A codec's `recordHeader`: the header alone, read at `ctx.position` of `ctx.file`. */
export function headerRecord(
  framing: RecordFraming,
  header: Uint8Array,
  ctx: { file: string; position: number },
): RecordInfo {
  if (header.length < framing.headerSize) {
    throw straddlesEof(ctx.file, ctx.position, framing.headerSize, header.length, "header");
  }
  return { ...framing.parseHeader(header, 0, ctx.file, ctx.position), position: ctx.position };
}

/**
 * A codec's `walk`: whole records from `ctx.fromPosition`, each passed to `check` (the codec's
 * own checks, checksums when `verify`), then checked for offset contiguity.
 */
export function* walkRecords(
  framing: RecordFraming,
  log: Uint8Array,
  ctx: WalkOptions,
  check: (log: Uint8Array, info: RecordInfo, filePosition: number, verify: boolean) => void,
): Generator<RecordInfo> {
  const filePosition = ctx.filePosition ?? 0;
  const verify = ctx.verify ?? true;
  let pos = checkFromPosition(ctx.fromPosition ?? 0, log.length);
  let expected = ctx.expectedOffset ?? (filePosition + pos === 0 ? ctx.startOffset : undefined);
  while (pos < log.length) {
    const info = wholeRecordAt(
      framing,
      log,
      pos,
      ctx.file,
      filePosition,
      ctx.allowPartialTail ?? false,
    );
    if (!info) return;
    check(log, info, filePosition, verify);
    expected = checkRecordOffset(info, expected, ctx.startOffset, ctx.file, filePosition);
    yield info;
    pos += info.size;
  }
}

/** The record a walk found at `record.position` of `log`, read again: it must be as big. */
export function recordAgain(
  framing: RecordFraming,
  log: Uint8Array,
  record: RecordInfo,
  file: string,
  filePosition: number,
): RecordInfo {
  const info = wholeRecordAt(framing, log, record.position, file, filePosition, false)!;
  if (info.size !== record.size) {
    throw new FormatError(
      "bad_length",
      file,
      filePosition + record.position,
      `${framing.noun} is ${info.size} bytes, not the ${record.size} the record info says`,
    );
  }
  return info;
}

/** The one record `record` holds, with no bytes after it. */
export function onlyRecord(
  framing: RecordFraming,
  record: Uint8Array,
  file: string,
  filePosition: number,
): RecordInfo {
  const info = wholeRecordAt(framing, record, 0, file, filePosition, false)!;
  if (info.size !== record.length) {
    throw new FormatError(
      "bad_length",
      file,
      filePosition,
      `${record.length - info.size} stray bytes after a ${info.size}-byte ${framing.noun}`,
    );
  }
  return info;
}
