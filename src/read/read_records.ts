// The read path (docs/architecture.md, "The read path"): finds the segment holding a start offset
// or timestamp, uses its index to find the record, and walks whole records across segment
// boundaries — remote into local — until `maxBytes`. Local bytes are preferred. Record checksums
// are verified for bytes from the store and for sealed local segments (the active segment's
// tail may be mid-write: only its structure is checked). Bytes from the store that fail are
// dropped from the cache and fetched once more before the read fails; a sealed local segment
// that fails is read from its verified copy, when there is one.
//
// A read runs in two passes, so its memory is a bounded window, not `maxBytes`: the walk reads
// record headers only and plans the answer (its offsets, record count and byte length, known
// before the first byte is sent), then `AnswerStream` (answer_stream.ts) reads the planned bytes
// window by window, validates each window and hands it on. Local files stay open between the
// passes, so broker retention unlinking one does not disturb the answer.
//
// Semantics a client relies on:
// - An offset inside an Iggy 0.9 batch returns that whole batch: `firstOffset` is the batch's
//   base offset, which may be below the offset asked for. Iggy 0.8 records are single messages.
// - A timestamp read starts at the first record whose server timestamp is at or after it.
// - At least one whole record is returned, even one larger than `maxBytes`; after that a record
//   is added only while the total stays within `maxBytes`.
// - An answer never spans a hole: a read that reaches a `lost_before_upload` gap, a hole in the
//   bucket (HOLE), or an unrecorded hole between segments stops before it. A read that starts
//   inside one answers from the first offset after it, with `gap` set to the missing range; when
//   nothing follows, it fails with `OffsetInGap`, never "past the end".
import { readSegmentBounds } from "../format/bounds.ts";
import type { SegmentCodec } from "../format/codec.ts";
import { codecFor } from "../format/codecs.ts";
import { FormatError } from "../format/errors.ts";
import type { FormatName, RecordInfo } from "../format/types.ts";
import { hex128, initHashes } from "../hash.ts";
import type { PartitionId } from "../layout/partition.ts";
import { getSegment } from "../state/segment_state.ts";
import { markerPaths, partitionStateDir } from "../layout/state_paths.ts";
import type { PositionedChunkSource } from "../cache/types.ts";
import {
  type Catalog,
  type CatalogEntry,
  catalogFormat,
  type CatalogSegment,
  loadCatalog,
} from "./catalog.ts";
import type { ReadContext } from "./context.ts";
import {
  OffsetBelowRetention,
  OffsetInGap,
  OffsetPastEnd,
  ReadError,
  RemoteObjectMissing,
  SegmentCorrupt,
  StoreUnavailable,
} from "./errors.ts";
import { confirmMissing, deadlineIn, type ReadDeadline, readFailure, within } from "./_fetch.ts";
import { openLocalLog, ReadWindow, remoteLog, type SegmentLog } from "./segment_log.ts";
import { type AnswerPiece, AnswerStream, type Cut, PIECE_WINDOW } from "./answer_stream.ts";
import {
  EMPTY_INDEX,
  parseSegmentIndex,
  readIndexFile,
  seekOffset,
  seekTimestamp,
  type SegmentIndex,
} from "./segment_index.ts";

/** What to read. Exactly one of `offset` and `timestamp` is set. */
export interface ReadRequest {
  partition: PartitionId;
  /** Start at the record holding this offset. */
  offset?: bigint;
  /** Start at the first record with a server timestamp (µs) at or after this. */
  timestamp?: bigint;
  /** Byte budget of the answer (at least one whole record is always returned). */
  maxBytes: number;
  /** Stops the walk between steps. Fetches already issued complete, so the cache keeps them. */
  signal?: AbortSignal;
  /** Identifies a sequential reader to the chunk cache (readahead). */
  readerId?: string;
}

/** Where the returned bytes came from. */
export type ReadSource = "local" | "remote" | "mixed";

/** A read's answer: whole records, byte for byte as the segments hold them. */
export interface ReadResult {
  bytes: Uint8Array<ArrayBuffer>;
  /** First offset of the first returned record (a 0.9 batch's base offset). */
  firstOffset: bigint;
  /** The offset after the last returned record: where the next read starts. */
  nextOffset: bigint;
  source: ReadSource;
  /** Offsets the answer had to skip because they are gone (inclusive range). */
  gap?: { from: bigint; to: bigint };
  format: FormatName;
  /** Number of records (0.8 messages or 0.9 batches) in `bytes`. */
  records: number;
}

