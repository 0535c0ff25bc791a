// Checks both Iggy codecs make while walking records (private to src/format).
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
