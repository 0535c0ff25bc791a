// The second pass of a read: the walk (read_records.ts) planned which bytes of which segments
// make the answer, cut at record boundaries about every `PIECE_WINDOW` bytes; this reads them one
// window at a time, validates each window's records and hands it on. A read then holds one
// window (plus at most one record larger than it), not its whole answer, however slow the
// client. Validation happens before a window is handed on, so no failed byte reaches a client:
// bytes from the store that fail are dropped from the cache and fetched once more; a sealed
// local segment that fails is read from its verified copy, which holds the same bytes at the
// same positions. Only a second failure ends the answer (the HTTP layer then cuts the
// connection, so a client never takes a short body for a whole one).
import type { PositionedChunkSource } from "../cache/types.ts";
import type { SegmentCodec } from "../format/codec.ts";
import { FormatError } from "../format/errors.ts";
import type { CatalogSegment } from "./catalog.ts";
import type { ReadContext } from "./context.ts";
import { SegmentCorrupt } from "./errors.ts";
import { deadlineIn } from "./_fetch.ts";
import { remoteLog, type SegmentLog } from "./segment_log.ts";

/** Bytes of a window the answer is read, validated and sent in (at least, but for the last). */
export const PIECE_WINDOW = 1024 * 1024;

/** A record boundary in a segment's `.log`: its byte position and the record's first offset. */
export interface Cut {
  position: number;
  offset: bigint;
}

/** The bytes one segment contributes to an answer. */
export interface AnswerPiece {
  entry: CatalogSegment;
  /** The local `.log`, open since the walk (absent: the bytes come from `remote`). */
  local?: SegmentLog;
  /** The segment's verified copy, when it has one. */
  remote?: PositionedChunkSource;
  /**
   * Record boundaries, ascending: the piece starts at the first and ends at the last, and each
   * window runs from one to the next.
   */
  cuts: Cut[];
  /** The first window's bytes, when the walk still held them (a small answer's whole piece). */
  held?: Uint8Array<ArrayBuffer>;
  /** Record checksums are verified: bytes from the store and sealed local segments. */
  verify: boolean;
}

/** Reads, validates and yields the planned windows of an answer. */
export class AnswerStream {
  readonly #ctx: ReadContext;
  readonly #codec: SegmentCodec;
  readonly #pieces: AnswerPiece[];
  readonly #sources = new Set<"local" | "remote">();
  #closed = false;

  constructor(ctx: ReadContext, codec: SegmentCodec, pieces: AnswerPiece[]) {
    this.#ctx = ctx;
    this.#codec = codec;
    this.#pieces = pieces;
  }

  /** The answer's bytes, window by window, in order. */
  async *windows(): AsyncGenerator<Uint8Array<ArrayBuffer>> {
    try {
      for (const piece of this.#pieces) {
        for (let i = 0; i + 1 < piece.cuts.length; i++) {
          const from = piece.cuts[i];
          const length = piece.cuts[i + 1].position - from.position;
          const held = i === 0 ? piece.held : undefined;
          piece.held = undefined;
          yield await this.#window(piece, from, length, held);
        }
        await closeLocal(piece);
      }
    } finally {
      await this.close();
    }
  }

  /** Where the windows yielded so far came from. */
  get sources(): ReadonlySet<"local" | "remote"> {
    return this.#sources;
  }

