// The catalog merges the broker's local segments with the journal's remote copies and gaps. Its
// remote part is built once per journal state and shared by every read; a property test checks
// the merge against the plain per-read construction it replaced (every record visited on every
// read), over random listings and journals, and that repeated reads agree.
import assert from "node:assert/strict";
import fc from "fast-check";
import { parseConfig } from "../../src/config/load.ts";
import { incarnationHex, partitionLabel } from "../../src/layout/partition.ts";
import { segmentKeys } from "../../src/layout/object_keys.ts";
import type { SegmentFiles } from "../../src/partition/segments.ts";
import { type CatalogEntry, type CatalogSegment, mergeEntries } from "../../src/read/catalog.ts";
import { createReadContext, type ReadContext } from "../../src/read/context.ts";
import type { JournalEvent } from "../../src/state/events.ts";
import {
  fold,
  type PartitionState,
  type SegmentRecord,
  segmentsOf,
} from "../../src/state/segment_state.ts";
import { SimStore } from "../../providers/sim/store.ts";

const ID = { stream: 1, topic: 2, partition: 3 };
const SPAN = 100n;

function context(): ReadContext {
  const config = parseConfig(
    `[agent]\ndata_dir = "/nowhere/broker"\nstate_dir = "/nowhere/state"\n` +
      `[tiered_storage]\nenabled = true\nbackend = "fs"\n[tiered_storage.fs]\npath = "/nowhere/store"\n` +
      `[[topic]]\nstream = 1\ntopic = 2\n`,
    "/nowhere/tierd.toml",
    {},
  );
  return createReadContext({ config, store: new SimStore(), prefix: "tiered" });
}

/** The construction the shared view replaced: every record of the state, on every read. */
function reference(
  ctx: ReadContext,
  local: SegmentFiles[],
  state: PartitionState | undefined,
): CatalogEntry[] {
  const segments = new Map<bigint, CatalogSegment>();
  local.forEach((files, i) => {
    segments.set(files.start, {
      kind: "segment",
      start: files.start,
      local: files,
      active: i === local.length - 1,
    });
  });
  const lost: SegmentRecord[] = [];
  if (state?.incarnation !== undefined) {
    const loc = {
      ...ID,
      prefix: ctx.prefix,
      clusterId: ctx.config.agent.cluster_id,
      incarnation: state.incarnation,
      generation: state.generation,
    };
    const partition = `${partitionLabel(ID)}@${
      incarnationHex(state.incarnation)
    }-${state.generation}`;
    let base = 0;
    for (const r of segmentsOf(state)) {
      if (r.state === "LOST_BEFORE_UPLOAD" || r.state === "HOLE") lost.push(r);
      const position = { partition, base };
      base += r.meta?.size ?? 0;
      if (r.state !== "COPY_SEGMENT_FINISHED" || !r.meta) continue;
      const remote = { keys: segmentKeys(loc, r.start), meta: r.meta, position };
      const s = segments.get(r.start);
      if (s) s.remote = remote;
      else segments.set(r.start, { kind: "segment", start: r.start, active: false, remote });
    }
  }
  const byStart = (a: { start: bigint }, b: { start: bigint }) =>
    a.start < b.start ? -1 : a.start > b.start ? 1 : 0;
  const sorted = [...segments.values()].sort(byStart);
  sorted.forEach((s, i) => {
    s.end = s.remote?.meta.endOffset ??
      (i + 1 < sorted.length ? sorted[i + 1].start - 1n : undefined);
  });
  const entries: CatalogEntry[] = [...sorted];
  for (const r of lost) {
    if (segments.has(r.start)) continue;
    const next = sorted.find((s) => s.start > r.start);
    const end = r.lostEndOffset ??
      (next ? next.start - 1n : r.state === "HOLE" ? r.start : undefined);
    if (end === undefined || end < r.start) continue;
    const why = r.state === "HOLE"
      ? `a hole in the bucket: ${r.holeReason ?? "no usable copy"}`
      : "deleted by the broker before it was copied";
    entries.push({ kind: "gap", start: r.start, end, why });
  }
  return entries.sort(byStart);
}

/** Entries as plain values: fields that are undefined count as absent. */
function plain(entries: CatalogEntry[]): unknown {
  return JSON.parse(JSON.stringify(entries, (_k, v) => typeof v === "bigint" ? `${v}n` : v));
}

