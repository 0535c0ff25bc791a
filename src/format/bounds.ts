// Derives a segment's bounds (offsets, timestamps, sizes) the way the broker does at boot,
// from the `.index` plus positional reads of record headers — never reading the whole `.log`.
import { type FileHandle, open } from "node:fs/promises";
import { viewOf } from "./_bytes.ts";
import { readAt, readFileIfExists } from "./_file.ts";
import type { SegmentCodec } from "./codec.ts";
import { codecFor } from "./codecs.ts";
import { FormatError } from "./errors.ts";
import { scanIndex08 } from "./iggy08.ts";
import { scanRecordHeaders } from "./scan.ts";
import type { FormatName, RecordInfo, SegmentBounds } from "./types.ts";

/** The bounds of a segment with no messages. */
export function emptyBounds(startOffset: bigint, indexSize = 0): SegmentBounds {
  return {
    startOffset,
    endOffset: startOffset - 1n,
    startTimestamp: 0n,
    endTimestamp: 0n,
    maxTimestamp: 0n,
    size: 0,
    indexSize,
    messageCount: 0n,
  };
}

/** What is known of a segment's prefix before the header walk extends it to EOF. */
interface Prefix {
  /** Where the header walk starts (a record boundary). */
  walkFrom: number;
  /** The offset the record at `walkFrom` must start at. */
  nextOffset: bigint;
  startTimestamp?: bigint;
  endTimestamp?: bigint;
  maxTimestamp?: bigint;
}

/**
 * Reads a segment's bounds.
 *
 * - Iggy 0.8: the dense index gives the end offset and timestamps; its last END position must
 *   not pass the log size. The first and last indexed record headers are cross-checked, and any
 *   records past the last indexed one (a writer that crashed between `.log` and `.index`) are
 *   walked header by header, so the bounds always describe the `.log`.
 * - Iggy 0.9: the sparse index is a hint; batch headers are walked from the last entry's
 *   position (or byte 0) to EOF.
 *
 * @param logPath the segment's `.log`
 * @param indexPath the segment's `.index` (may be missing for 0.9)
 * @param format the partition's format
 * @param startOffset the segment's start offset (its file name)
 * @returns the bounds; for an empty `.log`, `endOffset = startOffset - 1n` and zero timestamps
 * @throws {FormatError} `truncated` for a missing 0.8 index, `index_past_eof` (naming the index),
 *   `straddles_eof` (naming the log), and any header or index validation error
 * @throws a Node.js `ENOENT` error when the `.log` does not exist
 */
export async function readSegmentBounds(
  logPath: string,
  indexPath: string,
  format: FormatName,
  startOffset: bigint,
): Promise<SegmentBounds> {
  const codec = codecFor(format);
  const fh = await open(logPath, "r");
  try {
    const logSize = (await fh.stat()).size;
    const index = await readFileIfExists(indexPath);
    const indexSize = index?.length ?? 0;
    if (logSize === 0 && indexSize === 0) return emptyBounds(startOffset, indexSize);
    const ctx = { file: indexPath, startOffset, logSize };
    let prefix: Prefix;
    if (format === "iggy-0.8") {
      if (!index) {
        throw new FormatError(
          "truncated",
          indexPath,
          0,
          `the index is missing; an Iggy 0.8 segment always has one (${logSize}-byte log)`,
        );
      }
      prefix = await indexedPrefix08(fh, codec, index, logPath, ctx);
    } else {
      const entries = index ? codec.parseIndex(index, ctx) : [];
      const last = entries.at(-1);
      let max: bigint | undefined;
      for (const e of entries) if (max === undefined || e.timestamp > max) max = e.timestamp;
      prefix = {
        walkFrom: last?.position ?? 0,
        nextOffset: last?.offset ?? startOffset,
        maxTimestamp: max,
      };
    }
    if (logSize === 0) return emptyBounds(startOffset, indexSize);
    if (prefix.startTimestamp === undefined) {
      // The first record gives the start timestamp and must start at the segment's offset.
      const first = await headerAt(fh, codec, logPath, 0, logSize);
      if (first.firstOffset !== startOffset) {
        throw new FormatError(
          "offset_gap",
          logPath,
          0,
          `first record has offset ${first.firstOffset}, but the segment starts at ${startOffset}`,
        );
      }
      prefix.startTimestamp = first.timestamp;
      prefix.maxTimestamp = maxOf(prefix.maxTimestamp, first.timestamp);
    }
    let endOffset = prefix.nextOffset - 1n;
    let endTimestamp = prefix.endTimestamp;
    let maxTimestamp = prefix.maxTimestamp;
    for await (
      const r of scanRecordHeaders(fh, codec, {
        file: logPath,
        size: logSize,
        from: prefix.walkFrom,
        startOffset,
        expectedOffset: prefix.nextOffset,
      })
    ) {
      endOffset = r.lastOffset;
      endTimestamp = r.timestamp;
      maxTimestamp = maxOf(maxTimestamp, r.timestamp);
    }
    return {
      startOffset,
      endOffset,
      startTimestamp: prefix.startTimestamp,
      endTimestamp: endTimestamp ?? 0n,
      maxTimestamp: maxTimestamp ?? 0n,
      size: logSize,
      indexSize,
      messageCount: endOffset - startOffset + 1n,
    };
  } finally {
    await fh.close();
  }
}

