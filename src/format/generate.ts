// Writes byte-exact Iggy 0.8 or 0.9 partitions with deterministic pseudo-random messages
// (`tierd gen`): for demos, tests and benchmarks. Streams to disk; never holds a whole segment.
import { type FileHandle, mkdir, open, stat } from "node:fs/promises";
import { join } from "node:path";
import { writeAll } from "../base/bytes.ts";
import { namesIn } from "../base/dir.ts";
import { seededUint32 } from "../base/rng.ts";
import { initHashes } from "../hash.ts";
import {
  parseSegmentFileName,
  type PartitionId,
  partitionRelPath,
  segmentStem,
} from "../layout/partition.ts";
import { MAX_PAYLOAD_SIZE } from "./_bytes.ts";
import { readSegmentBounds } from "./bounds.ts";
import type { SegmentCodec } from "./codec.ts";
import { codecFor } from "./codecs.ts";
import type { FormatName, Message, SegmentBounds } from "./types.ts";

/** Options for {@link generatePartition}. */
export interface GenerateOptions {
  format: FormatName;
  /** The broker's data directory (`system.path`); segments go under `streams/…/partitions/{p}`. */
  dataDir: string;
  stream: number;
  topic: number;
  /** Partition id; also stamped into 0.9 batch headers. */
  partition: number;
  /** How many messages to write. */
  messages: number;
  /** A segment is sealed once it reaches this many bytes (it may overshoot by one record). */
  segmentSize: number;
  /** Payload bytes per message. @default 256 */
  payloadSize?: number;
  /** Seed of the pseudo-random payloads, ids and timestamp steps. @default 1 */
  seed?: number;
  /** Offset of the first message (and the first segment's name). @default 0n */
  startOffset?: bigint;
  /** Server timestamp of the first message, µs. @default 1_750_000_000_000_000n */
  startTimestampUs?: bigint;
  /** Messages per 0.9 batch (the last batch may be smaller); ignored for 0.8. @default 8 */
  messagesPerBatch?: number;
  /** Called as each segment's files are closed (sealed ones first, the active one last). */
  onSegment?: (s: GeneratedSegment) => void;
}

/** Options for {@link appendMessages}: as for a new partition, minus where it starts. */
export type AppendOptions = Omit<GenerateOptions, "startOffset">;

/** A segment written by the generator, with the bounds the broker will derive for it. */
export interface GeneratedSegment extends SegmentBounds {
  logPath: string;
  indexPath: string;
}

const DEFAULT_START_TIMESTAMP_US = 1_750_000_000_000_000n;
/** Bytes buffered per file before a write. */
const WRITE_CHUNK = 4 << 20;

/** The partition directory the broker uses for these ids. */
export function partitionDir(dataDir: string, ids: PartitionId): string {
  return join(dataDir, partitionRelPath(ids));
}

/** A segment's `.log` and `.index` paths in a partition directory. */
export function segmentPaths(dir: string, startOffset: bigint): { log: string; index: string } {
  const stem = join(dir, segmentStem(startOffset));
  return { log: `${stem}.log`, index: `${stem}.index` };
}

/**
 * Writes a partition's segments from scratch, rotating the way the broker does: a segment is
 * sealed once it reaches `segmentSize` (overshooting by at most one record) and the next one
 * starts at its end offset + 1 — created at once, so the last segment is the active one and may
 * be empty. Deterministic for a given seed. Files are fsynced.
 *
 * @returns every segment written, oldest first (the last is the active one)
 * @throws {Error} when a segment file already exists and is not empty (it never overwrites data)
 * @throws {RangeError} for invalid options
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mkdtemp, rm } from "node:fs/promises";
 * import { tmpdir } from "node:os";
 * import { join } from "node:path";
 *
 * const dataDir = await mkdtemp(join(tmpdir(), "iggy-"));
 * const segments = await generatePartition({
 *   format: "iggy-0.9",
 *   dataDir,
 *   stream: 0,
 *   topic: 0,
 *   partition: 0,
 *   messages: 1_000,
 *   segmentSize: 64 * 1024,
 * });
 * assert.ok(segments.length > 1);
 * assert.equal(segments[0].startOffset, 0n);
 * await rm(dataDir, { recursive: true });
 * ```
 */
