// A partition's segments as the read path sees them (docs/architecture.md, "The read path"): the
// broker's local segments and the verified remote copies of the current incarnation and
// generation, merged into one ordered list, with the gaps the broker's retention left before a
// copy (`lost_before_upload`) and the holes the bucket has (HOLE).
import { join } from "node:path";
import { detectFormat } from "../format/detect.ts";
import { FormatError } from "../format/errors.ts";
import type { FormatName } from "../format/types.ts";
import { incarnationHex } from "../layout/partition.ts";
import { type PartitionId, partitionLabel, partitionRelPath } from "../layout/partition.ts";
import { directoryContradicts } from "../partition/journal_fit.ts";
import { type SegmentFiles, statNowOrUndefined } from "../partition/segments.ts";
import { type PartitionState, type SegmentRecord, segmentsOf } from "../state/segment_state.ts";
import { type RemoteLocation, segmentKeys } from "../layout/object_keys.ts";
import { fromUserMetadata } from "../layout/object_metadata.ts";
import type { SegmentFacts } from "../layout/segment_facts.ts";
import { tieredTopic } from "../config/topics.ts";
import type { ReadContext } from "./context.ts";
import { PartitionRebuilding, SegmentCorrupt, UnknownPartition } from "./errors.ts";
import { type ReadDeadline, readFailure, within } from "./_fetch.ts";

/** A verified copy of a segment in the store. */
export interface RemoteCopy {
  keys: { log: string; index: string };
  /** What COPY_SEGMENT_FINISHED recorded (end offset, sizes, timestamps, checksum). */
  meta: SegmentFacts;
  /**
   * Where the copy sits in the partition's remote bytes: the partition (incarnation and
   * generation included) and the summed sizes of every older copy of this generation, deleted
   * ones too, so positions stay put when retention removes old segments. For the chunk cache's
   * cold-reader detection.
   */
  position: { partition: string; base: number };
}

/** One segment, wherever its bytes are. */
export interface CatalogSegment {
  kind: "segment";
  /** Start offset (the segment's name). */
  start: bigint;
  /**
   * Inclusive end offset when known: from the journal for a remote copy, from the successor's
   * start for a local one; undefined for the last local segment.
   */
  end?: bigint;
  /** The broker's files, if still there when the catalog was built. */
  local?: SegmentFiles;
  /** True for the broker's last (active) segment, whose tail may still be written. */
  active: boolean;
  remote?: RemoteCopy;
}

/**
 * Offsets the partition has no bytes for: deleted by the broker before tierd copied them, or a
 * hole in the bucket (a copy restore or a rebuild found missing or unusable). Reads report them,
 * never skip them silently.
 */
export interface CatalogGap {
  kind: "gap";
  start: bigint;
  /** Inclusive. */
  end: bigint;
  /** What the range is, for the answer (`lost before upload`, a hole's reason). */
  why: string;
}

export type CatalogEntry = CatalogSegment | CatalogGap;

/** A partition's segments and gaps in offset order. */
export interface Catalog {
  id: PartitionId;
  /** `"{s}/{t}/{p}"` for messages. */
  label: string;
  /** The broker's partition directory (may no longer exist). */
  dir: string;
  /** Identity of the directory, `"{dev}:{ino}"`, when it exists. */
  dirIdentity?: string;
  /** The journal state, when there is one for this incarnation of the directory. */
  state?: PartitionState;
  entries: CatalogEntry[];
}

/**
 * Builds the catalog of one partition from its directory and journal.
 *
 * A journal recorded for another incarnation of the directory (the topic was deleted and
 * recreated, and the agent has not noticed yet) is ignored: its remote segments are not this
 * partition's.
 *
 * @param options.pending `ignore`: build it even while the agent does not know the partition's
 *   state yet (a summary that says so); by default that is a `PartitionRebuilding` error
 * @param options.keepView `false`: do not keep the state's remote view for later reads when none
 *   is kept yet (a summary, which a scrape asks for every partition: it should not leave a read
 *   cache of every copy behind). @default true
 * @throws {UnknownPartition} when the topic is not tiered, or neither a directory nor a journal exists
 * @throws {PartitionRebuilding} while the agent opens or rebuilds the partition's state
 */
