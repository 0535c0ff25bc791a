// The per-partition journal (docs/architecture.md, "State on local disk"): an append-only file
// of checksummed records, replayed at boot. An interrupted last append (a torn tail) is cut
// off; damage anywhere else is reported, never truncated. Compaction replaces the file with a
// snapshot atomically.
import { mkdir, open, rm, stat } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { concatBytes, writeAll } from "../base/bytes.ts";
import { initHashes, xxh3_64 } from "../hash.ts";
import { decodeEvent, encodeEvent } from "./event_codec.ts";
import type { JournalEvent } from "./events.ts";
import { writeFileDurable } from "../base/durable.ts";

/** Bytes before each record body: u32 LE body length, u64 LE XXH3-64 of the body. */
export const RECORD_HEADER_SIZE = 12;
/** Largest body a record may carry; events are a few hundred bytes, so more means damage. */
export const MAX_RECORD_BODY = 1 << 20;

/** Where and why decoding stopped before the end of the bytes. */
export interface TornRecord {
  /** Byte offset of the first record that is not valid (equals `validBytes`). */
  position: number;
  /** What was wrong with it. */
  reason: string;
}

/**
 * A bad record that is not an interrupted last write: a valid record follows it, or it is
 * complete (its whole declared body is there) yet fails its checksum or does not decode.
 */
export interface DamagedRecord extends TornRecord {
  /** Where the next valid record starts, when one follows. */
  validAgainAt?: number;
}

/** The result of decoding journal bytes. */
export interface DecodedRecords {
  /** The events of the valid prefix, in order. */
  events: JournalEvent[];
  /** The byte position of each event's record. */
  positions: number[];
  /** Length of the valid prefix in bytes. */
  validBytes: number;
  /** Set when bytes follow the valid prefix and they are an interrupted last append. */
  torn?: TornRecord;
  /** Set when bytes follow the valid prefix and they are damage (see {@linkcode DamagedRecord}). */
  damaged?: DamagedRecord;
}

/** A journal that cannot be replayed: damage, not an interrupted append. Never truncated. */
export class JournalDamaged extends Error {
  override readonly name = "JournalDamaged";
  constructor(
    readonly path: string,
    /** Byte position of the first bad record. */
    readonly position: number,
    readonly reason: string,
  ) {
    super(`journal ${path} is damaged at byte ${position}: ${reason}`);
  }
}

/** Reported by {@linkcode Journal.open} when it truncates a torn tail. */
export interface TornTailInfo {
  /** The journal file. */
  path: string;
  /** Bytes kept (the position of the first bad record). */
  validBytes: number;
  /** Bytes removed from the end of the file. */
  droppedBytes: number;
  /** What was wrong with the first bad record. */
  reason: string;
}

/** A journal file's identity by content: its length and the XXH3-64 of its bytes. */
export interface JournalFingerprint {
  bytes: number;
  digest: bigint;
}

/** The fingerprint of journal bytes. `initHashes()` must have been awaited. */
export function journalFingerprint(bytes: Uint8Array): JournalFingerprint {
  return { bytes: bytes.length, digest: xxh3_64(bytes) };
}

/** Options for {@linkcode Journal.open}. */
export interface JournalOpenOptions {
  /** Called once when a torn tail was truncated, so the caller can log and count it. */
  onTornTail?: (info: TornTailInfo) => void;
}

/**
 * Frames one event as a journal record: `[u32 LE length][u64 LE xxh3-64 of body][body]`.
 * `initHashes()` must have been awaited.
 *
 * @param event The event.
 * @returns The record bytes.
 * @throws {RangeError} If a field is out of range or the body exceeds {@linkcode MAX_RECORD_BODY}.
 */
export function encodeRecord(event: JournalEvent): Uint8Array {
  const body = encodeEvent(event);
  if (body.length > MAX_RECORD_BODY) {
    throw new RangeError(`journal record body of ${body.length} bytes exceeds ${MAX_RECORD_BODY}`);
  }
  const record = new Uint8Array(RECORD_HEADER_SIZE + body.length);
  const view = new DataView(record.buffer);
  view.setUint32(0, body.length, true);
  view.setBigUint64(4, xxh3_64(body), true);
  record.set(body, RECORD_HEADER_SIZE);
  return record;
}

/**
 * Decodes records from the start of `bytes` up to the first invalid one, and says what the
 * invalid bytes are. Only an interrupted last append is a torn tail: a header or body cut short
 * at the end of the file, with no valid record anywhere after it. Anything else — a record that
 * fails its checksum or does not decode although its whole body is there, or any bad record with
 * a valid one after it — is damage, which no truncation may paper over. `initHashes()` must have
 * been awaited.
 *
 * @param bytes Journal file content.
 * @returns The events of the valid prefix, its length, and where and why decoding stopped.
 */