export async function generatePartition(o: GenerateOptions): Promise<GeneratedSegment[]> {
  checkOptions(o);
  await initHashes();
  const codec = codecFor(o.format);
  const dir = partitionDir(o.dataDir, o);
  await mkdir(dir, { recursive: true });
  const start = o.startOffset ?? 0n;
  if (start < 0n) throw new RangeError(`startOffset ${start} is negative`);
  const source = new MessageSource(o, start, undefined);
  const writer = await SegmentWriter.create(dir, codec, start);
  return await writeMessages(o, codec, dir, writer, source);
}

/**
 * Appends messages to an existing partition written in `o.format`: continues the active (last)
 * segment after its last message and rotates as {@link generatePartition} does. Starts a new
 * partition when the directory holds no segment.
 *
 * @returns the segments written to: the previously active one, then any new ones
 * @throws {FormatError} when the active segment's files do not validate
 */
export async function appendMessages(o: AppendOptions): Promise<GeneratedSegment[]> {
  checkOptions(o);
  await initHashes();
  const codec = codecFor(o.format);
  const dir = partitionDir(o.dataDir, o);
  const starts = await segmentStarts(dir);
  if (starts.length === 0) return await generatePartition(o);
  const active = starts[starts.length - 1];
  const paths = segmentPaths(dir, active);
  const bounds = await readSegmentBounds(paths.log, paths.index, o.format, active);
  if (o.format === "iggy-0.8" && BigInt(bounds.indexSize) !== bounds.messageCount * 16n) {
    throw new Error(`${paths.index} does not index every message of ${paths.log}`);
  }
  let lastTimestamp = bounds.messageCount > 0n ? bounds.endTimestamp : undefined;
  for (let i = starts.length - 2; lastTimestamp === undefined && i >= 0; i--) {
    const p = segmentPaths(dir, starts[i]);
    const b = await readSegmentBounds(p.log, p.index, o.format, starts[i]);
    if (b.messageCount > 0n) lastTimestamp = b.endTimestamp;
  }
  const source = new MessageSource(o, bounds.endOffset + 1n, lastTimestamp);
  const writer = await SegmentWriter.resume(dir, codec, bounds);
  return await writeMessages(o, codec, dir, writer, source);
}

async function writeMessages(
  o: AppendOptions,
  codec: SegmentCodec,
  dir: string,
  first: SegmentWriter,
  source: MessageSource,
): Promise<GeneratedSegment[]> {
  const segments: GeneratedSegment[] = [];
  const perRecord = codec.name === "iggy-0.8" ? 1 : (o.messagesPerBatch ?? 8);
  let writer = first;
  const seal = async () => {
    const done = await writer.close();
    segments.push(done);
    o.onSegment?.(done);
    writer = await SegmentWriter.create(dir, codec, source.nextOffset);
  };
  try {
    if (writer.size > 0 && writer.size >= o.segmentSize) await seal();
    let remaining = o.messages;
    while (remaining > 0) {
      const n = Math.min(perRecord, remaining);
      const timestamp = source.nextTimestamp();
      const batch = Array.from({ length: n }, () => source.next(timestamp));
      await writer.append(codec.encodeRecord(batch, { partitionId: o.partition }), batch);
      remaining -= n;
      if (writer.size >= o.segmentSize) await seal();
    }
    const active = await writer.close();
    segments.push(active);
    o.onSegment?.(active);
  } catch (err) {
    await writer.abandon();
    throw err;
  }
  await syncDirectory(dir);
  return segments;
}

