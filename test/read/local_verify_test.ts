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

const FORMATS = ["iggy-0.8", "iggy-0.9"] as const;

async function localSegments(s: Scenario) {
  return await listSegments(partitionDir(s.config.agent.data_dir, s.ids), {
    now: Date.now(),
    quiescenceMs: 0,
  });
}

for (const format of FORMATS) {
  Deno.test(`${format}: a sealed local segment with a flipped bit is read from its verified copy`, async () => {
    const s = await buildScenario({
      format,
      before: 40,
      after: 0,
      segmentSize: 1024,
      payloadSize: 64,
      evict: 0,
    });
    try {
      const [seg] = await localSegments(s);
      assert.ok(s.copied.includes(seg.start));
      await damageSegment({ ...seg, startOffset: seg.start }, format, "flipped payload bit");
      const start = { offset: seg.start };
      const r = await readRecords(s.context(), { partition: s.ids, ...start, maxBytes: 1 << 20 });
      const want = expectedRead(s.records, start, 1 << 20)!;
      assert.equal(r.source, "mixed", "the copy for the damaged segment, local bytes after it");
      assert.deepEqual(r.bytes, want.bytes, "the good bytes, from the copy");
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a sealed local segment without a copy fails its read, naming the file`, async () => {
    const s = await buildScenario({
      format,
      before: 0,
      after: 40,
      segmentSize: 1024,
      payloadSize: 64,
      evict: 0,
    });
    try {
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
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: the active segment is checked for structure only (it may be mid-write)`, async () => {
    const s = await buildScenario({
      format,
      before: 0,
      after: 45,
      segmentSize: 1024,
      payloadSize: 64,
      evict: 0,
    });
    try {
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
    } finally {
      await s.cleanup();
    }
  });
}
