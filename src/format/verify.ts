// Reads a whole sealed segment once and checks every byte of it before it is trusted: every
// record's checksums and frame (lengths, message count, contiguous offsets, nothing after the
// last record), and every `.index` entry against the record it points at. Bounds (bounds.ts)
// only read headers; this is the full check the tier worker runs before a segment is copied.
import { type FileHandle, open } from "node:fs/promises";
import { concatBytes, readInto } from "../base/bytes.ts";
import { viewOf } from "./_bytes.ts";
import { straddlesEof } from "./_checks.ts";
import { readFileIfExists } from "./_file.ts";
import type { SegmentCodec } from "./codec.ts";
import { codecFor } from "./codecs.ts";
import { FormatError } from "./errors.ts";
import { INDEX_ENTRY_SIZE_08, scanIndex08 } from "./iggy08.ts";
import type { FormatName, IndexEntry, RecordInfo } from "./types.ts";

/** Options of {@link verifySegment}. */
export interface VerifyOptions {
  /**
   * Bytes of the `.log` to verify: the size its bounds were read at (a sealed segment does not
   * grow; a file shorter than this is an error). @default the file's size
   */
  size?: number;
  /**
   * Called with every byte of the `.log`, in order, as it is read (to hash it in the same pass).
   * The bytes are a view of a buffer the next window is read into: use them before returning.
   */
  onBytes?: (bytes: Uint8Array) => void;
  /** Bytes read per step (a record larger than this is read whole). @default 2 MiB */
  windowSize?: number;
}

/** What a full walk of a segment found. */
export interface VerifiedSegment {
  /** Records walked (0.8 messages, 0.9 batches). */
  records: number;
  messageCount: bigint;
  /** Offset of the last message (inclusive); `startOffset - 1n` for an empty segment. */
  endOffset: bigint;
  /** Server timestamps (µs) of the first and last records, and the largest; 0 when empty. */
  startTimestamp: bigint;
  endTimestamp: bigint;
  maxTimestamp: bigint;
  /** Bytes of the `.log` verified. */
  size: number;
}

const DEFAULT_WINDOW = 2 << 20;

/**
 * Verifies a segment's `.log` record by record — checksums (`verify`), frames, offsets
 * contiguous from `startOffset`, the file ending exactly after a whole record — and its `.index`
 * against those records: a 0.8 entry per message in order (an index that stops early is
 * allowed, as after a crash between the two writes), each with the message's end position and
 * timestamp; a 0.9 entry only at a batch start, with that batch's offset and timestamp.
 *
 * @param logPath the segment's `.log`
 * @param indexPath the segment's `.index` (may be missing for 0.9)
 * @param format the partition's format
 * @param startOffset the segment's start offset (its file name)
 * @param options how much to read, and who else sees the bytes
 * @returns what the walk found
 * @throws {FormatError} the first problem, naming the file (`.log` or `.index`) and byte position
 * @throws a Node.js `ENOENT` error when the `.log` does not exist
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mkdtemp, readFile, rm } from "node:fs/promises";
 * import { tmpdir } from "node:os";
 * import { join } from "node:path";
 * import { createXxh128Stream, xxh3_128 } from "../hash.ts";
 * import { generatePartition } from "./generate.ts";
 *
 * const dataDir = await mkdtemp(join(tmpdir(), "iggy-"));
 * const [seg] = await generatePartition({
 *   format: "iggy-0.9",
 *   dataDir,
 *   stream: 0,
 *   topic: 0,
 *   partition: 0,
 *   messages: 100,
 *   segmentSize: 1 << 20,
 * });
 * const hasher = await createXxh128Stream();
 * const v = await verifySegment(seg.logPath, seg.indexPath, "iggy-0.9", 0n, {
 *   onBytes: (bytes) => hasher.update(bytes),
 * });
 * assert.equal(v.endOffset, 99n);
 * assert.equal(hasher.digest(), xxh3_128(await readFile(seg.logPath)));
 * await rm(dataDir, { recursive: true });
 * ```
 */
