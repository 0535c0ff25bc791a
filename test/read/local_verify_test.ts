// Local reads of sealed segments verify record checksums (issue 11, item 2): damaged local bytes
// are never served as good — a segment with a verified copy is read from the copy, one without
// fails naming the file — while the active segment, which may be mid-write, is checked for
// structure only.
import assert from "node:assert/strict";
import { partitionDir } from "../../src/format/generate.ts";
import { listSegments } from "../../src/partition/segments.ts";
import { SegmentCorrupt } from "../../src/read/errors.ts";
import { readRecords } from "../../src/read/read_records.ts";
import { damageSegment, recordsOf } from "../format/_damage.ts";
import { buildScenario, expectedRead, type Scenario } from "./_scenario.ts";
import { systemClock } from "../../src/base/clock.ts";
import { SETTLE_MS } from "../../src/read/verified_logs.ts";

const FORMATS = ["iggy-0.8", "iggy-0.9"] as const;

/** The wall clock moved on past SETTLE_MS: files written now count as settled. */
const later = { ...systemClock, now: () => systemClock.now() + SETTLE_MS + 1_000 };

async function localSegments(s: Scenario) {
  return await listSegments(partitionDir(s.config.agent.data_dir, s.ids), {
    now: Date.now(),
    quiescenceMs: 0,
  });
}

/**
 * Runs `fn` over a partition of small segments: `copied` messages' worth copied to the store (none
 * evicted), then `more` messages only local.
 */
async function withSegments(
  format: (typeof FORMATS)[number],
  o: { copied: number; more: number },
  fn: (s: Scenario) => Promise<void>,
): Promise<void> {
  const s = await buildScenario({
    format,
    before: o.copied,
    after: o.more,
    segmentSize: 1024,
    payloadSize: 64,
    evict: 0,
  });
  try {
    await fn(s);
  } finally {
    await s.cleanup();
  }
}

for (const format of FORMATS) {
  Deno.test(`${format}: a sealed local segment with a flipped bit is read from its verified copy`, () =>
    withSegments(format, { copied: 40, more: 0 }, async (s) => {
      const [seg] = await localSegments(s);
      assert.ok(s.copied.includes(seg.start));
      await damageSegment({ ...seg, startOffset: seg.start }, format, "flipped payload bit");
      const start = { offset: seg.start };
      const r = await readRecords(s.context(), { partition: s.ids, ...start, maxBytes: 1 << 20 });
      const want = expectedRead(s.records, start, 1 << 20)!;
      assert.equal(r.source, "mixed", "the copy for the damaged segment, local bytes after it");
      assert.deepEqual(r.bytes, want.bytes, "the good bytes, from the copy");
    }));

  Deno.test(`${format}: a sealed local segment without a copy fails its read, naming the file`, () =>
    withSegments(format, { copied: 0, more: 40 }, async (s) => {
      const segs = await localSegments(s);
      assert.ok(segs.length >= 2 && segs[0].sealed);
      const seg = segs[0];
      await damageSegment({ ...seg, startOffset: seg.start }, format, "flipped payload bit");
      await assert.rejects(
        readRecords(s.context(), { partition: s.ids, offset: seg.start, maxBytes: 1 << 20 }),
        (err: unknown) =>
          err instanceof SegmentCorrupt && err.code === "local_data_corrupt" &&
          err.file === seg.logPath && /checksum/.test(err.message),
      );
    }));

  Deno.test(`${format}: the active segment is checked for structure only (it may be mid-write)`, () =>
    withSegments(format, { copied: 0, more: 45 }, async (s) => {
      const active = (await localSegments(s)).at(-1)!;
      assert.equal(active.sealed, false);
      const seg = { ...active, startOffset: active.start };
      assert.ok((await recordsOf(seg, format)).length >= 1, "a record to damage");
      await damageSegment(seg, format, "flipped payload bit");
      const r = await readRecords(s.context(), {
        partition: s.ids,
        offset: active.start,
        maxBytes: 1 << 20,
      });
      assert.equal(r.source, "local");
      assert.equal(r.firstOffset, active.start);
    }));

  Deno.test(`${format}: a settled sealed segment is verified once, then served without hashing it again`, () =>
    withSegments(format, { copied: 0, more: 40 }, async (s) => {
      const [seg] = await localSegments(s);
      assert.ok(seg.sealed);
      const ctx = s.context({ clock: later });
      const start = { offset: seg.start };
      const want = expectedRead(s.records, start, 1 << 20)!;
      const first = await readRecords(ctx, { partition: s.ids, ...start, maxBytes: 1 << 20 });
      assert.deepEqual(first.bytes, want.bytes);
      assert.ok(ctx.verifiedLogs.files >= 1, "the verified ranges are remembered");
      assert.equal(ctx.verifiedLogs.trustedBytes, 0, "the first read hashed everything");
      const again = await readRecords(ctx, { partition: s.ids, ...start, maxBytes: 1 << 20 });
      assert.deepEqual(again.bytes, want.bytes);
      const sealed = (await localSegments(s)).filter((f) => f.sealed);
      assert.equal(
        ctx.verifiedLogs.trustedBytes,
        sealed.reduce((sum, f) => sum + f.logSize, 0),
        "the second read took every sealed byte on trust",
      );
    }));

  Deno.test(`${format}: a sealed segment changed after it was verified is caught before it is served`, () =>
    withSegments(format, { copied: 40, more: 0 }, async (s) => {
      const [seg] = await localSegments(s);
      assert.ok(s.copied.includes(seg.start));
      const ctx = s.context({ clock: later });
      const start = { offset: seg.start };
      const want = expectedRead(s.records, start, 1 << 20)!;
      const first = await readRecords(ctx, { partition: s.ids, ...start, maxBytes: 1 << 20 });
      assert.equal(first.source, "local");
      assert.ok(ctx.verifiedLogs.files >= 1, "the first read's ranges are remembered");
      await damageSegment({ ...seg, startOffset: seg.start }, format, "flipped payload bit");
      const r = await readRecords(ctx, { partition: s.ids, ...start, maxBytes: 1 << 20 });
      assert.equal(r.source, "mixed", "the copy for the damaged segment, local bytes after it");
      assert.deepEqual(r.bytes, want.bytes, "the good bytes, from the copy");
    }));

  Deno.test(`${format}: a segment written within SETTLE_MS is verified on every read`, () =>
    withSegments(format, { copied: 0, more: 40 }, async (s) => {
      const [seg] = await localSegments(s);
      const ctx = s.context();
      await readRecords(ctx, { partition: s.ids, offset: seg.start, maxBytes: 1 << 20 });
      assert.equal(ctx.verifiedLogs.files, 0, "nothing remembered of a file this fresh");
    }));
}
