// Typed errors for Iggy segment files: every problem names the file and the byte it starts at,
// so an operator can open the segment with a hex editor and see the same thing tierd saw.

/** What is wrong with a segment file. */
export type FormatErrorCode =
  /** The file ends inside a fixed-size structure (an index entry), or a required file is missing. */
  | "truncated"
  /** A stored checksum does not match the bytes it covers. */
  | "checksum"
  /** Reserved bytes are not zero: most likely a newer, unsupported Iggy format (0.10+). */
  | "reserved_nonzero"
  /** An index entry points beyond the end of the `.log`. */
  | "index_past_eof"
  /** Index offsets or positions are not strictly increasing. */
  | "index_unsorted"
  /** An index entry does not describe the record it points at (position, offset, timestamp). */
  | "index_mismatch"
  /** A record starts before the end of the `.log` but runs past it. */
  | "straddles_eof"
  /** A length field is impossible (too small, too large, or the parts do not add up). */
  | "bad_length"
  /** Record offsets are not contiguous, or do not start at the segment's start offset. */
  | "offset_gap"
  /** The files match neither Iggy 0.8 nor Iggy 0.9. */
  | "unknown_format";

/**
 * A structural or integrity problem in a segment's `.log` or `.index`.
 *
 * The message reads `"<file> @ byte <position>: <what is wrong>"`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { initHashes } from "../hash.ts";
 * import { codecFor } from "./codecs.ts";
 *
 * await initHashes();
 * const codec = codecFor("iggy-0.8");
 * const bytes = codec.encodeRecord([{
 *   offset: 0n,
 *   timestamp: 1_750_000_000_000_000n,
 *   originTimestamp: 1_750_000_000_000_000n,
 *   id: 1n,
 *   payload: new TextEncoder().encode("hello"),
 *   userHeaders: new Uint8Array(),
 * }], { partitionId: 0 });
 * bytes[bytes.length - 1] ^= 1; // one flipped bit in the payload
 * try {
 *   for (const _ of codec.walk(bytes, { file: "00000000000000000000.log", startOffset: 0n })) {
 *     // each record is checked as the walk reaches it
 *   }
 *   assert.fail("a damaged record was accepted");
 * } catch (err) {
 *   if (!(err instanceof FormatError)) throw err;
 *   assert.equal(err.code, "checksum");
 *   assert.equal(err.file, "00000000000000000000.log");
 * }
 * ```
 */
export class FormatError extends Error {
  override readonly name = "FormatError";
  /** What kind of problem this is. */
  readonly code: FormatErrorCode;
  /** The file (path or object key) the problem is in. */
  readonly file: string;
  /** Byte position in `file` of the offending record, frame or index entry. */
  readonly position: number;

  /**
   * @param code what kind of problem this is
   * @param file the file the problem is in
   * @param position byte position of the offending record, frame or index entry in `file`
   * @param what a short description of what is wrong
   */
  constructor(code: FormatErrorCode, file: string, position: number, what: string) {
    super(`${file} @ byte ${position}: ${what}`);
    this.code = code;
    this.file = file;
    this.position = position;
  }
}

/** The sentence appended to every `reserved_nonzero` error. */
export const NEWER_FORMAT_HINT =
  "reserved bytes must be zero; this is likely a newer Iggy batch format (e.g. 0.10) " +
  "that tierd does not support";