export async function verifySegment(
  logPath: string,
  indexPath: string,
  format: FormatName,
  startOffset: bigint,
  options: VerifyOptions = {},
): Promise<VerifiedSegment> {
  const codec = codecFor(format);
  const fh = await open(logPath, "r");
  try {
    const size = options.size ?? (await fh.stat()).size;
    const index = await readFileIfExists(indexPath);
    const check = indexCheck(codec, index ?? new Uint8Array(0), indexPath, logPath, {
      startOffset,
      logSize: size,
    });
    const found = await walkFile(fh, codec, logPath, startOffset, size, options, check.record);
    check.end(found.records);
    return found;
  } finally {
    await fh.close();
  }
}

/**
 * Walks every record of `fh` up to `size`, reading in windows, calling `onRecord` for each.
 *
 * The next window is read while this one is walked and hashed: the read (the kernel copying
 * from its page cache) and the checks overlap instead of taking turns, which took the walk of a
 * 256 MiB segment from about 100 to 75 ms here (its whole verify pass, hashes included, from
 * about 175 to 145 ms). Two buffers are used in turn, each with room in front of its window for
 * the start of a record the window before cut, so only that start is copied; the first record
 * of a window that does not fit is completed by one read of its rest.
 */
async function walkFile(
  fh: FileHandle,
  codec: SegmentCodec,
  file: string,
  startOffset: bigint,
  size: number,
  options: VerifyOptions,
  onRecord: (r: RecordInfo) => void,
): Promise<VerifiedSegment> {
  const window = options.windowSize ?? DEFAULT_WINDOW;
  const out: VerifiedSegment = {
    records: 0,
    messageCount: 0n,
    endOffset: startOffset - 1n,
    startTimestamp: 0n,
    endTimestamp: 0n,
    maxTimestamp: 0n,
    size,
  };
  // The same two buffers for every window: a fresh buffer a window left the runtime's collector
  // far behind the reads (a 1 GiB segment took the agent's memory up by a quarter of a GiB
  // before any was given back).
  const room = window;
  const buffers = [new Uint8Array(room + window), new Uint8Array(room + window)];
  let turn = 0;
  /** Reads the window at `position` into buffer `into`, behind its room. */
  const readWindow = (into: number, position: number) => {
    const length = Math.min(window, size - position);
    return readInto(fh, buffers[into].subarray(room, room + length), position);
  };
  let next: Promise<number> | undefined = size > 0 ? readWindow(0, 0) : undefined;
  /** The file ended at `at`, short of the size it was measured at. */
  const truncated = (at: number) =>
    new FormatError(
      "truncated",
      file,
      at,
      `the file ends at byte ${at}, before the ${size} bytes its segment was measured at`,
    );
  let carry = new Uint8Array(0); // the start of a record the last window cut
  let read = 0; // bytes read so far: the file position after `carry`
  let expected = startOffset;
  while (read < size) {
    const got = await next!;
    next = undefined;
    if (got === 0) throw truncated(read);
    const current = buffers[turn];
    const fresh = current.subarray(room, room + got);
    options.onBytes?.(fresh);
    read += got;
    let buf: Uint8Array;
    if (carry.length <= room) {
      current.set(carry, room - carry.length);
      buf = current.subarray(room - carry.length, room + got);
    } else {
      buf = concatBytes([carry, fresh]);
    }
    let whole = false;
    if (buf.length >= codec.headerSize && read < size) {
      // A record larger than what is here: the rest of it is read now, in one go.
      const position = read - buf.length;
      const header = codec.recordHeader(buf, { file, position });
      if (header.size > size - position) {
        throw straddlesEof(file, position, header.size, size - position, "record");
      }
      if (header.size > buf.length) {
        const rest = new Uint8Array(header.size - buf.length);
        const more = await readInto(fh, rest, read);
        if (more < rest.length) throw truncated(read + more);
        options.onBytes?.(rest);
        read += rest.length;
        buf = concatBytes([buf, rest]);
        whole = true;
      }
    }
    if (read < size) {
      turn = 1 - turn;
      next = readWindow(turn, read); // read while this window is walked
    }
    const at = read - buf.length;
    let consumed = 0;
    const walk = codec.walk(buf, {
      file,
      startOffset,
      expectedOffset: expected,
      filePosition: at,
      verify: true,
      allowPartialTail: read < size && !whole, // at the end, a cut record is an error
    });
    try {
      for (const r of walk) {
        const record = { ...r, position: at + r.position };
        onRecord(record);
        if (out.records === 0) out.startTimestamp = r.timestamp;
        out.records++;
        out.endTimestamp = r.timestamp;
        if (r.timestamp > out.maxTimestamp) out.maxTimestamp = r.timestamp;
        out.endOffset = r.lastOffset;
        expected = r.lastOffset + 1n;
        consumed = r.position + r.size;
      }
    } catch (err) {
      await next?.catch(() => {}); // the read in flight finishes before the file is closed
      throw err;
    }
    carry = buf.slice(consumed); // a copy: the buffer is read into again
  }
  out.messageCount = out.endOffset - startOffset + 1n;
  return out;
}

