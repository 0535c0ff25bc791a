// The clean-stop record, `{state_dir}/clean_stop`: what a clean stop knew about each partition's
// `.remote` markers, so the next boot need not read 100,000 of them before it is ready. The agent
// writes it once, as it stops cleanly, with an entry for each partition whose markers it read and
// checked in that run (or wrote itself); the next boot takes it — reads it, then removes it
// durably — so a record never outlives the run after the stop that wrote it, and a crash leaves
// none. An entry is only a promise about files the boot can compare cheaply: the journal's bytes
// (length and XXH3-64) and the set of marker names. Marker contents are read again after ready.
import { readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDir, writeFileDurable } from "../base/durable.ts";
import { hex64, initHashes, xxh3_64 } from "../hash.ts";
import type { PartitionId } from "../layout/partition.ts";

/** The record's file name inside `state_dir`. */
export const CLEAN_STOP_FILE = "clean_stop";
const KIND = "tierd-clean-stop";
const VERSION = 1;
const U64_MAX = (1n << 64n) - 1n;

/** What a clean stop knew of one partition. */
export interface CleanStopEntry extends PartitionId {
  incarnation: bigint;
  generation: bigint;
  /** The journal file's length in bytes, as the agent left it. */
  journalBytes: number;
  /** XXH3-64 of the journal file's bytes. */
  journalDigest: bigint;
  /** How many `.remote` markers the partition's state directory held. */
  markers: number;
  /** XXH3-64 of their file names, sorted and joined by newlines. */
  markerNamesDigest: bigint;
}

/** A record that cannot be trusted: its checksum, form or a field is wrong. */
export class CleanStopDamaged extends Error {
  override readonly name = "CleanStopDamaged";
  constructor(readonly path: string, readonly reason: string) {
    super(`clean-stop record ${path} is not usable: ${reason}`);
  }
}

/** The record's bytes: its JSON, a newline, then the XXH3-64 of the JSON in 16 hex digits. */
export function encodeCleanStop(entries: readonly CleanStopEntry[], writtenAt: number): Uint8Array {
  const body = JSON.stringify({
    kind: KIND,
    version: VERSION,
    written_at: writtenAt,
    partitions: entries.map((e) => ({
      stream: e.stream,
      topic: e.topic,
      partition: e.partition,
      incarnation: hex64(e.incarnation),
      generation: e.generation.toString(),
      journal_bytes: e.journalBytes,
      journal_xxh3: hex64(e.journalDigest),
      markers: e.markers,
      marker_names_xxh3: hex64(e.markerNamesDigest),
    })),
  });
  const bytes = new TextEncoder().encode(body);
  return new TextEncoder().encode(`${body}\n${hex64(xxh3_64(bytes))}\n`);
}

/**
 * Decodes and checks a record. `initHashes()` must have been awaited.
 * @throws {CleanStopDamaged} naming what is wrong
 */
export function decodeCleanStop(bytes: Uint8Array, path: string): CleanStopEntry[] {
  const text = new TextDecoder().decode(bytes);
  const m = /^(.*)\n([0-9a-f]{16})\n$/s.exec(text);
  if (!m) throw new CleanStopDamaged(path, "it does not end in a checksum line");
  const body = new TextEncoder().encode(m[1]);
  if (hex64(xxh3_64(body)) !== m[2]) {
    throw new CleanStopDamaged(path, `its checksum ${m[2]} does not match its bytes`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(m[1]);
  } catch (err) {
    throw new CleanStopDamaged(path, `not JSON: ${(err as Error).message}`);
  }
  const top = parsed as { kind?: unknown; version?: unknown; partitions?: unknown };
  if (top?.kind !== KIND) throw new CleanStopDamaged(path, `kind is not "${KIND}"`);
  if (top.version !== VERSION) {
    throw new CleanStopDamaged(path, `version ${String(top.version)}, expected ${VERSION}`);
  }
  if (!Array.isArray(top.partitions)) throw new CleanStopDamaged(path, "no partitions list");
  return top.partitions.map((p, i) => entryOf(p, `partition entry ${i}`, path));
}

function entryOf(raw: unknown, where: string, path: string): CleanStopEntry {
  const o = (raw ?? {}) as Record<string, unknown>;
  const bad = (field: string) =>
    new CleanStopDamaged(path, `${where}: ${field} ${JSON.stringify(o[field])} is not valid`);
  const count = (field: string) => {
    const v = o[field];
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) throw bad(field);
    return v;
  };
  const u64 = (field: string, hex: boolean) => {
    const v = o[field];
    const form = hex ? /^[0-9a-f]{16}$/ : /^(0|[1-9][0-9]{0,19})$/;
    if (typeof v !== "string" || !form.test(v)) throw bad(field);
    const n = BigInt(hex ? `0x${v}` : v);
    if (n > U64_MAX) throw bad(field);
    return n;
  };
  return {
    stream: count("stream"),
    topic: count("topic"),
    partition: count("partition"),
    incarnation: u64("incarnation", true),
    generation: u64("generation", false),
    journalBytes: count("journal_bytes"),
    journalDigest: u64("journal_xxh3", true),
    markers: count("markers"),
    markerNamesDigest: u64("marker_names_xxh3", true),
  };
}

/** Writes the record durably (temp file, fsync, rename, directory fsync). */
export async function writeCleanStop(
  stateDir: string,
  entries: readonly CleanStopEntry[],
  writtenAt: number,
): Promise<void> {
  await initHashes();
  await writeFileDurable(join(stateDir, CLEAN_STOP_FILE), encodeCleanStop(entries, writtenAt));
}

/** What taking the record found. */
export type TakenCleanStop =
  | { kind: "none" }
  | { kind: "damaged"; error: CleanStopDamaged }
  | { kind: "taken"; entries: CleanStopEntry[] };

/**
 * Reads the record and removes it durably (unlink, then the directory fsynced) before anything
 * trusts it: whatever happens in this run, the next boot reads every marker unless this run
 * stops cleanly and writes a new one. A damaged record is removed too, and said.
 */
export async function takeCleanStop(stateDir: string): Promise<TakenCleanStop> {
  const path = join(stateDir, CLEAN_STOP_FILE);
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { kind: "none" };
    throw err;
  }
  await unlink(path);
  await fsyncDir(stateDir);
  await initHashes();
  try {
    return { kind: "taken", entries: decodeCleanStop(bytes, path) };
  } catch (err) {
    if (err instanceof CleanStopDamaged) return { kind: "damaged", error: err };
    throw err;
  }
}

/** The digest a record keeps of a partition's marker names (sorted here). */
export function markerNamesDigest(names: readonly string[]): bigint {
  return xxh3_64(new TextEncoder().encode([...names].sort().join("\n")));
}
