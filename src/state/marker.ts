// The 128-byte `.remote` marker (docs/architecture.md, "State on local disk"): the durable proof,
// kept in tierd's state directory, that a segment's `.log` lives in the object store. Written
// before any broker file is unlinked.
import { closeSync, openSync, readSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { hex64, initHashes, xxh3_64 } from "../hash.ts";
import { writeFileDurable } from "../base/durable.ts";

/** Size of an encoded marker in bytes. */
export const MARKER_SIZE = 128;
/** The eight magic bytes every marker starts with. */
export const MARKER_MAGIC = "IGGYREMT";
/** The only marker layout version this build writes and reads. */
export const MARKER_VERSION = 1;

const MAGIC_BYTES = new TextEncoder().encode(MARKER_MAGIC);
const CHECKSUMMED_BYTES = 104;
const PADDING_START = 112;
const U64_MAX = (1n << 64n) - 1n;
const U128_MAX = (1n << 128n) - 1n;

/** The decoded fields of a `.remote` marker (magic, version, reserved and padding are implied). */
export interface Marker {
  /** u16 flags; none are defined yet, carried through unchanged. */
  flags: number;
  /** First offset in the segment (its name). */
  startOffset: bigint;
  /** Last offset in the segment. */
  endOffset: bigint;
  /** Size of the `.log` in bytes. */
  size: bigint;
  /** Size of the `.index` in bytes. */
  indexSize: bigint;
  startTimestamp: bigint;
  endTimestamp: bigint;
  maxTimestamp: bigint;
  /** `created_revision`: the partition's incarnation id. */
  incarnation: bigint;
  /** `purge_generation`. */
  generation: bigint;
  /** XXH3-128 of the whole `.log`. */
  logChecksum: bigint;
}

/** What is wrong with a marker that failed to decode. */
export type MarkerErrorCode = "size" | "magic" | "version" | "checksum" | "padding";

/** A marker file that cannot be trusted; the caller quarantines it. */
export class MarkerError extends Error {
  /** Which check failed. */
  readonly code: MarkerErrorCode;
  /** The marker file (or label) that was being decoded. */
  readonly file: string;

  /**
   * @param code Which check failed.
   * @param file The marker file being decoded.
   * @param detail What exactly was wrong.
   */
  constructor(code: MarkerErrorCode, file: string, detail: string) {
    super(`bad .remote marker ${file}: ${detail}`);
    this.name = "MarkerError";
    this.code = code;
    this.file = file;
  }
}

const U64_FIELDS = [
  ["startOffset", 16],
  ["endOffset", 24],
  ["size", 32],
  ["indexSize", 40],
  ["startTimestamp", 48],
  ["endTimestamp", 56],
  ["maxTimestamp", 64],
  ["incarnation", 72],
  ["generation", 80],
] as const satisfies readonly (readonly [keyof Marker, number])[];

/**
 * Encodes a marker into its 128-byte little-endian form. `initHashes()` must have been awaited.
 *
 * @param m The marker fields.
 * @returns A fresh 128-byte array.
 * @throws {RangeError} If a field does not fit its slot (u16 flags, u64 fields, u128 checksum).
 */
export function encodeMarker(m: Marker): Uint8Array {
  if (!Number.isInteger(m.flags) || m.flags < 0 || m.flags > 0xffff) {
    throw new RangeError(`marker flags ${m.flags} is not a u16`);
  }
  if (m.logChecksum < 0n || m.logChecksum > U128_MAX) {
    throw new RangeError(`marker logChecksum ${m.logChecksum} is not a u128`);
  }
  const bytes = new Uint8Array(MARKER_SIZE);
  const view = new DataView(bytes.buffer);
  bytes.set(MAGIC_BYTES, 0);
  view.setUint16(8, MARKER_VERSION, true);
  view.setUint16(10, m.flags, true);
  for (const [field, at] of U64_FIELDS) {
    const value = m[field];
    if (value < 0n || value > U64_MAX) {
      throw new RangeError(`marker ${field} ${value} is not a u64`);
    }
    view.setBigUint64(at, value, true);
  }
  view.setBigUint64(88, m.logChecksum & U64_MAX, true);
  view.setBigUint64(96, m.logChecksum >> 64n, true);
  view.setBigUint64(104, xxh3_64(bytes.subarray(0, CHECKSUMMED_BYTES)), true);
  return bytes;
}

/**
 * Decodes and verifies a marker. `initHashes()` must have been awaited.
 *
 * @param bytes The marker file's content.
 * @param file The marker's path, named in errors.
 * @returns The marker fields.
 * @throws {MarkerError} On a wrong size, magic, version, record checksum, or non-zero
 * reserved/padding bytes.
 */
export function decodeMarker(bytes: Uint8Array, file: string): Marker {
  if (bytes.length !== MARKER_SIZE) {
    throw new MarkerError("size", file, `${bytes.length} bytes, expected ${MARKER_SIZE}`);
  }
  for (let i = 0; i < MAGIC_BYTES.length; i++) {
    if (bytes[i] !== MAGIC_BYTES[i]) {
      throw new MarkerError("magic", file, `magic is not "${MARKER_MAGIC}"`);
    }
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint16(8, true);
  if (version !== MARKER_VERSION) {
    throw new MarkerError("version", file, `version ${version}, expected ${MARKER_VERSION}`);
  }
  const stored = view.getBigUint64(104, true);
  const actual = xxh3_64(bytes.subarray(0, CHECKSUMMED_BYTES));
  if (stored !== actual) {
    throw new MarkerError(
      "checksum",
      file,
      `record checksum ${hex64(stored)} does not match bytes 0..104 (${hex64(actual)})`,
    );
  }
  if (view.getUint32(12, true) !== 0) {
    throw new MarkerError("padding", file, "reserved bytes 12..16 are not zero");
  }
  for (let i = PADDING_START; i < MARKER_SIZE; i++) {
    if (bytes[i] !== 0) {
      throw new MarkerError("padding", file, `padding byte ${i} is not zero`);
    }
  }
  const u64 = (at: number) => view.getBigUint64(at, true);
  return {
    flags: view.getUint16(10, true),
    startOffset: u64(16),
    endOffset: u64(24),
    size: u64(32),
    indexSize: u64(40),
    startTimestamp: u64(48),
    endTimestamp: u64(56),
    maxTimestamp: u64(64),
    incarnation: u64(72),
    generation: u64(80),
    logChecksum: u64(88) | (u64(96) << 64n),
  };
}

/**
 * Writes a marker durably (temp file, fsync, rename, directory fsync): once this resolves the
 * broker's `.log` may be unlinked.
 *
 * @param path The marker's path (`…/{start:020}.remote`); its directory must exist.
 * @param m The marker fields.
 * @returns Resolves once the marker is on stable storage.
 * @throws {RangeError} If a field is out of range; the `node:fs` error if the write fails.
 */
export async function writeMarker(path: string, m: Marker): Promise<void> {
  await initHashes();
  await writeFileDurable(path, encodeMarker(m));
}

/**
 * Reads and verifies a marker file.
 *
 * @param path The marker's path.
 * @returns The marker fields.
 * @throws {MarkerError} If the content is not a valid marker; the `node:fs` error (e.g. `ENOENT`)
 * if it cannot be read.
 */
export async function readMarker(path: string): Promise<Marker> {
  await initHashes();
  return decodeMarker(await readFile(path), path);
}

/**
 * Reads and verifies a marker file synchronously: open, one read, close — a third of the cost
 * of `readMarker` per file, for the boot scan of many thousands (call `initHashes()` first).
 *
 * @throws as {@link readMarker}
 */
export function readMarkerSync(path: string): Marker {
  const fd = openSync(path, "r");
  try {
    const bytes = new Uint8Array(MARKER_SIZE + 1); // one more: a longer file is refused
    const n = readSync(fd, bytes, 0, bytes.length, 0);
    if (n > MARKER_SIZE) {
      throw new MarkerError(
        "size",
        path,
        `more than ${MARKER_SIZE} bytes, expected ${MARKER_SIZE}`,
      );
    }
    return decodeMarker(bytes.subarray(0, n), path);
  } finally {
    closeSync(fd);
  }
}
