// The contract every Iggy segment codec meets. The codecs themselves are in iggy08.ts and
// iggy09.ts; codecs.ts looks one up by format name.
import type { FormatName, IndexEntry, Message, RecordInfo } from "./types.ts";

/** Options for {@link SegmentCodec.walk}. */
export interface WalkOptions {
  /** Names the file in errors (a path or an object key). */
  file: string;
  /** The segment's start offset (its file name). */
  startOffset: bigint;
  /** Where in `log` to start; must be a record boundary. @default 0 */
  fromPosition?: number;
  /**
   * The offset the first walked record must start at. Defaults to `startOffset` when the walk
   * starts at the beginning of the file; otherwise the first record only has to be at or above
   * `startOffset`, and the following ones contiguous with it.
   */
  expectedOffset?: bigint;
  /**
   * The byte position in `file` of `log[0]`, for buffers holding a range of a file. It only
   * shifts the positions reported in errors; {@link RecordInfo.position} stays an index into `log`.
   * @default 0
   */
  filePosition?: number;
  /** Verify checksums (needs `initHashes()` to have been awaited). @default true */
  verify?: boolean;
  /**
   * Stop silently before an incomplete last record instead of throwing `straddles_eof` (for a
   * range cut at an arbitrary byte). A whole header is still validated. @default false
   */
  allowPartialTail?: boolean;
}

/** Context for {@link SegmentCodec.parseIndex}. */
export interface ParseIndexOptions {
  /** Names the index file in errors. */
  file: string;
  startOffset: bigint;
  /** Size of the matching `.log`, to bound positions. */
  logSize: number;
}

/** Context for {@link SegmentCodec.encodeIndex}. */
export interface EncodeIndexOptions {
  startOffset: bigint;
  /** Size of the matching `.log` (0.8 stores end positions; the last one is the log size). */
  logSize: number;
}

/** Context for {@link SegmentCodec.encodeRecord}. */
export interface EncodeRecordOptions {
  /** Stamped into 0.9 batch headers; ignored by 0.8. */
  partitionId: number;
}

/** Options for {@link SegmentCodec.decodeRecord}. */
export interface DecodeRecordOptions {
  /** Names the file in errors. */
  file: string;
  /** Byte position of the record in `file`, for errors. @default 0 */
  filePosition?: number;
  /** @default true */
  verify?: boolean;
}

/** One record decoded on its own, with what is needed to re-encode it byte for byte. */
export interface DecodedRecord {
  info: RecordInfo;
  /** The 0.9 batch's partition_id; 0 for 0.8 (which does not store it). */
  partitionId: number;
  messages: Message[];
}

/** Reads and writes one Iggy on-disk format. All methods are synchronous; hashing needs `initHashes()`. */
export interface SegmentCodec {
  readonly name: FormatName;
  /** Bytes per `.index` entry (16 for 0.8, 24 for 0.9). */
  readonly indexEntrySize: number;
  /** Bytes of a record header (64 for a 0.8 message, 256 for a 0.9 batch). */
  readonly headerSize: number;

  /**
   * Parses and validates one record header (sizes, reserved bytes), without the record body.
   * @param header at least {@link headerSize} bytes starting at the record
   * @param ctx the file and the record's byte position in it (becomes `RecordInfo.position`)
   * @throws {FormatError} `reserved_nonzero`, `bad_length`, `straddles_eof` (short header)
   */
  recordHeader(header: Uint8Array, ctx: { file: string; position: number }): RecordInfo;

  /**
   * Walks whole records from `fromPosition` to the end of `log`, validating structure,
   * offset contiguity and (by default) checksums.
   * @throws {FormatError} on the first problem found
   */
  walk(log: Uint8Array, ctx: WalkOptions): Generator<RecordInfo>;

  /**
   * Decodes the messages of one record found by {@link walk}. Payloads and user headers are
   * views into `log`, not copies.
   * @param filePosition byte position in `file` of `log[0]`, for errors @default 0
   */
  messages(log: Uint8Array, record: RecordInfo, file: string, filePosition?: number): Message[];

  /**
   * Parses and validates a whole `.index`.
   * @throws {FormatError} `truncated`, `index_unsorted`, `index_past_eof`, `offset_gap`
   */
  parseIndex(index: Uint8Array, ctx: ParseIndexOptions): IndexEntry[];

  /** The inverse of {@link parseIndex}. */
  encodeIndex(entries: IndexEntry[], ctx: EncodeIndexOptions): Uint8Array;

  /**
   * Encodes one record with all checksums. 0.8 takes exactly one message; 0.9 takes the
   * messages of one batch (contiguous offsets, one shared server timestamp).
   * @throws {RangeError} when the messages cannot form one record of this format
   */
  encodeRecord(messages: Message[], ctx: EncodeRecordOptions): Uint8Array;

  /**
   * Decodes a buffer holding exactly one record (no offset checks against a segment).
   * @throws {FormatError} as {@link walk} does, and `bad_length` for trailing bytes
   */
  decodeRecord(record: Uint8Array, ctx: DecodeRecordOptions): DecodedRecord;
}
