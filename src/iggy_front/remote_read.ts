// The part of a poll the broker no longer has, read through tierd's read path (cache, store,
// local files) and decoded into messages: whole records from `readRecords`, then the messages
// of the range asked for — a 0.9 batch that starts below the offset contributes only its
// messages from there on, as the broker slices it (core/partitions/src/journal.rs
// `select_batch_slice`). Every chunk read reserves its bytes from the node's read budget until
// the answer has been sent, and so does every message decoded from them (its objects take about
// half a KiB besides its bytes).
import type { PartitionId } from "../layout/partition.ts";
import { codecFor } from "../format/codecs.ts";
import { MESSAGE_HEADER_SIZE } from "../format/iggy08.ts";
import { FRAME_HEADER_SIZE } from "../format/iggy09.ts";
import type { FormatName } from "../format/types.ts";
import type { ReadContext } from "../read/context.ts";
import type { AnswerHold } from "../read/read_budget.ts";
import { OffsetBelowRetention, OffsetPastEnd } from "../read/errors.ts";
import { readRecords, type ReadResult } from "../read/read_records.ts";
import type { Message } from "../format/types.ts";

/** A message read from tierd: a decoded one and its stored checksum. */
export interface PolledMessage {
  message: Message;
  checksum: bigint;
  /**
   * The whole stored record the message was read from (a 0.8 message, a 0.9 batch), a view of
   * the read's bytes: what a binary answer re-sends or slices.
   */
  record?: Uint8Array;
}

/** Bytes of records asked for per read at most. */
export const CHUNK_BYTES = 4 * 1024 * 1024;
/** Bytes asked for at least: a poll of a few messages reads about what they take, not 4 MiB. */
const MIN_READ_BYTES = 64 * 1024;
/** The size assumed per message before the first read has shown the partition's. */
export const GUESS_MESSAGE_BYTES = 1024;
/**
 * Memory a decoded message holds besides its record's bytes (its object, the views of its payload,
 * headers and record, its integers): about 480 bytes under Bun, measured from the collector's
 * live heap with a quarter of a million messages held.
 */
export const DECODED_MESSAGE_BYTES = 512;

/** What to read. */
export interface RemoteRange {
  partition: PartitionId;
  /** The first offset wanted (for a `timestamp` poll, the offset it resolved to). */
  from: bigint;
  /** The broker's first retained offset: messages at or past it are the broker's to give. */
  until: bigint;
  /** Messages wanted at most. */
  count: number;
  /** Record bytes read at most (at least one message is always taken). */
  maxBytes: number;
  readerId?: string;
}

/** What was read. */
export interface RemoteSlice {
  messages: PolledMessage[];
  /** The offset after the last message taken (or where the read stopped). */
  next: bigint;
  /** True when the read stopped at `until`: the rest is the broker's. */
  reachedBroker: boolean;
  /** The on-disk format the messages were read in; undefined when none were. */
  format?: FormatName;
}

/** The stored checksum of a decoded message: the first 8 bytes of its header, before its payload. */
function checksumOf(
  r: ReadResult,
  view: DataView,
  payload: Uint8Array,
  format: FormatName,
): bigint {
  if (payload.buffer !== r.bytes.buffer) {
    throw new Error("decoded payload is not a view into the read's bytes");
  }
  const header = format === "iggy-0.8" ? MESSAGE_HEADER_SIZE : FRAME_HEADER_SIZE;
  return view.getBigUint64(payload.byteOffset - header, true);
}

/**
 * Reads messages `from`..`until` (exclusive), at most `count`, stopping before a gap.
 *
 * @param hold holds the records' bytes and the decoded messages against the read budget; release
 *   it once the answer is sent
 * @throws {ReadError} as `readRecords` does (503-class errors for a slow store)
 */
export async function readRemote(
  ctx: ReadContext,
  range: RemoteRange,
  hold: AnswerHold,
): Promise<RemoteSlice> {
  const messages: PolledMessage[] = [];
  let cur = range.from;
  let taken = 0;
  let format: FormatName | undefined;
  let perMessage = GUESS_MESSAGE_BYTES;
  while (messages.length < range.count && cur < range.until && taken < range.maxBytes) {
    // About what the messages still wanted take, by the size of those read so far.
    const wanted = Math.ceil((range.count - messages.length) * perMessage * 1.25);
    const want = Math.min(CHUNK_BYTES, range.maxBytes - taken, Math.max(MIN_READ_BYTES, wanted));
    // The records and the messages they are expected to decode to.
    const expected = Math.ceil(want / perMessage);
    await hold.hold(want + expected * DECODED_MESSAGE_BYTES);
    let r: ReadResult;
    try {
      r = await readRecords(ctx, {
        partition: range.partition,
        offset: cur,
        maxBytes: want,
        readerId: range.readerId,
      });
    } catch (err) {
      if (
        err instanceof OffsetBelowRetention && messages.length === 0 && err.firstAvailable > cur
      ) {
        cur = err.firstAvailable; // gone remotely too: start where tierd's copies start
        continue;
      }
      if (err instanceof OffsetPastEnd) break;
      throw err;
    }
    if (r.gap && messages.length > 0) break; // an answer never spans lost offsets
    format = r.format;
    const before = messages.length;
    const codec = codecFor(r.format);
    const view = new DataView(r.bytes.buffer);
    const file =
      `partition ${range.partition.stream}/${range.partition.topic}/${range.partition.partition}`;
    for (const record of codec.walk(r.bytes, { file, startOffset: r.firstOffset, verify: false })) {
      const raw = r.bytes.subarray(record.position, record.position + record.size);
      for (const m of codec.messages(r.bytes, record, file)) {
        if (m.offset < cur || m.offset >= range.until || messages.length >= range.count) continue;
        messages.push({
          message: m,
          checksum: checksumOf(r, view, m.payload, r.format),
          record: raw,
        });
      }
    }
    taken += r.bytes.length;
    // More messages than expected (smaller ones than so far): their objects are held too.
    await hold.hold((messages.length - before - expected) * DECODED_MESSAGE_BYTES);
    if (messages.length > 0) perMessage = Math.max(64, Math.ceil(taken / messages.length));
    const last = messages.at(-1)?.message.offset;
    cur = last !== undefined && last + 1n < r.nextOffset ? last + 1n : r.nextOffset;
    if (messages.length >= range.count) cur = last! + 1n;
  }
  return { messages, next: cur, reachedBroker: cur >= range.until, format };
}