export async function loadCatalog(
  ctx: ReadContext,
  id: PartitionId,
  options: { pending?: "throw" | "ignore"; keepView?: boolean } = {},
): Promise<Catalog> {
  const label = partitionLabel(id);
  if (!tieredTopic(ctx.config, id)) {
    throw new UnknownPartition(label, "its topic is not tiered (no [[topic]] entry)");
  }
  const pending = options.pending === "ignore" ? undefined : ctx.states.pending?.(id);
  if (pending !== undefined) throw new PartitionRebuilding(label, pending);
  const dir = join(ctx.config.agent.data_dir, partitionRelPath(id));
  const dirStat = statNowOrUndefined(dir);
  let state = await ctx.states.state(id);
  if (!dirStat?.isDirectory() && !state) {
    throw new UnknownPartition(label, "no partition directory and no journal");
  }
  if (
    dirStat && state?.incarnation !== undefined &&
    (state.device !== dirStat.dev || state.inode !== dirStat.ino)
  ) {
    state = undefined;
  }
  if (!dirStat?.isDirectory()) ctx.listings.forget(dir);
  const local = dirStat?.isDirectory()
    ? await ctx.listings.list(dir, dirStat, ctx.config.agent.seal_quiescence)
      .catch((err: NodeJS.ErrnoException) => {
        if (err.code === "ENOENT") return [];
        throw err;
      })
    : [];
  // A directory the journal cannot describe was recreated or purged behind the agent's back
  // (the same inode is no proof): nothing is answered from the old journal until the agent has
  // settled it — its watch wakes a pass at once.
  const contradiction = state && options.pending !== "ignore"
    ? directoryContradicts(local, state)
    : undefined;
  if (contradiction) {
    throw new PartitionRebuilding(
      label,
      `the broker's directory no longer fits its journal (${contradiction.reason}): the topic ` +
        "was recreated or purged; the agent settles it at its next pass",
      1,
    );
  }
  // The broker keeps an active segment in every partition it has: a directory without one is
  // being deleted or created, and the journal's copies may be a deleted topic's.
  if (state && dirStat?.isDirectory() && local.length === 0 && options.pending !== "ignore") {
    throw new PartitionRebuilding(
      label,
      "the broker's directory holds no segment: the broker is deleting or creating the " +
        "partition",
      1,
    );
  }
  if (ctx.births && options.pending !== "ignore") {
    await ctx.births.check(id, label, {
      journal: state?.incarnation !== undefined
        ? `${incarnationHex(state.incarnation)}-${state.generation}`
        : undefined,
      hasCopies: state !== undefined && remoteView(ctx, id, state).segments.length > 0,
      localMtimesMs: local.map((s) => s.mtimeMs),
    });
  }
  return {
    id,
    label,
    dir,
    dirIdentity: dirStat ? `${dirStat.dev}:${dirStat.ino}` : undefined,
    state,
    entries: mergeEntries(ctx, id, local, state, options.keepView ?? true),
  };
}

/**
 * What a journal state contributes to a catalog: its remote copies as entries sorted by start
 * (each ending where its copy ends, so it needs nothing from its neighbours), and the ranges it
 * lost. Built once per state object — a published state is never changed, the agent publishes a
 * new one — and shared by every catalog of that state, so a read of a partition with thousands of
 * copies costs its few local segments, not a pass over every copy (1.7 ms a read at 1,000
 * copies, 18 ms at 10,000, before). Nothing reads an entry to change it.
 */
interface RemoteView {
  segments: readonly CatalogSegment[];
  /** LOST_BEFORE_UPLOAD and HOLE records, in start order. */
  lost: readonly SegmentRecord[];
}

/** What every copy of one view shares. */
interface ViewScope {
  location: RemoteLocation;
  /** The position's partition (incarnation and generation included). */
  partition: string;
  /** The generation's records (a published state's table is never changed). */
  records: ReadonlyMap<bigint, SegmentRecord>;
}

