// A damaged sealed segment (issue 11, item 2): found by the pre-upload scan, it is kept, reported
// with its file and byte position (pass outcome, rate-limited error line, metric), never
// uploaded and never evicted; the floor stops before it, the segments before it are copied and
// evicted as usual, other partitions carry on, and it is copied once its file is repaired.
import assert from "node:assert/strict";
import { readFile, utimes, writeFile } from "node:fs/promises";
import type { FormatName } from "../../src/format/types.ts";
import { generatePartition } from "../../src/format/generate.ts";
import { silentLogger } from "../../src/log.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics } from "../../src/metrics/tierd.ts";
import { tierObserver } from "../../src/metrics/observers.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { getSegment } from "../../src/state/segment_state.ts";
import { UnlinkEvictor } from "../../src/tier/evictor.ts";
import { copyPhase } from "../../src/tier/phases/copy.ts";
import { evictPhase } from "../../src/tier/phases/evict.ts";
import { advanceFloor } from "../../src/tier/phases/floor.ts";
import { DAMAGE_LOG_INTERVAL_MS, SegmentDamage } from "../../src/tier/segment_damage.ts";
import { describeProblem } from "../../src/tier/problem.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import { DAMAGES, damageSegment } from "../format/_damage.ts";
import { testConfig } from "../_config.ts";
import { tempDir } from "../_util.ts";
import { type PhaseRig, phaseRig } from "./_phase_rig.ts";

const FORMATS: readonly FormatName[] = ["iggy-0.8", "iggy-0.9"];
const DAMAGED = "sealed segment is damaged: not copied, not evicted, later segments wait";

async function copy(r: PhaseRig, damage: SegmentDamage) {
  return await copyPhase(r.ctx, r.ledger, {
    segments: await r.local(),
    format: r.format,
    reportedGaps: new Set(),
    damage,
  });
}

/** Object keys in the store of segment `start`. */
function inStore(r: PhaseRig, start: bigint): string[] {
  const keys = Object.values(r.ledger.keys(start));
  return [...r.sim.objects.keys()].filter((k) => keys.includes(k));
}

async function exists(path: string): Promise<boolean> {
  return await readFile(path).then(() => true, () => false);
}