  /** Closes the local files still open. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const p of this.#pieces) await closeLocal(p).catch(() => {});
  }

  async #window(
    piece: AnswerPiece,
    from: Cut,
    length: number,
    held: Uint8Array<ArrayBuffer> | undefined,
  ): Promise<Uint8Array<ArrayBuffer>> {
    const log = this.#log(piece);
    const bytes = held?.length === length ? held : await read(log, from.position, length);
    const failure = this.#check(piece, log, bytes, from);
    if (!failure) {
      this.#sources.add(log.where);
      return bytes;
    }
    const segment = piece.entry.start;
    if (log.where === "remote") {
      // One corrupted transfer must not fail the read, nor stay cached.
      await log.invalidate(from.position, length);
      this.#ctx.logger.warn("bytes from the store failed validation; fetching them again", {
        key: log.name,
        segment,
        err: failure,
      });
    } else if (piece.remote) {
      this.#ctx.logger.error("local segment failed validation; reading its verified copy", {
        file: log.name,
        segment,
        err: failure,
      });
      await closeLocal(piece);
      piece.verify = true;
    } else {
      throw new SegmentCorrupt("local", log.name, failure, segment);
    }
    const again = this.#log(piece);
    const fresh = await read(again, from.position, length);
    const second = this.#check(piece, again, fresh, from);
    if (!second) {
      this.#sources.add(again.where);
      return fresh;
    }
    await again.invalidate(from.position, length);
    await this.#dropUnvalidated(piece, from.position + length);
    throw new SegmentCorrupt(again.where, again.name, second, segment);
  }

  /**
   * The answer failed: drops from the cache the remote bytes the walk fetched for it that were
   * never validated (from `after` in `failed`, and every piece after it), so a store that
   * corrupts what it sends leaves nothing of this answer cached.
   */
  async #dropUnvalidated(failed: AnswerPiece, after: number): Promise<void> {
    for (const p of this.#pieces.slice(this.#pieces.indexOf(failed))) {
      if (p.local || !p.remote) continue;
      const from = p === failed ? after : p.cuts[0].position;
      const to = p.cuts.at(-1)!.position;
      if (to > from) await this.#log(p).invalidate(from, to - from).catch(() => {});
    }
  }

  /** The local file while it is used, else the copy (a fresh deadline for each window). */
  #log(piece: AnswerPiece): SegmentLog {
    if (piece.local) return piece.local;
    return remoteLog(
      this.#ctx,
      piece.remote!,
      piece.entry.start,
      deadlineIn(this.#ctx.fetchTimeoutMs, this.#ctx.clock),
    );
  }

  /**
   * The window's validation failure, or undefined when its records are whole and sound. The
   * structure is always walked; checksums are verified but for bytes of a local file verified
   * before under the same identity (verified_logs.ts), and remembered once they pass.
   */
  #check(piece: AnswerPiece, log: SegmentLog, bytes: Uint8Array, from: Cut) {
    const trustKey = piece.verify ? log.trustKey : undefined;
    const end = from.position + bytes.length;
    const verify = piece.verify &&
      !(trustKey !== undefined && this.#ctx.verifiedLogs.covers(trustKey, from.position, end));
    try {
      const walk = this.#codec.walk(bytes, {
        file: log.name,
        startOffset: piece.entry.start,
        expectedOffset: from.offset,
        filePosition: from.position,
        verify,
      });
      for (const _ of walk) { /* each record is validated as it is yielded */ }
    } catch (err) {
      if (err instanceof FormatError) return err;
      throw err;
    }
    if (verify && trustKey !== undefined) this.#ctx.verifiedLogs.mark(trustKey, from.position, end);
    return undefined;
  }
}

/** Closes the local file the piece holds open, if any: the piece reads no more from it. */
async function closeLocal(piece: AnswerPiece): Promise<void> {
  const local = piece.local;
  piece.local = undefined;
  await local?.close();
}

/** Exactly `length` bytes at `position`, or a format error naming where the log ended. */
async function read(
  log: SegmentLog,
  position: number,
  length: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const bytes = await log.read(position, length) as Uint8Array<ArrayBuffer>;
  if (bytes.length === length) return bytes;
  throw new SegmentCorrupt(
    log.where,
    log.name,
    new FormatError(
      "straddles_eof",
      log.name,
      position + bytes.length,
      `the answer needs ${length} bytes at ${position} but the log ends after ${bytes.length}`,
    ),
  );
}