/**
 * A copy in a remote view. A view lives as long as its state, and a partition may hold 100,000
 * copies: their facts, keys and position are made when a read asks for them (the facts from the
 * state's compact table), so a copy costs this object and its entry, not a record's facts, two
 * key strings and three more objects: about 1 KB a segment, kept for every partition a scrape or
 * a read had touched.
 */
class ViewCopy implements RemoteCopy {
  readonly #scope: ViewScope;
  readonly #start: bigint;
  readonly #base: number;

  constructor(scope: ViewScope, start: bigint, base: number) {
    this.#scope = scope;
    this.#start = start;
    this.#base = base;
  }

  get meta(): SegmentFacts {
    return this.#scope.records.get(this.#start)!.meta!;
  }

  get keys(): { log: string; index: string } {
    return segmentKeys(this.#scope.location, this.#start);
  }

  get position(): { partition: string; base: number } {
    return { partition: this.#scope.partition, base: this.#base };
  }

  toJSON(): RemoteCopy {
    return { keys: this.keys, meta: this.meta, position: this.position };
  }
}

/** Views by state, then by the key space they were built for (`{prefix}\0{cluster_id}`). */
const remoteViews = new WeakMap<PartitionState, Map<string, RemoteView>>();

/**
 * The state's remote view, built once and kept with the state; with `keep` false, one not kept
 * yet is built for this call only.
 */
function remoteView(
  ctx: ReadContext,
  id: PartitionId,
  state: PartitionState,
  keep = true,
): RemoteView {
  const space = `${ctx.prefix}\0${ctx.config.agent.cluster_id}`;
  let byKeySpace = remoteViews.get(state);
  const kept = byKeySpace?.get(space);
  if (kept) return kept;
  const segments: CatalogSegment[] = [];
  const lost: SegmentRecord[] = [];
  if (state.incarnation !== undefined) {
    const scope: ViewScope = {
      location: {
        ...id,
        prefix: ctx.prefix,
        clusterId: ctx.config.agent.cluster_id,
        incarnation: state.incarnation,
        generation: state.generation,
      },
      partition: `${partitionLabel(id)}@${incarnationHex(state.incarnation)}-${state.generation}`,
      records: state.segments.get(state.generation) ?? new Map(),
    };
    let base = 0;
    for (const r of segmentsOf(state)) {
      if (r.state === "LOST_BEFORE_UPLOAD" || r.state === "HOLE") lost.push(r);
      const at = base;
      base += r.meta?.size ?? 0;
      if (r.state !== "COPY_SEGMENT_FINISHED") continue;
      segments.push({
        kind: "segment",
        start: r.start,
        end: r.meta.endOffset,
        active: false,
        remote: new ViewCopy(scope, r.start, at),
      });
    }
  }
  const view = { segments, lost };
  if (!keep) return view;
  if (!byKeySpace) remoteViews.set(state, byKeySpace = new Map());
  byKeySpace.set(space, view);
  return view;
}

/**
 * The catalog's entries: the broker's local segments and the state's remote copies merged by
 * start, then the gaps the state records that no segment covers, in offset order.
 * @param keep keep the state's remote view for later reads (see {@linkcode loadCatalog})
 */
export function mergeEntries(
  ctx: ReadContext,
  id: PartitionId,
  local: SegmentFiles[],
  state: PartitionState | undefined,
  keep = true,
): CatalogEntry[] {
  const view = state ? remoteView(ctx, id, state, keep) : undefined;
  const remote = view?.segments ?? [];
  const locals = [...local].sort(byStart);
  // Copies below the first local segment are taken as they are; from there on, the local
  // segments and the copies are merged (one entry per start, its files and its copy).
  const split = locals.length === 0 ? remote.length : firstAtOrAfter(remote, locals[0].start);
  const tail: CatalogSegment[] = [];
  const lastLocal = locals.at(-1);
  let r = split;
  for (const files of locals) {
    while (r < remote.length && remote[r].start < files.start) tail.push(remote[r++]);
    const copy = r < remote.length && remote[r].start === files.start ? remote[r++] : undefined;
    tail.push({
      kind: "segment",
      start: files.start,
      local: files,
      active: files === lastLocal,
      ...(copy && { remote: copy.remote, end: copy.end }),
    });
  }
  while (r < remote.length) tail.push(remote[r++]);
  // A local segment without a copy ends where the next segment starts (the last: open).
  tail.forEach((s, i) => {
    if (s.remote || s.end !== undefined) return;
    if (i + 1 < tail.length) s.end = tail[i + 1].start - 1n;
  });
  const sorted: CatalogSegment[] = split === 0 ? tail : [...remote.slice(0, split), ...tail];
  if (!view || view.lost.length === 0) return sorted;
  const present = (start: bigint) =>
    remote[firstAtOrAfter(remote, start)]?.start === start ||
    locals.some((f) => f.start === start);
  const gaps: CatalogGap[] = [];
  for (const rec of view.lost) {
    if (present(rec.start)) continue; // the segment reappeared; its bytes win
    const at = firstAfter(sorted, rec.start);
    const next = at < sorted.length ? sorted[at] : undefined;
    // A hole whose end nothing recorded still holds at least its first offset.
    const end = rec.lostEndOffset ??
      (next ? next.start - 1n : rec.state === "HOLE" ? rec.start : undefined);
    if (end === undefined || end < rec.start) continue;
    const why = rec.state === "HOLE"
      ? `a hole in the bucket: ${rec.holeReason ?? "no usable copy"}`
      : "deleted by the broker before it was copied";
    gaps.push({ kind: "gap", start: rec.start, end, why });
  }
  return gaps.length === 0 ? sorted : [...sorted, ...gaps].sort(byStart);
}

/** The index of the first entry of `sorted` starting at or after `start`. */
function firstAtOrAfter(sorted: readonly { start: bigint }[], start: bigint): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid].start < start) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The index of the first entry of `sorted` starting after `start`. */
function firstAfter(sorted: readonly { start: bigint }[], start: bigint): number {
  const i = firstAtOrAfter(sorted, start);
  return i < sorted.length && sorted[i].start === start ? i + 1 : i;
}