function checkOptions(o: AppendOptions): void {
  const wholeNumber = (name: string, v: number | undefined, min: number) => {
    if (v !== undefined && (!Number.isSafeInteger(v) || v < min)) {
      throw new RangeError(`${name} must be an integer >= ${min}, got ${v}`);
    }
  };
  wholeNumber("stream", o.stream, 0);
  wholeNumber("topic", o.topic, 0);
  wholeNumber("partition", o.partition, 0);
  wholeNumber("messages", o.messages, 0);
  wholeNumber("segmentSize", o.segmentSize, 1);
  wholeNumber("payloadSize", o.payloadSize, 0);
  wholeNumber("messagesPerBatch", o.messagesPerBatch, 1);
  wholeNumber("seed", o.seed, 0);
  if ((o.payloadSize ?? 0) > MAX_PAYLOAD_SIZE) {
    throw new RangeError(`payloadSize must be at most ${MAX_PAYLOAD_SIZE}`);
  }
}

/** Segment start offsets in a partition directory, ascending. */
async function segmentStarts(dir: string): Promise<bigint[]> {
  return (await namesIn(dir))
    .flatMap((name) => {
      const file = parseSegmentFileName(name);
      return file?.ext === "log" ? [file.start] : [];
    })
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Deterministic messages: pseudo-random payloads and ids, timestamps a few µs apart. */
class MessageSource {
  readonly #random: () => number;
  readonly #payloadSize: number;
  #lastTimestamp: bigint | undefined;
  readonly #firstTimestamp: bigint;
  nextOffset: bigint;

  constructor(o: AppendOptions, nextOffset: bigint, lastTimestamp: bigint | undefined) {
    const seed = o.seed ?? 1;
    // Mixing in the offset makes an append continue with fresh, still deterministic, bytes.
    this.#random = seededUint32(seed ^ Math.imul(Number(nextOffset & 0xffff_ffffn), 0x9e3779b1));
    this.#payloadSize = o.payloadSize ?? 256;
    this.#lastTimestamp = lastTimestamp;
    this.#firstTimestamp = o.startTimestampUs ?? DEFAULT_START_TIMESTAMP_US;
    this.nextOffset = nextOffset;
  }

  /** A server timestamp strictly after the previous one. */
  nextTimestamp(): bigint {
    const t = this.#lastTimestamp === undefined
      ? this.#firstTimestamp
      : this.#lastTimestamp + 1n + BigInt(this.#random() % 4);
    this.#lastTimestamp = t;
    return t;
  }

  next(timestamp: bigint): Message {
    const offset = this.nextOffset++;
    const lag = 1n + BigInt(this.#random() % 1000);
    const r = this.#random;
    let id = (BigInt(r()) << 96n) | (BigInt(r()) << 64n) | (BigInt(r()) << 32n) | BigInt(r());
    if (id === 0n) id = 1n;
    const payload = new Uint8Array(this.#payloadSize);
    for (let i = 0; i < payload.length; i += 4) {
      const x = r();
      payload[i] = x;
      if (i + 1 < payload.length) payload[i + 1] = x >>> 8;
      if (i + 2 < payload.length) payload[i + 2] = x >>> 16;
      if (i + 3 < payload.length) payload[i + 3] = x >>> 24;
    }
    return {
      offset,
      timestamp,
      originTimestamp: timestamp > lag ? timestamp - lag : 0n,
      id,
      payload,
      userHeaders: offset % 10n === 0n ? sequenceHeader(offset) : new Uint8Array(0),
    };
  }
}

/** A valid Iggy user-headers blob: one entry, string key "gen" → uint64 value `offset`. */
function sequenceHeader(offset: bigint): Uint8Array {
  const out = new Uint8Array(1 + 4 + 3 + 1 + 4 + 8);
  const v = new DataView(out.buffer);
  out[0] = 2; // string
  v.setUint32(1, 3, true);
  out.set([0x67, 0x65, 0x6e], 5); // "gen"
  out[8] = 12; // uint64
  v.setUint32(9, 8, true);
  v.setBigUint64(13, offset, true);
  return out;
}

/** Appends to a file through a fixed buffer, with positional writes. */
class ChunkedFile {
  readonly #buf = new Uint8Array(WRITE_CHUNK);
  #used = 0;
  #position: number;

  constructor(readonly fh: FileHandle, position: number) {
    this.#position = position;
  }

  async write(bytes: Uint8Array): Promise<void> {
    if (bytes.length > this.#buf.length - this.#used) await this.flush();
    if (bytes.length >= this.#buf.length) {
      await this.#writeFully(bytes);
      return;
    }
    this.#buf.set(bytes, this.#used);
    this.#used += bytes.length;
  }

  async flush(): Promise<void> {
    if (this.#used === 0) return;
    await this.#writeFully(this.#buf.subarray(0, this.#used));
    this.#used = 0;
  }

  async close(): Promise<void> {
    await this.flush();
    await this.fh.sync();
    await this.fh.close();
  }

  async #writeFully(bytes: Uint8Array): Promise<void> {
    await writeAll(this.fh, bytes, this.#position);
    this.#position += bytes.length;
  }
}

/** One segment being written: its two files and the bounds of what has been appended. */
class SegmentWriter {
  private constructor(
    readonly paths: { log: string; index: string },
    readonly codec: SegmentCodec,
    readonly log: ChunkedFile,
    readonly index: ChunkedFile,
    readonly bounds: SegmentBounds,
  ) {}

  static async create(dir: string, codec: SegmentCodec, start: bigint): Promise<SegmentWriter> {
    const paths = segmentPaths(dir, start);
    const log = await openFresh(paths.log);
    const index = await openFresh(paths.index).catch(async (err) => {
      await log.close();
      throw err;
    });
    return new SegmentWriter(paths, codec, new ChunkedFile(log, 0), new ChunkedFile(index, 0), {
      startOffset: start,
      endOffset: start - 1n,
      startTimestamp: 0n,
      endTimestamp: 0n,
      maxTimestamp: 0n,
      size: 0,
      indexSize: 0,
      messageCount: 0n,
    });
  }

  static async resume(dir: string, codec: SegmentCodec, b: SegmentBounds): Promise<SegmentWriter> {
    const paths = segmentPaths(dir, b.startOffset);
    const log = await open(paths.log, "r+");
    const index = await open(paths.index, "r+").catch(async (err) => {
      if ((err as { code?: string }).code === "ENOENT") return await open(paths.index, "wx");
      await log.close();
      throw err;
    });
    return new SegmentWriter(
      paths,
      codec,
      new ChunkedFile(log, b.size),
      new ChunkedFile(index, b.indexSize),
      { ...b },
    );
  }

  get size(): number {
    return this.bounds.size;
  }

  async append(record: Uint8Array, messages: Message[]): Promise<void> {
    const b = this.bounds;
    const first = messages[0];
    const entry = { offset: first.offset, position: b.size, timestamp: first.timestamp };
    const indexBytes = this.codec.encodeIndex([entry], {
      startOffset: b.startOffset,
      logSize: b.size + record.length,
    });
    await this.log.write(record);
    await this.index.write(indexBytes);
    if (b.messageCount === 0n) b.startTimestamp = first.timestamp;
    b.endOffset = messages[messages.length - 1].offset;
    b.endTimestamp = first.timestamp;
    if (first.timestamp > b.maxTimestamp) b.maxTimestamp = first.timestamp;
    b.size += record.length;
    b.indexSize += indexBytes.length;
    b.messageCount += BigInt(messages.length);
  }

  async close(): Promise<GeneratedSegment> {
    await this.log.close();
    await this.index.close();
    return { ...this.bounds, logPath: this.paths.log, indexPath: this.paths.index };
  }

  /** Closes the files after a failure, keeping what was written. */
  async abandon(): Promise<void> {
    await this.log.close().catch(() => {});
    await this.index.close().catch(() => {});
  }
}

/** Opens a new segment file; an existing empty one (as the broker creates) may be reused. */
async function openFresh(path: string): Promise<FileHandle> {
  try {
    return await open(path, "wx");
  } catch (err) {
    if ((err as { code?: string }).code !== "EEXIST") throw err;
  }
  if ((await stat(path)).size !== 0) {
    throw new Error(`${path} already exists and is not empty; the generator never overwrites data`);
  }
  return await open(path, "w");
}

/** fsyncs a directory so new file names are durable; best effort where a runtime cannot. */
async function syncDirectory(dir: string): Promise<void> {
  try {
    const fh = await open(dir, "r");
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch {
    // Some platforms cannot open or fsync a directory; the files themselves are synced.
  }
}
