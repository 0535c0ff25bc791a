// Decides whether a partition's segment files are Iggy 0.8 or Iggy 0.9 (`format = "auto"`),
// from the first record of a `.log` and the size of its `.index`.
import { type FileHandle, open } from "node:fs/promises";
import { basename } from "node:path";
import { initHashes } from "../hash.ts";
import { readAt } from "./_file.ts";
import type { SegmentCodec } from "./codec.ts";
import { ALL_CODECS } from "./codecs.ts";
import { FormatError } from "./errors.ts";
import type { FormatName, RecordInfo } from "./types.ts";

/** First records larger than this are judged by their header alone (no checksum read). */
const MAX_VERIFIED_RECORD = 64 << 20;

interface Verdict {
  codec: SegmentCodec;
  /** The first record's checksums were verified (not only its header). */
  verified: boolean;
  /** Why this format was ruled out, when it was. */
  reason?: string;
}

/**
 * Detects a segment's format. A format fits when the first record's header parses under it
 * (reserved bytes zero, lengths consistent, record inside the file, first offset equal to the
 * file name's offset when the name is a segment name) and the index size is a multiple of its
 * entry size (a missing index counts as empty). When both fit — a 0.9 batch header can parse
 * as a 0.8 message header — the format whose checksums verify wins.
 *
 * @param logPath a segment's `.log`
 * @param indexPath the matching `.index`
 * @returns the format, or `undefined` for an empty `.log` (nothing to tell from yet)
 * @throws {FormatError} `unknown_format` naming the `.log` when neither format fits
 */
export async function detectFormat(
  logPath: string,
  indexPath: string,
): Promise<FormatName | undefined> {
  await initHashes();
  const indexHead = (await readFileHead(indexPath, 24)) ?? { bytes: new Uint8Array(0), size: 0 };
  const digits = /^(\d{20})\.log$/.exec(basename(logPath))?.[1];
  const nameOffset = digits === undefined ? undefined : BigInt(digits);
  const fh = await open(logPath, "r");
  let verdicts: Verdict[];
  try {
    const logSize = (await fh.stat()).size;
    if (logSize === 0) return undefined;
    const head = await readAt(fh, 0, Math.min(logSize, 256));
    verdicts = [];
    for (const codec of ALL_CODECS) {
      verdicts.push(
        await judge(codec, fh, head, logPath, logSize, indexHead, nameOffset),
      );
    }
  } finally {
    await fh.close();
  }
  const fitting = verdicts.filter((v) => v.reason === undefined);
  const verified = fitting.filter((v) => v.verified);
  if (verified.length === 1) return verified[0].codec.name;
  if (fitting.length === 1) return fitting[0].codec.name;
  const why = fitting.length === 0
    ? verdicts.map((v) => `not ${v.codec.name}: ${v.reason}`).join("; ")
    : "its first record fits both Iggy 0.8 and 0.9 and neither is confirmed by checksums";
  throw new FormatError("unknown_format", logPath, 0, `not an Iggy 0.8 or 0.9 segment (${why})`);
}

async function judge(
  codec: SegmentCodec,
  fh: FileHandle,
  head: Uint8Array,
  file: string,
  logSize: number,
  index: { bytes: Uint8Array; size: number },
  nameOffset: bigint | undefined,
): Promise<Verdict> {
  const no = (reason: string): Verdict => ({ codec, verified: false, reason });
  if (index.size % codec.indexEntrySize !== 0) {
    return no(`index size ${index.size} is not a multiple of ${codec.indexEntrySize}`);
  }
  let size: number;
  try {
    const info = codec.recordHeader(head, { file, position: 0 });
    if (nameOffset !== undefined && info.firstOffset !== nameOffset) {
      return no(`first record has offset ${info.firstOffset}, the file name says ${nameOffset}`);
    }
    size = info.size;
    if (size > logSize) return no(`first record of ${size} bytes is larger than the file`);
    const mismatch = firstEntryMismatch(codec, index.bytes, info, logSize);
    if (mismatch) return no(mismatch);
  } catch (err) {
    if (err instanceof FormatError) return no(err.message);
    throw err;
  }
  if (size > MAX_VERIFIED_RECORD) return { codec, verified: false };
  try {
    codec.decodeRecord(await readAt(fh, 0, size), { file, verify: true });
    return { codec, verified: true };
  } catch (err) {
    if (err instanceof FormatError) return { codec, verified: false };
    throw err;
  }
}

/**
 * Checks the index's first entry against the first record under `codec`'s reading: an entry
 * at byte 0 must name that record's offset and timestamp (and, for 0.8, its end position).
 */
function firstEntryMismatch(
  codec: SegmentCodec,
  indexHead: Uint8Array,
  first: RecordInfo,
  logSize: number,
): string | undefined {
  if (indexHead.length < codec.indexEntrySize) return undefined;
  const bytes = indexHead.subarray(0, codec.indexEntrySize);
  const ctx = { file: "index", startOffset: first.firstOffset, logSize };
  const [entry] = codec.parseIndex(bytes, ctx);
  if (entry.position !== 0) return undefined; // a sparse 0.9 index may start further in
  const expected = { offset: first.firstOffset, position: 0, timestamp: first.timestamp };
  const encoded = codec.encodeIndex([expected], { ...ctx, logSize: first.size });
  if (encoded.some((b, i) => b !== bytes[i])) {
    return "the first index entry does not describe the first record";
  }
  return undefined;
}

/** The first `length` bytes of a file and its size, or undefined when it does not exist. */
async function readFileHead(
  path: string,
  length: number,
): Promise<{ bytes: Uint8Array; size: number } | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(path, "r");
  } catch (err) {
    if ((err as { code?: string }).code === "ENOENT") return undefined;
    throw err;
  }
  try {
    const size = (await fh.stat()).size;
    return { bytes: await readAt(fh, 0, Math.min(size, length)), size };
  } finally {
    await fh.close();
  }
}