for (const format of FORMATS) {
  for (const damage of DAMAGES) {
    Deno.test(`${format}, ${damage}: kept, reported with file and byte, never uploaded or evicted; the floor stops before it`, async () => {
      const r = await phaseRig({ format });
      try {
        const [s0, victim, s2] = r.segments;
        assert.ok(r.segments.length >= 4, "a sealed segment after the damaged one");
        const site = await damageSegment(victim, format, damage);
        const registry = new SegmentDamage();
        const out = await copy(r, registry);

        // Reported: the outcome, with the file and the byte, and one error line saying so.
        assert.equal(out.copied, 1, "the segment before it is copied");
        assert.equal(out.failed, 0, "nothing was sent, so nothing failed");
        assert.deepEqual(
          out.damaged.map((d) => ({
            segment: d.segment,
            code: d.code,
            file: d.file,
            position: d.position,
          })),
          [{ segment: victim.startOffset, ...site }],
        );
        assert.deepEqual(out.problems.map((p) => [p.kind, p.segment]), [
          ["segment_damaged", victim.startOffset],
        ]);
        const words = describeProblem(out.problems[0]);
        assert.ok(words.startsWith(`${site.file} @ byte ${site.position}: `), words);
        const lines = r.logged(DAMAGED);
        assert.equal(lines.length, 1);
        assert.equal(lines[0].level, "error");
        assert.deepEqual([lines[0].file, lines[0].position], [site.file, site.position]);

        // Never uploaded as good: no record, no object; the later segment waits.
        assert.equal(getSegment(r.ledger.state, 0n, victim.startOffset), undefined);
        assert.deepEqual(inStore(r, victim.startOffset), []);
        assert.equal(getSegment(r.ledger.state, 0n, s2.startOffset), undefined);
        assert.equal(await advanceFloor(r.ctx, r.ledger), s0.endOffset, "floor stops before it");

        // Never evicted, even when local retention wants everything gone.
        const ev = await evictPhase(r.ctx, r.ledger, {
          dir: r.dir,
          segments: await r.local(),
          format,
          topic: { ...r.topic, local_retention_size: 0 },
          evictor: new UnlinkEvictor(),
        });
        assert.equal(ev.evicted, 1, "the copied segment before it goes");
        assert.equal(await exists(s0.logPath), false);
        assert.equal(await exists(victim.logPath), true, "the damaged one stays");
        assert.equal(await exists(victim.indexPath), true);
        assert.equal(await exists(s2.logPath), true);
      } finally {
        await r.cleanup();
      }
    });
  }

  Deno.test(`${format}: a damaged segment is reported on every pass, its line rate-limited, until its file is repaired`, async () => {
    const r = await phaseRig({ format });
    try {
      const victim = r.segments[1];
      const good = { log: await readFile(victim.logPath), index: await readFile(victim.indexPath) };
      await damageSegment(victim, format, "flipped payload bit");
      const registry = new SegmentDamage();
      await copy(r, registry);
      const since = registry.list()[0].since;

      // Passes after it: still reported, the line not repeated within the interval.
      r.clock.advance(DAMAGE_LOG_INTERVAL_MS - 1);
      const again = await copy(r, registry);
      assert.equal(again.damaged.length, 1);
      assert.equal(again.damaged[0].since, since, "the same damage, since the first pass");
      assert.equal(again.problems.length, 1);
      assert.equal(r.logged(DAMAGED).length, 1, "rate-limited");
      r.clock.advance(1);
      await copy(r, registry);
      assert.equal(r.logged(DAMAGED).length, 2, "repeated after the interval");
      assert.equal(r.sim.objects.has(r.ledger.keys(victim.startOffset).log), false);

      // Repaired (the operator restores the file): verified again, copied, no longer reported.
      await writeFile(victim.logPath, good.log);
      await writeFile(victim.indexPath, good.index);
      const later = new Date(r.clock.now() - 60_000);
      await utimes(victim.logPath, later, later);
      const fixed = await copy(r, registry);
      assert.deepEqual(fixed.problems, []);
      assert.deepEqual(fixed.damaged, []);
      assert.equal(fixed.copied, r.segments.length - 2, "it and every sealed one after it");
      assert.deepEqual(registry.list(), []);
      assert.equal(r.logged("a segment reported damaged now verifies; copying it").length, 1);
      assert.equal(
        getSegment(r.ledger.state, 0n, victim.startOffset)?.state,
        "COPY_SEGMENT_FINISHED",
      );
    } finally {
      await r.cleanup();
    }
  });
}

Deno.test("a damaged segment in one partition: the others are tiered in full; the gauge and the pass report say which", async () => {
  const tmp = await tempDir("tierd-damaged");
  try {
    const config = testConfig({ dir: tmp.path, backend: "sim", format: "iggy-0.9" });
    const gen = {
      format: "iggy-0.9" as const,
      dataDir: config.agent.data_dir,
      stream: 0,
      topic: 0,
      messages: 400,
      segmentSize: 16 * 1024,
      payloadSize: 100,
    };
    const bad = await generatePartition({ ...gen, partition: 0 });
    const ok = await generatePartition({ ...gen, partition: 1 });
    const site = await damageSegment(bad[1], "iggy-0.9", "one message more than it holds");
    const metrics = createTierdMetrics(new Registry());
    const worker = new TierWorker({
      config,
      store: new SimStore(),
      prefix: "iggy",
      logger: silentLogger,
      observer: tierObserver(metrics),
    });
    try {
      for (let pass = 0; pass < 2; pass++) {
        const report = await worker.pass();
        const [p0, p1] = report.partitions;
        assert.equal(p0.partition, "0/0/0");
        assert.deepEqual(
          p0.damaged.map((d) => [d.segment, d.file, d.position]),
          [[bad[1].startOffset, site.file, site.position]],
        );
        assert.equal(p0.floor, bad[0].endOffset);
        assert.ok(
          p0.problems.map(describeProblem).some((e) =>
            e.includes(`${site.file} @ byte ${site.position}`)
          ),
        );
        assert.deepEqual(p1.damaged, []);
        assert.deepEqual(p1.problems, []);
        assert.equal(p1.floor, ok.at(-2)!.endOffset, "the other partition is tiered in full");
        const gauge = (partition: number) =>
          metrics.segmentsDamaged.value({ stream: 0, topic: 0, partition });
        assert.equal(gauge(0), 1);
        assert.equal(gauge(1), 0);
      }
    } finally {
      await worker.close();
    }
  } finally {
    await tmp.cleanup();
  }
});