export function decodeRecords(bytes: Uint8Array): DecodedRecords {
  const events: JournalEvent[] = [];
  const positions: number[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  while (pos < bytes.length) {
    const r = readRecord(bytes, view, pos);
    if (!r.ok) {
      const validAgainAt = nextValidRecord(bytes, pos + 1);
      const stop = { position: pos, reason: r.reason };
      if (r.cut && validAgainAt === undefined) {
        return { events, positions, validBytes: pos, torn: stop };
      }
      return { events, positions, validBytes: pos, damaged: { ...stop, validAgainAt } };
    }
    events.push(r.event);
    positions.push(pos);
    pos = r.end;
  }
  return { events, positions, validBytes: pos };
}

type ReadResult =
  | { ok: true; event: JournalEvent; end: number }
  /** `cut`: the record runs past the end of the bytes (what an interrupted append leaves). */
  | { ok: false; reason: string; cut: boolean };

function readRecord(bytes: Uint8Array, view: DataView, pos: number): ReadResult {
  const remaining = bytes.length - pos;
  if (remaining < RECORD_HEADER_SIZE) {
    return {
      ok: false,
      reason: `short header: ${remaining} of ${RECORD_HEADER_SIZE} bytes`,
      cut: true,
    };
  }
  const length = view.getUint32(pos, true);
  if (length > MAX_RECORD_BODY) {
    return { ok: false, reason: `implausible body length ${length}`, cut: false };
  }
  if (remaining - RECORD_HEADER_SIZE < length) {
    // An interrupted append leaves a prefix of its body. Bytes that checksum as a whole body
    // are a complete record whose length field was damaged.
    const rest = bytes.subarray(pos + RECORD_HEADER_SIZE);
    const whole = rest.length > 0 && xxh3_64(rest) === view.getBigUint64(pos + 4, true);
    return {
      ok: false,
      reason: whole
        ? `length field says ${length} bytes, but the ${rest.length} that follow are a whole body`
        : `short body: ${remaining - RECORD_HEADER_SIZE} of ${length} bytes`,
      cut: !whole,
    };
  }
  const body = bytes.subarray(pos + RECORD_HEADER_SIZE, pos + RECORD_HEADER_SIZE + length);
  if (xxh3_64(body) !== view.getBigUint64(pos + 4, true)) {
    return { ok: false, reason: "checksum mismatch", cut: false };
  }
  try {
    return { ok: true, event: decodeEvent(body), end: pos + RECORD_HEADER_SIZE + length };
  } catch (err) {
    return { ok: false, reason: `undecodable body: ${(err as Error).message}`, cut: false };
  }
}

/** The first position at or after `from` where a whole valid record starts, if any. */
function nextValidRecord(bytes: Uint8Array, from: number): number | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let p = from; p + RECORD_HEADER_SIZE <= bytes.length; p++) {
    const length = bytes[p] | bytes[p + 1] << 8 | bytes[p + 2] << 16 | (bytes[p + 3] << 24 >>> 0);
    if (length > MAX_RECORD_BODY || p + RECORD_HEADER_SIZE + length > bytes.length) continue;
    if (readRecord(bytes, view, p).ok) return p;
  }
  return undefined;
}

function encodeAll(events: readonly JournalEvent[]): Uint8Array {
  return concatBytes(events.map(encodeRecord));
}

/**
 * One partition's journal file, open for appending. Appends and compactions are serialized, and
 * each resolves only once its bytes are fsynced.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mkdtemp, rm } from "node:fs/promises";
 * import { tmpdir } from "node:os";
 * import { join } from "node:path";
 * import { initHashes } from "../hash.ts";
 * import { fold } from "./segment_state.ts";
 *
 * await initHashes();
 * const dir = await mkdtemp(join(tmpdir(), "tierd-"));
 * const { journal, events } = await Journal.open(join(dir, "journal"), {
 *   onTornTail: (t) => console.warn(`journal ${t.path}: dropped ${t.droppedBytes} bytes`),
 * });
 * assert.deepEqual(events, []);
 * await journal.append({ type: "copy_started", segment: 0n, generation: 0n, at: 1 });
 * await journal.close();
 * const reopened = await Journal.open(join(dir, "journal"));
 * assert.equal(fold(reopened.events).segments.get(0n)?.get(0n)?.state, "COPY_SEGMENT_STARTED");
 * await reopened.journal.close();
 * await rm(dir, { recursive: true });
 * ```
 */
export class Journal {
  readonly #path: string;
  #fh: FileHandle;
  #size: number;
  #queue: Promise<void> = Promise.resolve();
  #broken: Error | undefined;
  #closed = false;

  private constructor(path: string, fh: FileHandle, size: number) {
    this.#path = path;
    this.#fh = fh;
    this.#size = size;
  }

