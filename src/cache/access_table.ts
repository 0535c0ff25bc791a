// The persisted access table of the chunk cache: which chunk files are resident, on which
// recency list and in what order, so a restarted cache serves what it held with zero GETs.
// Written every 60 s and at shutdown (temp + fsync + rename), reconciled with the disk at boot.
import { xxh3_64 } from "../hash.ts";
import type { Tier } from "./policy.ts";

/** The eight magic bytes the table starts with. */
export const TABLE_MAGIC = "TIERDCAT";
/** The only table layout version this build writes and reads. */
export const TABLE_VERSION = 1;

// Layout (little-endian): [0] magic | [8] version u16 | [10] reserved u16 | [12] count u32 |
// count × { name u64 | bytes u64 | tier u8 } | xxh3-64 of every byte before it.
const HEADER = 16;
const ENTRY = 17;
const TIERS: readonly Tier[] = ["prefetched", "cold", "main"];
const MAGIC_BYTES = new TextEncoder().encode(TABLE_MAGIC);

/** One resident chunk in the table. */
export interface TableEntry {
  /** Content address, 16 hex digits. */
  name: string;
  /** Bytes of the chunk file. */
  bytes: number;
  tier: Tier;
}

/** The table file is damaged or of another version: the cache boots from the files alone. */
export class AccessTableError extends Error {
  override readonly name = "AccessTableError";
}

/**
 * Encodes the table; entries keep their order (per tier, first to be evicted first).
 *
 * @param entries resident chunks
 * @returns the file's bytes
 */
export function encodeAccessTable(entries: Iterable<TableEntry>): Uint8Array {
  const list = [...entries];
  const out = new Uint8Array(HEADER + ENTRY * list.length + 8);
  const view = new DataView(out.buffer);
  out.set(MAGIC_BYTES, 0);
  view.setUint16(8, TABLE_VERSION, true);
  view.setUint32(12, list.length, true);
  list.forEach((e, i) => {
    const at = HEADER + ENTRY * i;
    view.setBigUint64(at, BigInt("0x" + e.name), true);
    view.setBigUint64(at + 8, BigInt(e.bytes), true);
    view.setUint8(at + 16, TIERS.indexOf(e.tier));
  });
  const sumAt = out.length - 8;
  view.setBigUint64(sumAt, xxh3_64(out.subarray(0, sumAt)), true);
  return out;
}

/**
 * Decodes and checks a table file.
 *
 * @param bytes the file's bytes
 * @returns the entries, in file order
 * @throws {AccessTableError} when the file is damaged
 */
export function decodeAccessTable(bytes: Uint8Array): TableEntry[] {
  if (bytes.length < HEADER + 8) throw new AccessTableError("access table too short");
  for (let i = 0; i < MAGIC_BYTES.length; i++) {
    if (bytes[i] !== MAGIC_BYTES[i]) throw new AccessTableError("access table: bad magic");
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint16(8, true);
  if (version !== TABLE_VERSION) throw new AccessTableError(`access table version ${version}`);
  const count = view.getUint32(12, true);
  if (bytes.length !== HEADER + ENTRY * count + 8) {
    throw new AccessTableError("access table: length does not match its count");
  }
  const sumAt = bytes.length - 8;
  if (view.getBigUint64(sumAt, true) !== xxh3_64(bytes.subarray(0, sumAt))) {
    throw new AccessTableError("access table: checksum mismatch");
  }
  const entries: TableEntry[] = [];
  for (let i = 0; i < count; i++) {
    const at = HEADER + ENTRY * i;
    const tier = TIERS[view.getUint8(at + 16)];
    if (!tier) throw new AccessTableError(`access table: bad tier in entry ${i}`);
    entries.push({
      name: view.getBigUint64(at, true).toString(16).padStart(16, "0"),
      bytes: Number(view.getBigUint64(at + 8, true)),
      tier,
    });
  }
  return entries;
}
