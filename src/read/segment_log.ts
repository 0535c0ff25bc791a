// One segment's `.log` opened for reading — a local file or a remote object read through the
// RangeReader — behind one interface, plus the read window the walker pulls headers and bytes from.
import { type FileHandle, open } from "node:fs/promises";
import { readAt } from "../format/_file.ts";
import type { ChunkSource } from "../cache/types.ts";
import type { ReadContext } from "./context.ts";
import { identityKey } from "./verified_logs.ts";
import { type ReadDeadline, readFailure, within } from "./_fetch.ts";

/** An open `.log`. */
export interface SegmentLog {
  /** Where the bytes come from; bytes from the store are always checksum-verified. */
  readonly where: "local" | "remote";
  /** The file path or object key, for errors. */
  readonly name: string;
  /** Bytes readable: the file's size when opened, or the object's recorded size. */
  readonly size: number;
  /**
   * A local file's identity when it was opened, as a `VerifiedLogs` key; absent when its last
   * change was too recent to trust (verified_logs.ts), or for a remote object.
   */
  readonly trustKey?: string;
  /** Up to `length` bytes at `position`, fewer only at `size`. */
  read(position: number, length: number): Promise<Uint8Array>;
  /**
   * Forgets any copy kept of bytes `[position, position + length)` (the chunk cache's), so the
   * next read of them asks the store again: they failed validation. Local files keep none.
   */
  invalidate(position: number, length: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Opens a local `.log`. Once open, the broker unlinking it does not disturb the read.
 *
 * @param path the file
 * @param nowMs the wall-clock time before it is opened: its identity is trusted only if its last
 *   change was `SETTLE_MS` before this, so a change made while it is read shows as a new identity
 * @returns undefined when the file is gone (broker retention or eviction got there first)
 */
export async function openLocalLog(
  path: string,
  nowMs?: number,
): Promise<SegmentLog | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(path, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  let identity;
  try {
    identity = await fh.stat({ bigint: true });
  } catch (err) {
    await fh.close().catch(() => {});
    throw err;
  }
  const size = Number(identity.size);
  return {
    where: "local",
    name: path,
    size,
    trustKey: nowMs === undefined ? undefined : identityKey(identity, nowMs),
    read: (position, length) =>
      readAt(fh, position, Math.max(0, Math.min(length, size - position))),
    invalidate: () => Promise.resolve(),
    close: () => fh.close(),
  };
}

/**
 * A remote `.log` read through `ctx.reader`, waiting at most until `deadline` for each range.
 *
 * @param segment the segment's start offset, for errors
 * @param readerId the sequential reader reading it, for readahead
 * @param next the object that reader goes on to (readahead carries on into it)
 */
export function remoteLog(
  ctx: ReadContext,
  source: ChunkSource,
  segment: bigint,
  deadline: ReadDeadline,
  readerId?: string,
  next?: ChunkSource,
): SegmentLog {
  return {
    where: "remote",
    name: source.key,
    size: source.size,
    read: async (position, length) => {
      const want = Math.max(0, Math.min(length, source.size - position));
      if (want === 0) return new Uint8Array(0);
      try {
        return await within(
          ctx.reader.read(source, position, want, { readerId, next }),
          deadline,
          source.key,
        );
      } catch (err) {
        throw readFailure(err, source.key, segment);
      }
    },
    invalidate: async (position, length) => {
      await ctx.reader.invalidate?.(source, position, length);
    },
    close: () => Promise.resolve(),
  };
}

/**
 * Serves reads of a `SegmentLog` from the last range fetched, so walking record headers and then
 * taking the bytes they describe costs one fetch when the window is sized for both.
 */
export class ReadWindow {
  #bytes: Uint8Array = new Uint8Array(0);
  #start = 0;

  /**
   * @param log the segment to read
   * @param minFetch bytes fetched at least per miss
   */
  constructor(readonly log: SegmentLog, readonly minFetch: number) {}

  /** Up to `length` bytes at `position` (fewer only at the end of the log). */
  async read(position: number, length: number): Promise<Uint8Array> {
    const want = Math.max(0, Math.min(length, this.log.size - position));
    const held = this.peek(position, want);
    if (held) return held;
    await this.#fill(position, Math.max(want, this.minFetch));
    return this.#bytes.subarray(0, want);
  }

  /** Exactly `[position, position + length)` if the window holds it now, without fetching. */
  peek(position: number, length: number): Uint8Array<ArrayBuffer> | undefined {
    const from = position - this.#start;
    if (from < 0 || from + length > this.#bytes.length) return undefined;
    return this.#bytes.subarray(from, from + length) as Uint8Array<ArrayBuffer>;
  }

  /** The range of the log the window holds now. */
  get held(): { position: number; length: number } {
    return { position: this.#start, length: this.#bytes.length };
  }

  /** Makes the window hold [position, position + length) (clamped to the log), fetching if needed. */
  async ensure(position: number, length: number): Promise<void> {
    const want = Math.max(0, Math.min(length, this.log.size - position));
    if (this.peek(position, want)) return;
    await this.#fill(position, want);
  }

  async #fill(position: number, length: number): Promise<void> {
    this.#bytes = await this.log.read(position, length);
    this.#start = position;
  }
}