/** Checks index entries against the records walked, in step with the walk. */
interface IndexCheck {
  /** Called with each record (file positions), in order. */
  record(r: RecordInfo): void;
  /** Called once the walk is done, with the number of records. */
  end(records: number): void;
}

function indexCheck(
  codec: SegmentCodec,
  index: Uint8Array,
  indexPath: string,
  logPath: string,
  ctx: { startOffset: bigint; logSize: number },
): IndexCheck {
  // The index's own structure first (sorted, whole entries), but not against the log's size: a
  // cut log is named by the walk, at the cut, rather than by the entries past it.
  const parse = { file: indexPath, startOffset: ctx.startOffset, logSize: Number.MAX_SAFE_INTEGER };
  if (codec.name === "iggy-0.8") {
    // Dense: entry i describes message i (its END position and timestamp).
    const count = scanIndex08(index, parse);
    const v = viewOf(index);
    let i = 0;
    return {
      record(r) {
        if (i >= count) return; // an index that stops early: the records after it are walked
        const at = i * INDEX_ENTRY_SIZE_08;
        const end = v.getUint32(at + 4, true);
        const timestamp = v.getBigUint64(at + 8, true);
        if (end !== r.position + r.size || timestamp !== r.timestamp) {
          throw mismatch(
            indexPath,
            at,
            logPath,
            r,
            `ends at byte ${end} with timestamp ${timestamp}`,
          );
        }
        i++;
      },
      end(records) {
        if (count > records) {
          throw new FormatError(
            "index_past_eof",
            indexPath,
            records * INDEX_ENTRY_SIZE_08,
            `the index lists ${count} messages but ${logPath} holds ${records}`,
          );
        }
      },
    };
  }
  // Sparse: each entry must sit on a batch start and name that batch.
  const entries: IndexEntry[] = index.length === 0 ? [] : codec.parseIndex(index, parse);
  let next = 0;
  const entryAt = (n: number) => n * codec.indexEntrySize;
  return {
    record(r) {
      while (next < entries.length && entries[next].position < r.position + r.size) {
        const e = entries[next];
        if (
          e.position !== r.position || e.offset !== r.firstOffset || e.timestamp !== r.timestamp
        ) {
          throw mismatch(
            indexPath,
            entryAt(next),
            logPath,
            r,
            `points at byte ${e.position} with offset ${e.offset} and timestamp ${e.timestamp}`,
          );
        }
        next++;
      }
    },
    end() {
      if (next < entries.length) {
        throw new FormatError(
          "index_past_eof",
          indexPath,
          entryAt(next),
          `entry ${next} points at byte ${entries[next].position}, after the last record of ` +
            logPath,
        );
      }
    },
  };
}

function mismatch(
  indexPath: string,
  entryAt: number,
  logPath: string,
  r: RecordInfo,
  says: string,
): FormatError {
  return new FormatError(
    "index_mismatch",
    indexPath,
    entryAt,
    `the index entry ${says}, but the record of ${logPath} at byte ${r.position} (offset ` +
      `${r.firstOffset}, ${r.size} bytes, timestamp ${r.timestamp}) does not match it`,
  );
}