type Fate = "finished" | "started" | "lost" | "lost_open" | "hole" | "hole_open" | "none";

const scenario = fc.record({
  fates: fc.array(
    fc.constantFrom<Fate>("finished", "finished", "started", "lost", "lost_open", "hole", "none"),
    { maxLength: 40 },
  ),
  /** Which segment numbers the broker still has files for. */
  local: fc.uniqueArray(fc.integer({ min: 0, max: 45 }), { maxLength: 12 }),
});

function stateOf(fates: Fate[]): PartitionState {
  const at = 1;
  const events: JournalEvent[] = [{
    type: "incarnation",
    incarnation: 0xabcdefn,
    device: 1,
    inode: 2,
    at,
  }];
  fates.forEach((fate, i) => {
    const segment = BigInt(i) * SPAN;
    const generation = 0n;
    if (fate === "finished" || fate === "started") {
      events.push({ type: "copy_started", segment, generation, at });
    }
    if (fate === "finished") {
      events.push({
        type: "copy_finished",
        segment,
        generation,
        endOffset: segment + SPAN - 1n,
        size: 1000 + i,
        indexSize: 16,
        startTimestamp: 1n,
        endTimestamp: 2n,
        maxTimestamp: 2n,
        checksum: BigInt(i + 1),
        at,
      });
    }
    if (fate === "lost" || fate === "lost_open") {
      events.push({
        type: "lost_before_upload",
        segment,
        generation,
        ...(fate === "lost" && { endOffset: segment + SPAN - 1n }),
        at,
      });
    }
    if (fate === "hole" || fate === "hole_open") {
      events.push({
        type: "hole",
        segment,
        generation,
        reason: `object ${i} missing`,
        ...(fate === "hole" && { endOffset: segment + SPAN - 1n }),
        at,
      });
    }
  });
  return fold(events);
}

function listing(numbers: number[]): SegmentFiles[] {
  return [...numbers].sort((a, b) => a - b).map((n) => ({
    start: BigInt(n) * SPAN,
    logPath: `/nowhere/${n}.log`,
    indexPath: `/nowhere/${n}.index`,
    logSize: 10 * n,
    indexSize: 16,
    mtimeMs: 0,
    sealed: true,
  }));
}

Deno.test("catalog: the merge with the shared remote view equals the per-read construction", () => {
  const ctx = context();
  fc.assert(
    fc.property(scenario, ({ fates, local }) => {
      const state = stateOf(fates);
      const files = listing(local);
      const want = plain(reference(ctx, files, state));
      assert.deepEqual(plain(mergeEntries(ctx, ID, files, state)), want);
      // A second read of the same state (the view is reused) answers the same.
      assert.deepEqual(plain(mergeEntries(ctx, ID, files, state)), want);
      // Without a journal: the local segments alone.
      assert.deepEqual(
        plain(mergeEntries(ctx, ID, files, undefined)),
        plain(reference(ctx, files, undefined)),
      );
    }),
    { numRuns: 300 },
  );
});

Deno.test("catalog: reads never change the entries another read was given", () => {
  const ctx = context();
  const state = stateOf(["finished", "finished", "finished", "lost", "finished"]);
  const first = mergeEntries(ctx, ID, listing([3, 4]), state);
  const before = plain(first);
  // Another read, with other local files: its local entries are its own.
  mergeEntries(ctx, ID, listing([4, 6, 7]), state);
  mergeEntries(ctx, ID, [], state);
  assert.deepEqual(plain(first), before);
});

Deno.test("catalog: a summary's catalog keeps no remote view; a read's view is shared by later ones", () => {
  const ctx = context();
  const state = stateOf(["finished", "finished", "lost", "finished"]);
  const summary = mergeEntries(ctx, ID, [], state, false);
  const again = mergeEntries(ctx, ID, [], state, false);
  assert.notEqual(summary[0], again[0], "built for each summary, kept by none");
  const read = mergeEntries(ctx, ID, [], state);
  assert.equal(mergeEntries(ctx, ID, [], state)[0], read[0], "a read's view is kept");
  assert.equal(mergeEntries(ctx, ID, [], state, false)[0], read[0], "and used by a summary");
  assert.deepEqual(plain(summary), plain(read));
});