function byStart(a: { start: bigint }, b: { start: bigint }): number {
  return a.start < b.start ? -1 : a.start > b.start ? 1 : 0;
}

/**
 * The partition's segment format: the configured one, else detected from a local segment, else
 * read from a remote `.log` object's metadata. Cached per directory identity (or incarnation).
 *
 * @returns undefined when nothing tells yet (no local bytes and no remote copy)
 * @throws {SegmentCorrupt} when local segments match neither format
 * @throws {ReadError} when the store must be asked and fails
 */
export async function catalogFormat(
  ctx: ReadContext,
  catalog: Catalog,
  deadline: ReadDeadline,
): Promise<FormatName | undefined> {
  const configured = ctx.config.agent.format;
  if (configured !== "auto") return configured;
  const cacheKey = catalog.state?.incarnation !== undefined
    ? `incarnation:${catalog.state.incarnation}`
    : catalog.dirIdentity && `dir:${catalog.dirIdentity}`;
  const cached = cacheKey ? ctx.formats.get(cacheKey) : undefined;
  if (cached) return cached;
  let format: FormatName | undefined;
  for (const e of catalog.entries) {
    if (e.kind !== "segment" || !e.local || e.local.logSize === 0) continue;
    format = await detectFormat(e.local.logPath, e.local.indexPath).catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code === "ENOENT") return undefined; // removed by the broker meanwhile
        if (err instanceof FormatError) throw new SegmentCorrupt("local", err.file, err);
        throw err;
      },
    );
    if (format) break;
  }
  if (!format) {
    const remote = catalog.entries.find((e): e is CatalogSegment & { remote: RemoteCopy } =>
      e.kind === "segment" && e.remote !== undefined
    );
    if (remote) {
      const key = remote.remote.keys.log;
      // Cached when the HEAD completes, even after this read stopped waiting for it.
      const pending = ctx.store.head(key).then((head) => {
        const f = fromUserMetadata(key, head.metadata).format;
        if (cacheKey) ctx.formats.set(cacheKey, f);
        return f;
      });
      try {
        return await within(pending, deadline, key);
      } catch (err) {
        throw readFailure(err, key, remote.start);
      }
    }
  }
  if (format && cacheKey) ctx.formats.set(cacheKey, format);
  return format;
}
