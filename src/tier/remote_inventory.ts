// What the bucket holds for one partition: every incarnation and generation under its key
// root, and — with one HEAD per `.log` — the facts each object's metadata carries. The bucket is
// the source of truth tierd rebuilds its local state from, so this reads it, never trusts it
// blindly: an object whose metadata is unusable or whose size disagrees is reported, not used.
import { forEachBounded } from "../base/concurrency.ts";
import { listBounded, type ListingOptions } from "../../providers/listing.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { fromUserMetadata, type ObjectFacts } from "../layout/object_metadata.ts";
import { parseSegmentKey } from "../layout/object_keys.ts";

/** One incarnation and generation of a partition, as the listing shows it. */
export interface RemoteGeneration {
  incarnation: bigint;
  generation: bigint;
  /** `.log` keys by segment start. */
  logs: Map<bigint, string>;
  /** `.index` keys by segment start. */
  indexes: Map<bigint, string>;
  /**
   * The newest object's modification time, when the store says: for messages only. A copy is
   * never chosen by its date (anyone can write a newer object).
   */
  newest?: Date;
}

/** A segment object in the bucket with the facts its metadata carries. */
export interface RemoteSegment {
  start: bigint;
  keys: { log: string; index: string };
  facts: ObjectFacts;
}

/** An object that could not be used, and why. */
export interface InventoryProblem {
  key: string;
  reason: string;
  /** The segment it is of, when the key names one. */
  start?: bigint;
  /** The segment's end offset, when its metadata still says. */
  endOffset?: bigint;
  /**
   * Half of the segment's pair of objects is missing (the `.log` or the `.index`): what a copy
   * cut off between its two uploads leaves, as well as what damage does.
   */
  incomplete?: boolean;
}

/** HEADs in flight at once while taking an inventory. */
const HEAD_CONCURRENCY = 16;

/**
 * Lists every incarnation and generation of the partition whose objects live under `root`
 * (a `partitionRoot`), by incarnation id then generation. The listing is bounded
 * (providers/listing.ts): a store that pages without end fails it, naming the prefix.
 */
export async function listRemoteGenerations(
  store: ObjectStore,
  root: string,
  options: ListingOptions = {},
): Promise<RemoteGeneration[]> {
  const byDir = new Map<string, RemoteGeneration>();
  for (const o of await listBounded(store, root, options)) {
    const k = parseSegmentKey(root, o.key);
    if (!k) continue;
    const dir = `${k.incarnation}-${k.generation}`;
    let g = byDir.get(dir);
    if (!g) {
      g = {
        incarnation: k.incarnation,
        generation: k.generation,
        logs: new Map(),
        indexes: new Map(),
      };
      byDir.set(dir, g);
    }
    (k.ext === "log" ? g.logs : g.indexes).set(k.start, o.key);
    if (o.lastModified && (!g.newest || o.lastModified > g.newest)) g.newest = o.lastModified;
  }
  return [...byDir.values()].sort(byIncarnationThenGeneration);
}

/** Orders incarnations and generations by id, then generation (never by date). */
export function byIncarnationThenGeneration(
  a: { incarnation: bigint; generation: bigint },
  b: { incarnation: bigint; generation: bigint },
): number {
  return a.incarnation < b.incarnation
    ? -1
    : a.incarnation > b.incarnation
    ? 1
    : a.generation < b.generation
    ? -1
    : a.generation > b.generation
    ? 1
    : 0;
}

/**
 * HEADs every `.log` of a generation and decodes its metadata. A segment without its `.index`,
 * with metadata that does not decode, or whose size disagrees with its metadata is a problem.
 * @returns the usable segments, oldest first, and the problems
 */
export async function headSegments(
  store: ObjectStore,
  gen: RemoteGeneration,
  options: { signal?: AbortSignal } = {},
): Promise<{ segments: RemoteSegment[]; problems: InventoryProblem[] }> {
  const starts = [...gen.logs.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  // A segment whose .index is there but whose .log is not is a segment the bucket lost.
  const orphanIndexes: InventoryProblem[] = [...gen.indexes]
    .filter(([start]) => !gen.logs.has(start))
    .map(([start, key]) => ({
      key: key.replace(/\.index$/, ".log"),
      start,
      reason: "the object is missing (its .index is there)",
      incomplete: true,
    }));
  const found: (RemoteSegment | undefined)[] = new Array(starts.length);
  const problems: InventoryProblem[] = [...orphanIndexes];
  await forEachBounded(starts, HEAD_CONCURRENCY, async (start, i) => {
    const log = gen.logs.get(start)!;
    const index = gen.indexes.get(start);
    if (!index) {
      problems.push({ key: log, start, reason: "its .index object is missing", incomplete: true });
      return;
    }
    const head = await store.head(log, options);
    let facts: ObjectFacts;
    try {
      facts = fromUserMetadata(log, head.metadata);
    } catch (err) {
      problems.push({ key: log, start, reason: (err as Error).message });
      return;
    }
    const endOffset = facts.endOffset;
    if (head.size !== facts.size) {
      problems.push({
        key: log,
        start,
        endOffset,
        reason: `object is ${head.size} bytes, metadata says ${facts.size}`,
      });
      return;
    }
    if (endOffset < start) {
      problems.push({
        key: log,
        start,
        reason: `metadata says the segment ends at ${endOffset}, before it starts`,
      });
      return;
    }
    found[i] = { start, keys: { log, index }, facts };
  });
  problems.sort((a, b) => ((a.start ?? 0n) < (b.start ?? 0n) ? -1 : 1));
  return { segments: found.filter((s): s is RemoteSegment => s !== undefined), problems };
}