/** What the walk plans: the answer's facts and the pieces its bytes come from. */
interface ReadPlan extends Omit<ReadAnswer, "windows" | "close" | "sourceSoFar"> {
  pieces: AnswerPiece[];
  codec: SegmentCodec;
}

/** Bytes fetched at least per window miss while walking record headers. */
const LOCAL_WINDOW = 256 * 1024;
const REMOTE_WINDOW = 64 * 1024;

/** A read's answer before its bytes are read: what a client is told first, then the bytes. */
export interface ReadAnswer extends Omit<ReadResult, "bytes"> {
  /** Bytes the answer holds (its `content-length`). */
  byteLength: number;
  /**
   * The answer's bytes, window by window, each validated before it is yielded (at most about
   * `PIECE_WINDOW` bytes, or one larger record). Ends the read — its files closed, its outcome
   * counted — when it finishes, fails or is returned from early.
   * @throws {SegmentCorrupt} bytes failed validation twice (the answer cannot be completed)
   * @throws {StoreUnavailable} / {FetchTimeout} / {RemoteObjectMissing} as {@link readRecords}
   */
  windows(): AsyncGenerator<Uint8Array<ArrayBuffer>>;
  /** Ends the read without taking its bytes (closes the files it holds open). */
  close(): Promise<void>;
  /**
   * Where the bytes yielded so far came from. It differs from `source`, told before the bytes,
   * only when a sealed local segment failed validation and was read from its verified copy.
   */
  sourceSoFar(): ReadSource;
}

/**
 * Plans a read: finds its records, walking their headers, and answers what it will send. The
 * bytes follow from `windows()`, so a read holds a bounded window, not `maxBytes`.
 *
 * @throws as {@link readRecords}, for what the walk finds before the first byte
 */
export async function openRead(ctx: ReadContext, req: ReadRequest): Promise<ReadAnswer> {
  if ((req.offset === undefined) === (req.timestamp === undefined)) {
    throw new RangeError("a read needs exactly one of offset and timestamp");
  }
  if (!Number.isSafeInteger(req.maxBytes) || req.maxBytes < 1) {
    throw new RangeError(`maxBytes must be a positive integer, got ${req.maxBytes}`);
  }
  await initHashes();
  const deadline = deadlineIn(ctx.fetchTimeoutMs, ctx.clock);
  let plan: ReadPlan;
  let replanned = false;
  let refetched = false;
  /** A NotFound the store took back (HEAD or listing found the object): read once more. */
  let reread = false;
  /** Sealed local segments whose bytes failed validation: read from their copies instead. */
  const avoidLocal = new Set<bigint>();
  try {
    for (;;) {
      const catalog = await loadCatalog(ctx, req.partition);
      try {
        plan = await new RecordWalk(ctx, catalog, req, deadline, avoidLocal).run();
        break;
      } catch (err) {
        // Retention may have deleted the segment after the catalog was built: plan again.
        if (
          !replanned && err instanceof RemoteObjectMissing && await retired(ctx, catalog, err)
        ) {
          replanned = true;
          continue;
        }
        if (err instanceof RemoteObjectMissing) {
          // Data loss is said only when it is certain: the object is asked about again.
          const verdict = await confirmMissing(ctx.store, err, deadline);
          if (verdict === "present" && !reread) {
            reread = true;
            ctx.logger.warn("the store answered NotFound for an object it still has; read again", {
              key: err.key,
            });
            continue;
          }
          throw verdict === "present"
            ? new StoreUnavailable(
              err.key,
              1,
              new Error("the store answered NotFound twice for an object it lists"),
            )
            : verdict;
        }
        if (err instanceof SegmentCorrupt && err.where === "remote" && !refetched) {
          // One corrupted transfer must not fail the read, nor stay cached: the bad bytes were
          // dropped from the cache; a second failure, from a fresh GET, is the answer.
          refetched = true;
          ctx.logger.warn("bytes from the store failed validation; fetching them again", {
            key: err.file,
            segment: err.segment,
            err,
          });
          continue;
        }
        if (err instanceof SegmentCorrupt && err.where === "local" && hasCopy(catalog, err)) {
          avoidLocal.add(err.segment!);
          ctx.logger.error("local segment failed validation; reading its verified copy", {
            file: err.file,
            segment: err.segment,
            err,
          });
          continue;
        }
        throw err;
      }
    }
  } catch (err) {
    countFailure(ctx, err);
    throw err;
  }
  const { pieces, codec, ...answer } = plan;
  const stream = new AnswerStream(ctx, codec, pieces);
  const source = () => sourceOf(stream.sources) ?? answer.source;
  let counted = false;
  /** Counts the read once, by how it ended. */
  const ended = (outcome: string) => {
    if (counted) return;
    counted = true;
    ctx.metrics?.reads.inc({ source: source(), outcome });
  };
  return {
    ...answer,
    async *windows() {
      let handed = 0;
      try {
        for await (const w of stream.windows()) {
          handed += w.length;
          yield w;
        }
        ended(answer.gap ? "gap" : "ok");
      } catch (err) {
        let failure = err;
        if (err instanceof RemoteObjectMissing) {
          // Cut off mid-answer either way; counted as data loss only once it is certain.
          const verdict = await confirmMissing(
            ctx.store,
            err,
            deadlineIn(ctx.fetchTimeoutMs, ctx.clock),
          );
          failure = verdict === "present"
            ? new StoreUnavailable(err.key, 1, new Error("NotFound for an object the store lists"))
            : verdict;
        }
        if (!counted) countFailure(ctx, failure);
        counted = true;
        throw failure;
      } finally {
        if (handed > 0) ctx.metrics?.readBytes.inc({ source: source() }, handed);
      }
    },
    close: async () => {
      ended("cancelled"); // the client went away before the whole answer
      await stream.close();
    },
    sourceSoFar: source,
  };
}

