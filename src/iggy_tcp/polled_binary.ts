// The PollMessages answer body over TCP, the part both versions share: a 16-byte head
// `[partition_id u32][current_offset u64][count u32]` then the messages (0.8:
// core/server/src/binary/handlers/messages/poll_messages_handler.rs:59-70; 0.9:
// core/server/src/responses.rs:1666-1712), and the splice of tierd's older messages in front
// of the broker's own answer. The messages themselves are in polled_08.ts and polled_09.ts.
import type { PolledMessage } from "../iggy_front/remote_read.ts";
import { WireCursor, WireError, WireWriter } from "./wire.ts";

/** Size of the head of a PollMessages answer. */
export const POLL_HEAD_SIZE = 16;

/** The head of a PollMessages answer. */
export interface PollHead {
  /** The partition polled (0.9 answers u32::MAX when a group member must re-sync). */
  partitionId: number;
  /** The partition's current (last) offset. */
  currentOffset: bigint;
  /** How many messages follow. */
  count: number;
}

export type { PolledMessage };

/** A polled message and where its bytes are in the answer: `[start, end)`. */
export interface PolledRecord extends PolledMessage {
  start: number;
  end: number;
}

/**
 * Reads the head of a PollMessages answer.
 * @throws {WireError} `truncated` for fewer than 16 bytes
 */
export function decodePollHead(payload: Uint8Array): PollHead {
  const c = new WireCursor(payload);
  return {
    partitionId: c.u32("partition id"),
    currentOffset: c.u64("current offset"),
    count: c.u32("message count"),
  };
}

/**
 * A PollMessages answer: the head, then `parts` one after another (one copy).
 * @param head the head, its count the number of messages in `parts`
 * @param parts the encoded messages (0.8) or batches (0.9)
 * @throws {WireError} `out_of_range`
 */
export function polledPayload(head: PollHead, parts: readonly Uint8Array[]): Uint8Array {
  const size = parts.reduce((n, p) => n + p.length, POLL_HEAD_SIZE);
  const w = new WireWriter(size)
    .u32(head.partitionId, "partition id")
    .u64(head.currentOffset, "current offset")
    .u32(head.count, "message count");
  for (const p of parts) w.put(p);
  return w.finish();
}

/**
 * One answer from tierd's part of a poll and the broker's: tierd's messages (every one below
 * the broker's first) then the broker's, under the broker's partition id and current offset
 * and the summed count. The same at 0.8 and 0.9, whose answers differ only after the head.
 * Neither part's messages are walked; decode them first when they are untrusted.
 * @param ours tierd's answer, as `polledPayload08`/`polledPayload09` made it
 * @param brokers the broker's answer, from the offset after tierd's last message
 * @throws {WireError} `truncated` for a part shorter than its head, `out_of_range` when the
 *   counts sum past u32
 */
export function splicePolled(ours: Uint8Array, brokers: Uint8Array): Uint8Array {
  const mine = decodePollHead(ours);
  const theirs = decodePollHead(brokers);
  return polledPayload(
    {
      partitionId: theirs.partitionId,
      currentOffset: theirs.currentOffset,
      count: mine.count + theirs.count,
    },
    [ours.subarray(POLL_HEAD_SIZE), brokers.subarray(POLL_HEAD_SIZE)],
  );
}

/** Throws unless `found` messages are what the head announced. */
export function checkCount(head: PollHead, found: number): void {
  if (found !== head.count) {
    throw new WireError(
      "count_mismatch",
      `the answer's head counts ${head.count} messages but ${found} follow`,
      12,
    );
  }
}

/** The error for bytes left after as many messages as the head counts. */
export function bytesAfterCount(head: PollHead, at: number): WireError {
  return new WireError(
    "count_mismatch",
    `the answer's head counts ${head.count} messages but more bytes follow them`,
    at,
  );
}
