// Walks record headers of a `.log` on disk with positional reads, without loading the file:
// how segment bounds are found and how a read finds its record after a sparse-index lookup.
import type { FileHandle } from "node:fs/promises";
import { WindowedReader } from "./_file.ts";
import { checkRecordOffset, straddlesEof } from "./_checks.ts";
import type { SegmentCodec } from "./codec.ts";
import type { RecordInfo } from "./types.ts";

/** Options for {@link scanRecordHeaders}. */
export interface ScanOptions {
  /** Names the `.log` in errors. */
  file: string;
  /** Size of the `.log` to scan up to (usually its current length). */
  size: number;
  /** A record boundary to start at. @default 0 */
  from?: number;
  /** The segment's start offset. */
  startOffset: bigint;
  /** The offset the first scanned record must start at. @default startOffset when from is 0 */
  expectedOffset?: bigint;
  /** Stop silently before an incomplete last record instead of throwing. @default false */
  allowPartialTail?: boolean;
}

/**
 * Yields the header of every record from `from` to `size`, validating header fields (reserved
 * bytes, lengths) and offset contiguity — but not checksums, which would need whole records.
 * `RecordInfo.position` is the byte position in the file.
 *
 * @throws {FormatError} `straddles_eof` for a record running past `size`, and whatever
 *   {@link SegmentCodec.recordHeader} throws
 */
export async function* scanRecordHeaders(
  fh: FileHandle,
  codec: SegmentCodec,
  opts: ScanOptions,
): AsyncGenerator<RecordInfo> {
  const reader = new WindowedReader(fh);
  let pos = opts.from ?? 0;
  let expected = opts.expectedOffset ?? (pos === 0 ? opts.startOffset : undefined);
  while (pos < opts.size) {
    const available = opts.size - pos;
    const header = await reader.read(pos, Math.min(codec.headerSize, available));
    if (header.length < codec.headerSize) {
      if (opts.allowPartialTail) return;
      throw straddlesEof(opts.file, pos, codec.headerSize, header.length, "record header");
    }
    const info = codec.recordHeader(header, { file: opts.file, position: pos });
    if (info.size > available) {
      if (opts.allowPartialTail) return;
      throw straddlesEof(opts.file, pos, info.size, available, "record");
    }
    expected = checkRecordOffset(info, expected, opts.startOffset, opts.file, 0);
    yield info;
    pos += info.size;
  }
}