function sourceOf(sources: ReadonlySet<"local" | "remote">): ReadSource | undefined {
  if (sources.size === 0) return undefined;
  return sources.size > 1 ? "mixed" : [...sources][0];
}

/**
 * Reads whole records of a partition into memory (see {@link openRead} to stream them).
 *
 * @throws {UnknownPartition} the partition is not a tiered partition tierd knows
 * @throws {OffsetBelowRetention} the offset is below the first one still available
 * @throws {OffsetPastEnd} nothing at or after the start (yet)
 * @throws {RemoteObjectMissing} a copied object is gone from the store (data loss; also counted
 *   in `tierd_remote_objects_missing_total`)
 * @throws {SegmentCorrupt} bytes failed validation (checksums, for bytes from the store)
 * @throws {StoreUnavailable} / {FetchTimeout} / {CacheFull} the store is down, throttling or
 *   slow, or the chunk cache is full: retry later
 * @throws {RangeError} for a request without exactly one start or with a bad `maxBytes`
 * @example
 * ```ts ignore
 * const ctx = createReadContext({ config, store, prefix: "iggy" });
 * const partition = { stream: 1, topic: 1, partition: 0 };
 * const r = await readRecords(ctx, { partition, offset: 0n, maxBytes: 1 << 20 });
 * ```
 */
export async function readRecords(ctx: ReadContext, req: ReadRequest): Promise<ReadResult> {
  const { windows, close: _close, sourceSoFar, byteLength, ...answer } = await openRead(ctx, req);
  const bytes = new Uint8Array(byteLength);
  let at = 0;
  for await (const w of windows()) {
    bytes.set(w, at);
    at += w.length;
  }
  return { ...answer, source: sourceSoFar(), bytes };
}

/** True when the journal no longer lists the missing object's segment as a verified copy. */
async function retired(ctx: ReadContext, catalog: Catalog, err: RemoteObjectMissing) {
  const before = catalog.state;
  if (!before || err.segment === undefined) return false;
  const now = await ctx.states.state(catalog.id);
  if (!now || now.incarnation !== before.incarnation || now.generation !== before.generation) {
    return true;
  }
  return getSegment(now, now.generation, err.segment)?.state !== "COPY_SEGMENT_FINISHED";
}