/** Summarizes a dense 0.8 index and cross-checks its first and last entries against the log. */
async function indexedPrefix08(
  fh: FileHandle,
  codec: SegmentCodec,
  index: Uint8Array,
  logPath: string,
  ctx: { file: string; startOffset: bigint; logSize: number },
): Promise<Prefix> {
  const v = viewOf(index);
  let first: bigint | undefined;
  let last: bigint | undefined;
  let max: bigint | undefined;
  let lastStart = 0;
  let lastEnd = 0;
  const count = scanIndex08(index, ctx, (at, start, end) => {
    const ts = v.getBigUint64(at + 8, true);
    first ??= ts;
    last = ts;
    if (max === undefined || ts > max) max = ts;
    lastStart = start;
    lastEnd = end;
  });
  if (count === 0) return { walkFrom: 0, nextOffset: ctx.startOffset };
  const firstRecord = await headerAt(fh, codec, logPath, 0, ctx.logSize);
  checkIndexedOffset(firstRecord, ctx.startOffset, logPath, ctx.file);
  const lastRecord = await headerAt(fh, codec, logPath, lastStart, ctx.logSize);
  checkIndexedOffset(lastRecord, ctx.startOffset + BigInt(count - 1), logPath, ctx.file);
  if (lastStart + lastRecord.size !== lastEnd) {
    throw new FormatError(
      "bad_length",
      logPath,
      lastStart,
      `the last indexed message is ${lastRecord.size} bytes, but ${ctx.file} says it spans ` +
        `bytes ${lastStart}..${lastEnd}`,
    );
  }
  return {
    walkFrom: lastEnd,
    nextOffset: ctx.startOffset + BigInt(count),
    startTimestamp: first,
    endTimestamp: last,
    maxTimestamp: max,
  };
}

function checkIndexedOffset(r: RecordInfo, offset: bigint, logPath: string, indexPath: string) {
  if (r.firstOffset !== offset) {
    throw new FormatError(
      "offset_gap",
      logPath,
      r.position,
      `message has offset ${r.firstOffset}, but ${indexPath} puts offset ${offset} here`,
    );
  }
}

async function headerAt(
  fh: FileHandle,
  codec: SegmentCodec,
  file: string,
  position: number,
  logSize: number,
): Promise<RecordInfo> {
  const header = await readAt(fh, position, Math.min(codec.headerSize, logSize - position));
  return codec.recordHeader(header, { file, position });
}

function maxOf(a: bigint | undefined, b: bigint): bigint {
  return a === undefined || b > a ? b : a;
}