  /**
   * Opens (creating it and its directories if missing) and replays a journal. A torn tail is
   * truncated on disk, fsynced and reported through `onTornTail`; damage is never truncated
   * (see {@linkcode decodeRecords}). A `.tmp` left by a compaction that crashed before its
   * rename is removed.
   *
   * @param path The journal file.
   * @param options Torn-tail reporting.
   * @returns The open journal, the events of its valid prefix in order, and the fingerprint of
   * that prefix (the file as it stands once a torn tail is cut off).
   * @throws {JournalDamaged} when the journal holds damage rather than a torn tail
   * @throws The `node:fs` error if the file cannot be created, read or truncated.
   */
  static async open(
    path: string,
    options: JournalOpenOptions = {},
  ): Promise<
    {
      journal: Journal;
      events: JournalEvent[];
      positions: number[];
      fingerprint: JournalFingerprint;
    }
  > {
    await initHashes();
    await mkdir(dirname(path), { recursive: true });
    await rm(path + ".tmp", { force: true });
    const fh = await open(path, "a+");
    try {
      const bytes = await fh.readFile();
      const decoded = decodeRecords(bytes);
      if (decoded.damaged) {
        throw new JournalDamaged(path, decoded.damaged.position, decoded.damaged.reason);
      }
      if (decoded.torn) {
        await fh.truncate(decoded.validBytes);
        await fh.sync();
        options.onTornTail?.({
          path,
          validBytes: decoded.validBytes,
          droppedBytes: bytes.length - decoded.validBytes,
          reason: decoded.torn.reason,
        });
      }
      return {
        journal: new Journal(path, fh, decoded.validBytes),
        events: decoded.events,
        positions: decoded.positions,
        fingerprint: journalFingerprint(bytes.subarray(0, decoded.validBytes)),
      };
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  /** The journal file's path. */
  get path(): string {
    return this.#path;
  }

  /** Current size of the journal file in bytes (valid records only). */
  get size(): number {
    return this.#size;
  }

  /**
   * Appends events as consecutive records in one write, then fsyncs. Concurrent calls are
   * serialized, so records never interleave. If a write fails, the file is cut back to its last
   * good length so that later records are not stranded behind a partial one.
   *
   * @param events The events, in order.
   * @returns Resolves once the records are durable.
   * @throws {RangeError} If an event is out of range (nothing is written); the `node:fs` error if
   * the write or fsync fails; an `Error` if the journal is closed or broken by an earlier failure.
   */
  append(...events: JournalEvent[]): Promise<void> {
    // Encode up front so an invalid event rejects without touching the file.
    let bytes: Uint8Array;
    try {
      bytes = encodeAll(events);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#enqueue(async () => {
      if (bytes.length === 0) return;
      try {
        await writeAll(this.#fh, bytes);
        await this.#fh.sync();
        this.#size += bytes.length;
      } catch (err) {
        try {
          await this.#fh.truncate(this.#size);
          await this.#fh.sync();
        } catch (repairErr) {
          this.#broken = new Error(
            `journal ${this.#path} unusable: append failed (${(err as Error).message}) and the ` +
              `partial record could not be cut off (${(repairErr as Error).message})`,
          );
        }
        throw err;
      }
    });
  }

  /**
   * Replaces the journal with exactly `snapshot` (temp file, fsync, rename, directory fsync);
   * later appends go to the new file. A crash at any point leaves the old or the new journal.
   *
   * @param snapshot The events the new journal holds (normally `snapshotEvents(state)`).
   * @returns Resolves once the new journal is durable and open.
   * @throws {RangeError} If an event is out of range (nothing changes); the `node:fs` error if
   * writing fails (the old journal stays in use).
   */
  compact(snapshot: JournalEvent[]): Promise<void> {
    let bytes: Uint8Array;
    try {
      bytes = encodeAll(snapshot);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#enqueue(async () => {
      try {
        await writeFileDurable(this.#path, bytes);
      } catch (err) {
        // If the rename happened (only the directory fsync failed), our handle now points at a
        // replaced file: appending there would lose records, so refuse until reopened.
        const [onDisk, ours] = await Promise.all([
          stat(this.#path).catch(() => undefined),
          this.#fh.stat(),
        ]);
        if (!onDisk || onDisk.ino !== ours.ino || onDisk.dev !== ours.dev) {
          this.#broken = new Error(
            `journal ${this.#path} unusable: compaction failed after replacing the file (${
              (err as Error).message
            }); reopen it`,
          );
        }
        throw err;
      }
      // The path now names the new file; the old handle points at the replaced inode.
      const old = this.#fh;
      try {
        this.#fh = await open(this.#path, "a");
      } catch (err) {
        this.#broken = new Error(
          `journal ${this.#path} unusable: compacted but could not reopen (${
            (err as Error).message
          })`,
        );
        throw err;
      } finally {
        await old.close().catch(() => {});
      }
      this.#size = bytes.length;
    });
  }

  /**
   * Waits for pending appends and closes the file. Later calls to `append` or `compact` reject.
   *
   * @returns Resolves once the file is closed.
   */
  close(): Promise<void> {
    if (this.#closed) return this.#queue;
    this.#closed = true;
    const closing = this.#queue.then(() => this.#fh.close());
    this.#queue = closing.catch(() => {});
    return closing;
  }

  #enqueue(task: () => Promise<void>): Promise<void> {
    if (this.#closed) return Promise.reject(new Error(`journal ${this.#path} is closed`));
    const run = this.#queue.then(() => {
      if (this.#broken) throw this.#broken;
      return task();
    });
    this.#queue = run.catch(() => {});
    return run;
  }
}