/** True when the segment whose local bytes failed has a verified copy not yet tried. */
function hasCopy(catalog: Catalog, err: SegmentCorrupt): boolean {
  const e = catalog.entries.find((e) => e.kind === "segment" && e.start === err.segment);
  return e?.kind === "segment" && e.remote !== undefined && e.local?.logPath === err.file;
}

function countFailure(ctx: ReadContext, err: unknown): void {
  const outcome = err instanceof ReadError ? err.code : "error";
  ctx.metrics?.reads.inc({ source: "none", outcome });
  if (err instanceof RemoteObjectMissing) {
    ctx.metrics?.remoteObjectsMissing.inc();
    ctx.logger.error("remote object missing: data loss", {
      key: err.key,
      segment: err.segment,
    });
  } else if (err instanceof SegmentCorrupt) {
    ctx.logger.error("segment bytes failed validation", { where: err.where, file: err.file, err });
  }
}

/** One read's walk over a catalog. */
class RecordWalk {
  readonly #ctx: ReadContext;
  readonly #catalog: Catalog;
  readonly #req: ReadRequest;
  readonly #deadline: ReadDeadline;
  readonly #avoidLocal: ReadonlySet<bigint>;
  #codec!: SegmentCodec;
  /** The offset the answer must start at (moved past a gap the read started in). */
  #target: bigint;
  readonly #pieces: AnswerPiece[] = [];
  #taken = 0;
  #records = 0;
  #first?: bigint;
  #next?: bigint;
  #gap?: { from: bigint; to: bigint };
  /** What the gap is, when the read started in one. */
  #gapWhy?: string;
  readonly #sources = new Set<"local" | "remote">();
  /** The offset after the last segment scanned without a start, for "past the end" answers. */
  #scannedTo?: bigint;

  /** @param avoidLocal segments to read from their copies even while local files exist */
  constructor(
    ctx: ReadContext,
    catalog: Catalog,
    req: ReadRequest,
    deadline: ReadDeadline,
    avoidLocal: ReadonlySet<bigint> = new Set(),
  ) {
    this.#ctx = ctx;
    this.#catalog = catalog;
    this.#req = req;
    this.#deadline = deadline;
    this.#avoidLocal = avoidLocal;
    this.#target = req.offset ?? 0n;
  }

