// The on-disk form of one cached chunk: a header that names the chunk and carries an XXH3-64 per
// block of data, then the data. A read verifies only the blocks it touches, so a warm read costs
// what it returns, and a flipped byte or a truncated file is caught before it is served.
import { bodyBlockSums } from "../../providers/fetch_workers.ts";
import { xxh3_64 } from "../hash.ts";

/** The eight magic bytes every chunk file starts with. */
export const CHUNK_MAGIC = "TIERDCHK";
/** The chunk file layout version this build writes; it also reads version 1. */
export const CHUNK_VERSION = 2;
/** Bytes covered by one block checksum. */
export const CHUNK_BLOCK_SIZE = 64 * 1024;
/** Bytes of the fixed part of the header, before the block checksums. */
export const CHUNK_HEADER_FIXED = 48;
/**
 * A version 2 header fills whole pages of this many bytes, so the data starts on a page
 * boundary: the alignment direct I/O asks of file offsets (chunk_store.ts).
 */
export const CHUNK_DATA_ALIGN = 4096;

/**
 * The longest header read: a 64 MiB chunk (the largest `cache.chunk_size`) in 32-byte blocks. A
 * damaged header claiming more is refused before anything is allocated for it.
 */
const MAX_HEADER_BYTES = 16 * 1024 * 1024;

const MAGIC_BYTES = new TextEncoder().encode(CHUNK_MAGIC);

// Layout (little-endian): [0] magic | [8] version u16 | [10] reserved u16 | [12] block size u32 |
// [16] name u64 (the chunk's content address) | [24] chunk start u64 | [32] chunk end u64 |
// [40] block count u32 | [44] reserved u32 | [48] block checksums u64 × count |
// version 2: zeros up to 8 bytes before the next multiple of CHUNK_DATA_ALIGN |
// header checksum u64 (XXH3-64 of every header byte before it, the zeros included) | data.
// Version 1 (written before direct I/O) has no zeros: its data follows the checksum directly.

/** What a chunk header says about the chunk that follows it. */
export interface ChunkHeader {
  /** The chunk's content address (see `chunkName`), as 16 hex digits. */
  name: string;
  /** First byte of the chunk in its object. */
  start: number;
  /** End (exclusive) of the chunk in its object. */
  end: number;
  /** Bytes per checksummed block. */
  blockSize: number;
  /** XXH3-64 of each block of data. */
  blockChecksums: bigint[];
  /** Bytes of the header; data starts here (on a page boundary from version 2). */
  headerLength: number;
}

/** A chunk file that cannot be trusted: it is evicted (reason `corrupt`) and fetched again. */
export class ChunkCorruptError extends Error {
  override readonly name = "ChunkCorruptError";
  /**
   * @param file the chunk file
   * @param detail what check failed
   */
  constructor(readonly file: string, detail: string) {
    super(`corrupt cache chunk ${file}: ${detail}`);
  }
}

/** Bytes of the header of a chunk of `length` bytes, in layout `version`. */
export function chunkHeaderLength(
  length: number,
  blockSize = CHUNK_BLOCK_SIZE,
  version = CHUNK_VERSION,
): number {
  return headerLengthFor(Math.ceil(length / blockSize), version);
}

function headerLengthFor(blocks: number, version: number): number {
  const bare = CHUNK_HEADER_FIXED + 8 * blocks + 8;
  return version === 1 ? bare : Math.ceil(bare / CHUNK_DATA_ALIGN) * CHUNK_DATA_ALIGN;
}

/** Bytes of the whole chunk file `header` describes, in its own layout. */
export function chunkFileLength(header: ChunkHeader): number {
  return header.headerLength + (header.end - header.start);
}

/** Bytes of the whole chunk file for `length` bytes of data: what the budget accounts. */
export function chunkFileSize(length: number, blockSize = CHUNK_BLOCK_SIZE): number {
  return chunkHeaderLength(length, blockSize) + length;
}

/**
 * Encodes the header of a chunk file.
 *
 * @param name the chunk's content address (16 hex digits)
 * @param range the chunk's `[start, end)` in its object
 * @param data the chunk's bytes
 * @param blockSize bytes per checksummed block
 * @param version the layout (1 only to test that files an older tierd wrote are still read)
 * @returns the header bytes; the file is these followed by `data`
 */