  get #byOffset(): boolean {
    return this.#req.offset !== undefined;
  }

  get #startText(): string {
    return this.#byOffset ? `offset ${this.#req.offset}` : `timestamp ${this.#req.timestamp}`;
  }

  /** Plans the answer; on failure, the files it opened are closed. */
  async run(): Promise<ReadPlan> {
    try {
      return await this.#plan();
    } catch (err) {
      for (const p of this.#pieces) await p.local?.close().catch(() => {});
      throw err;
    }
  }

  async #plan(): Promise<ReadPlan> {
    const { entries, label } = this.#catalog;
    const format = await catalogFormat(this.#ctx, this.#catalog, this.#deadline);
    if (!format || entries.length === 0) throw new OffsetPastEnd(label, this.#startText);
    this.#codec = codecFor(format);
    let i = this.#byOffset ? this.#entryOfOffset() : await this.#entryOfTimestamp();
    for (; i < entries.length; i++) {
      this.#req.signal?.throwIfAborted();
      const e = entries[i];
      if (e.kind === "gap") {
        if (this.#first !== undefined) break; // never span a gap; the next read reports it
        this.#gap ??= { from: e.start, to: e.end };
        this.#gapWhy ??= e.why;
        continue;
      }
      if (this.#next !== undefined && e.start !== this.#next) break; // an unrecorded hole
      if (await this.#segment(e, entries[i - 1], entries[i + 1])) break;
    }
    if (this.#first === undefined || this.#next === undefined) {
      // Offsets that existed but cannot be read, and nothing after them: a gap, not the end.
      if (this.#byOffset && this.#gap && this.#gapWhy !== undefined) {
        throw new OffsetInGap(label, this.#req.offset!, this.#gap, this.#gapWhy);
      }
      throw new OffsetPastEnd(label, this.#startText, this.#scannedTo);
    }
    return {
      pieces: this.#pieces,
      codec: this.#codec,
      byteLength: this.#taken,
      firstOffset: this.#first,
      nextOffset: this.#next,
      source: sourceOf(this.#sources)!,
      ...(this.#gap && { gap: this.#gap }),
      format,
      records: this.#records,
    };
  }

  /** The entry holding the start offset; a start inside a gap moves past it. */
  #entryOfOffset(): number {
    const { entries, label } = this.#catalog;
    const offset = this.#target;
    if (offset < entries[0].start) {
      throw new OffsetBelowRetention(label, offset, entries[0].start);
    }
    // The last entry starting at or before the offset (a partition may have thousands).
    let lo = 0;
    let hi = entries.length;
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (entries[mid].start <= offset) lo = mid;
      else hi = mid;
    }
    const i = lo;
    const e = entries[i];
    if (e.kind === "gap") {
      if (offset <= e.end) {
        this.#gap = { from: e.start, to: e.end };
        this.#gapWhy = e.why;
        this.#target = e.end + 1n;
      }
      return i + 1;
    }
    return i;
  }

  /**
   * A segment at or before the first one whose max timestamp reaches the start timestamp, or
   * `entries.length`. Binary search (server timestamps do not decrease along a partition); a
   * segment whose max is unknown counts as reaching it, which can only make the walk start
   * earlier — it seeks forward across segments to the first record at or after the timestamp.
   */
  async #entryOfTimestamp(): Promise<number> {
    const { entries } = this.#catalog;
    const segments = entries.flatMap((e, i) => (e.kind === "segment" ? [i] : []));
    let lo = 0;
    let hi = segments.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const max = await this.#maxTimestamp(entries[segments[mid]] as CatalogSegment);
      if (max === undefined || max >= this.#req.timestamp!) hi = mid;
      else lo = mid + 1;
    }
    return lo < segments.length ? segments[lo] : entries.length;
  }

  /**
   * A segment's max timestamp: recorded for a remote copy, read from the index for a local
   * segment; undefined when there is none to compare (empty, vanished, or its tail is torn).
   */
  async #maxTimestamp(e: CatalogSegment): Promise<bigint | undefined> {
    if (e.remote) return e.remote.meta.maxTimestamp;
    const local = e.local!;
    try {
      const b = await readSegmentBounds(local.logPath, local.indexPath, this.#codec.name, e.start);
      return b.messageCount === 0n ? undefined : b.maxTimestamp;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT" || err instanceof FormatError) {
        return undefined;
      }
      throw err;
    }
  }

  /** Reads what the answer needs from one segment; true when the answer is complete. */
  async #segment(
    e: CatalogSegment,
    prev: CatalogEntry | undefined,
    next: CatalogEntry | undefined,
  ): Promise<boolean> {
    const log = await this.#open(e, next);
    if (!log) return false; // gone locally and never copied: the hole check stops a spanning read
    try {
      return await this.#walk(e, log, prev);
    } finally {
      // A local file the answer takes bytes from stays open until they are sent.
      if (this.#pieces.at(-1)?.local !== log) await log.close();
    }
  }

  /**
   * Local bytes when the file is still there (and trusted), else the remote copy — read ahead
   * into `next` when that is remote too.
   */
  async #open(e: CatalogSegment, next?: CatalogEntry): Promise<SegmentLog | undefined> {
    if (e.local && !this.#avoidLocal.has(e.start)) {
      const log = await openLocalLog(e.local.logPath, this.#ctx.clock.now());
      if (log) return log;
      this.#ctx.logger.debug("local segment vanished during a read", {
        partition: this.#catalog.label,
        segment: e.start,
        remote: e.remote !== undefined,
      });
    }
    if (!e.remote) return undefined;
    const ahead = next?.kind === "segment" && next.remote && !next.local
      ? this.#source(next)
      : undefined;
    return remoteLog(
      this.#ctx,
      this.#source(e),
      e.start,
      this.#deadline,
      this.#req.readerId,
      ahead,
    );
  }

  #source(e: CatalogSegment): PositionedChunkSource {
    const { keys, meta, position } = e.remote!;
    return {
      key: keys.log,
      checksum: hex128(meta.checksum),
      size: meta.size,
      recordStarts: async () => (await this.#remoteIndex(e)).recordStarts(),
      position,
    };
  }

  /** Walks `log` from the start record (or its beginning) and takes records within budget. */
  async #walk(e: CatalogSegment, log: SegmentLog, prev: CatalogEntry | undefined) {
    const seeking = this.#first === undefined;
    let { position: pos, offset: expected } = seeking
      ? await this.#seek(e, log)
      : { position: 0, offset: e.start };
    // Remote: one cache read per window for everything that can fit and the header after it
    // (which tells whether the next record fits), so a small cold read is answered from the
    // cache's exact-range first fetch and a scan looks sequential to readahead.
    const firstWindow = Math.min(PIECE_WINDOW, this.#req.maxBytes - this.#taken) +
      this.#codec.headerSize;
    const window = new ReadWindow(
      log,
      log.where === "local"
        ? LOCAL_WINDOW
        : Math.max(REMOTE_WINDOW, Math.min(firstWindow, log.size - pos)),
    );
    let from: number | undefined;
    const cuts: Cut[] = [];
    let done = false;
    while (pos < log.size) {
      const info = await this.#header(window, e, log, pos, expected);
      if (!info) break; // the active segment's tail is still being written
      if (from === undefined && seeking && !this.#isStart(info)) {
        pos += info.size;
        expected = info.lastOffset + 1n;
        continue;
      }
      if (this.#taken > 0 && this.#taken + info.size > this.#req.maxBytes) {
        done = true;
        break;
      }
      if (from === undefined) {
        from = pos;
        cuts.push({ position: pos, offset: info.firstOffset });
        if (seeking) this.#found(info, prev);
        // One fetch for the headers and the bytes of the first window.
        await window.ensure(pos, firstWindow);
      }
      this.#taken += info.size;
      this.#records++;
      this.#next = info.lastOffset + 1n;
      pos += info.size;
      expected = this.#next;
      if (pos - cuts.at(-1)!.position >= PIECE_WINDOW) {
        cuts.push({ position: pos, offset: expected });
      }
      if (this.#taken >= this.#req.maxBytes) {
        done = true;
        break;
      }
    }
    if (from === undefined) this.#scannedTo = expected; // nothing here: the next offset, so far
    else {
      if (cuts.at(-1)!.position !== pos) cuts.push({ position: pos, offset: expected });
      this.#pieces.push({
        entry: e,
        local: log.where === "local" ? log : undefined,
        remote: e.remote && this.#source(e),
        cuts,
        held: window.peek(from, cuts[1].position - from),
        verify: log.where === "remote" || e.local?.sealed === true,
      });
      this.#sources.add(log.where);
    }
    return done;
  }

  #isStart(info: RecordInfo): boolean {
    return this.#byOffset
      ? info.lastOffset >= this.#target
      : info.timestamp >= this.#req.timestamp!;
  }

  /** The answer's first record was found: note its offset, and any hole before it. */
  #found(info: RecordInfo, prev: CatalogEntry | undefined): void {
    this.#first = info.firstOffset;
    if (this.#gap) return;
    if (this.#byOffset && info.firstOffset > this.#target) {
      this.#gap = { from: this.#target, to: info.firstOffset - 1n };
    } else if (
      !this.#byOffset && prev?.kind === "gap" && info.firstOffset === prev.end + 1n
    ) {
      // Records at or after the timestamp may have been in the lost segment.
      this.#gap = { from: prev.start, to: prev.end };
    }
  }

  /** Where to start walking for the start offset or timestamp, from the segment's index. */
  async #seek(e: CatalogSegment, log: SegmentLog) {
    const index = log.where === "remote" ? await this.#remoteIndex(e) : await this.#localIndex(
      e,
      log,
    );
    return this.#byOffset
      ? seekOffset(index, e.start, this.#target)
      : seekTimestamp(index, e.start, this.#req.timestamp!);
  }

  /** The remote `.index`, through the index LRU, waiting at most until the deadline. */
  async #remoteIndex(e: CatalogSegment): Promise<SegmentIndex> {
    const { keys, meta } = e.remote!;
    if (meta.indexSize === 0) return EMPTY_INDEX;
    const codec = this.#codec;
    const load = async () => {
      // Eviction keeps a copy of the index beside the marker: no GET on a cold read's path.
      // It is only a seek hint (remote records are checksummed as they are walked); a copy
      // that is missing, of the wrong size or unparsable means asking the store.
      const kept = markerPaths(
        partitionStateDir(this.#ctx.config.agent.state_dir, this.#req.partition),
        e.start,
      ).index;
      const local = await readIndexFile(kept, meta.indexSize);
      if (local && local.length === meta.indexSize) {
        try {
          return parseSegmentIndex(codec, local, {
            file: kept,
            startOffset: e.start,
            logSize: meta.size,
          });
        } catch { /* fall through to the store's copy */ }
      }
      const { bytes } = await this.#ctx.store.get(keys.index);
      return parseSegmentIndex(codec, bytes, {
        file: keys.index,
        startOffset: e.start,
        logSize: meta.size,
      });
    };
    try {
      return await within(
        this.#ctx.indexes.get(`remote:${keys.index}:${hex128(meta.checksum)}`, load),
        this.#deadline,
        keys.index,
      );
    } catch (err) {
      throw readFailure(err, keys.index, e.start);
    }
  }

  /**
   * The local `.index`. It is only a hint: a missing or unusable one (the active segment's index
   * may trail or lead its log) means walking from the start of the log.
   */
  async #localIndex(e: CatalogSegment, log: SegmentLog): Promise<SegmentIndex> {
    // Its size and time as the catalog took them for this read (the active segment's are taken
    // again on every read): stating it once more would be the same system call twice.
    const { indexPath: path, indexSize, mtimeMs } = e.local!;
    if (indexSize < this.#codec.indexEntrySize) return EMPTY_INDEX; // -1: there is none
    const codec = this.#codec;
    const load = async () => {
      const raw = await readIndexFile(path, indexSize) ?? new Uint8Array(0);
      const whole = raw.subarray(0, raw.length - (raw.length % codec.indexEntrySize));
      try {
        return parseSegmentIndex(codec, whole, {
          file: path,
          startOffset: e.start,
          logSize: log.size,
        });
      } catch (err) {
        if (!(err instanceof FormatError)) throw err;
        this.#ctx.logger.debug("local index unusable; walking the log", { file: path, err });
        return EMPTY_INDEX;
      }
    };
    return await this.#ctx.indexes.get(`local:${path}:${indexSize}:${mtimeMs}:${log.size}`, load);
  }

  /** The record header at `pos`, validated; undefined at the active segment's torn tail. */
  async #header(
    window: ReadWindow,
    e: CatalogSegment,
    log: SegmentLog,
    pos: number,
    expected: bigint,
  ): Promise<RecordInfo | undefined> {
    const codec = this.#codec;
    const tornTailIsEnd = log.where === "local" && e.active;
    const available = log.size - pos;
    const header = await window.read(pos, codec.headerSize);
    try {
      if (header.length < codec.headerSize) {
        if (tornTailIsEnd) return undefined;
        throw new FormatError(
          "straddles_eof",
          log.name,
          pos,
          `record header needs ${codec.headerSize} bytes but the log ends after ${header.length}`,
        );
      }
      const info = codec.recordHeader(header, { file: log.name, position: pos });
      if (info.size > available) {
        if (tornTailIsEnd) return undefined;
        throw new FormatError(
          "straddles_eof",
          log.name,
          pos,
          `record needs ${info.size} bytes but the log ends after ${available}`,
        );
      }
      if (info.firstOffset !== expected) {
        throw new FormatError(
          "offset_gap",
          log.name,
          pos,
          `record starts at offset ${info.firstOffset}, expected ${expected}`,
        );
      }
      return info;
    } catch (err) {
      if (err instanceof FormatError) throw await this.#corrupt(e, log, window, err);
      throw err;
    }
  }

  /** A validation failure as a read error; bytes from the store are dropped from the cache. */
  async #corrupt(
    e: CatalogSegment,
    log: SegmentLog,
    window: ReadWindow,
    err: FormatError,
  ): Promise<SegmentCorrupt> {
    if (log.where === "remote") {
      const { position, length } = window.held;
      await log.invalidate(position, length);
    }
    return new SegmentCorrupt(log.where, log.name, err, e.start);
  }
}