export function encodeChunkHeader(
  name: string,
  range: { start: number; end: number },
  data: Uint8Array,
  blockSize = CHUNK_BLOCK_SIZE,
  version = CHUNK_VERSION,
): Uint8Array {
  const blocks = Math.ceil(data.length / blockSize);
  const out = new Uint8Array(chunkHeaderLength(data.length, blockSize, version));
  const view = new DataView(out.buffer);
  out.set(MAGIC_BYTES, 0);
  view.setUint16(8, version, true);
  view.setUint32(12, blockSize, true);
  view.setBigUint64(16, BigInt("0x" + name), true);
  view.setBigUint64(24, BigInt(range.start), true);
  view.setBigUint64(32, BigInt(range.end), true);
  view.setUint32(40, blocks, true);
  // A fetch worker took them as it read the body (providers/fetch_workers.ts): off the event loop.
  const known = bodyBlockSums(data, blockSize);
  for (let b = 0; b < blocks; b++) {
    const block = data.subarray(b * blockSize, Math.min(data.length, (b + 1) * blockSize));
    view.setBigUint64(CHUNK_HEADER_FIXED + 8 * b, known?.[b] ?? xxh3_64(block), true);
  }
  const sumAt = out.length - 8;
  view.setBigUint64(sumAt, xxh3_64(out.subarray(0, sumAt)), true);
  return out;
}

/**
 * How many header bytes to read to decode a header, given its first `CHUNK_HEADER_FIXED` bytes.
 *
 * @param fixed at least the first `CHUNK_HEADER_FIXED` bytes of the file
 * @param file the file, for the error message
 * @returns the whole header's length
 * @throws {ChunkCorruptError} on a bad magic, version or block geometry
 */
export function headerLengthOf(fixed: Uint8Array, file: string): number {
  if (fixed.length < CHUNK_HEADER_FIXED) throw new ChunkCorruptError(file, "short header");
  for (let i = 0; i < MAGIC_BYTES.length; i++) {
    if (fixed[i] !== MAGIC_BYTES[i]) throw new ChunkCorruptError(file, "bad magic");
  }
  const view = new DataView(fixed.buffer, fixed.byteOffset, fixed.byteLength);
  const version = view.getUint16(8, true);
  if (version !== 1 && version !== CHUNK_VERSION) {
    throw new ChunkCorruptError(file, `version ${version}`);
  }
  const blockSize = view.getUint32(12, true);
  const blocks = view.getUint32(40, true);
  const length = Number(view.getBigUint64(32, true) - view.getBigUint64(24, true));
  if (blockSize === 0 || length < 0 || blocks !== Math.ceil(length / blockSize)) {
    throw new ChunkCorruptError(file, "bad block geometry");
  }
  const headerLength = headerLengthFor(blocks, version);
  if (headerLength > MAX_HEADER_BYTES) {
    throw new ChunkCorruptError(file, `header of ${headerLength} bytes is too long`);
  }
  return headerLength;
}

/**
 * Decodes and checks a chunk header.
 *
 * @param bytes the header bytes (at least `headerLengthOf` of them)
 * @param file the file, for the error message
 * @returns the decoded header
 * @throws {ChunkCorruptError} when any check fails
 */
export function decodeChunkHeader(bytes: Uint8Array, file: string): ChunkHeader {
  const headerLength = headerLengthOf(bytes, file);
  if (bytes.length < headerLength) throw new ChunkCorruptError(file, "short header");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const sumAt = headerLength - 8;
  if (view.getBigUint64(sumAt, true) !== xxh3_64(bytes.subarray(0, sumAt))) {
    throw new ChunkCorruptError(file, "header checksum mismatch");
  }
  const blocks = view.getUint32(40, true);
  const blockChecksums: bigint[] = [];
  for (let b = 0; b < blocks; b++) {
    blockChecksums.push(view.getBigUint64(CHUNK_HEADER_FIXED + 8 * b, true));
  }
  return {
    name: view.getBigUint64(16, true).toString(16).padStart(16, "0"),
    start: Number(view.getBigUint64(24, true)),
    end: Number(view.getBigUint64(32, true)),
    blockSize: view.getUint32(12, true),
    blockChecksums,
    headerLength,
  };
}

/**
 * The blocks of a chunk that hold data bytes `[from, to)` (offsets within the chunk's data).
 *
 * @returns the first block and the end (exclusive) of the run, plus the data offsets they span
 */
export function blocksCovering(
  header: ChunkHeader,
  from: number,
  to: number,
): { first: number; end: number; dataStart: number; dataEnd: number } {
  const length = header.end - header.start;
  const first = Math.floor(from / header.blockSize);
  const end = Math.ceil(to / header.blockSize);
  return {
    first,
    end,
    dataStart: first * header.blockSize,
    dataEnd: Math.min(length, end * header.blockSize),
  };
}

/**
 * Checks blocks `[first, ...)` of a chunk against its header.
 *
 * @param header the chunk's header
 * @param first the index of the first block in `bytes`
 * @param bytes whole blocks of data starting at block `first`
 * @param file the file, for the error message
 * @throws {ChunkCorruptError} on the first block whose checksum does not match
 */
export function verifyBlocks(
  header: ChunkHeader,
  first: number,
  bytes: Uint8Array,
  file: string,
): void {
  for (let off = 0, b = first; off < bytes.length; off += header.blockSize, b++) {
    const block = bytes.subarray(off, Math.min(bytes.length, off + header.blockSize));
    if (xxh3_64(block) !== header.blockChecksums[b]) {
      throw new ChunkCorruptError(file, `block ${b} checksum mismatch`);
    }
  }
}
