// Booting after a clean stop: the markers the stop vouched for are not read before the partition
// opens, and its first pass reads them — damage done while the agent was down is still caught and
// quarantined, only later. Anything that makes the record's promise doubtful (the journal or the
// marker names changed, no first pass in the run that wrote it, a record already taken, a damaged
// record) means every marker is read at boot, as after a crash.
import assert from "node:assert/strict";
import { access, copyFile, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Clock } from "../../src/base/clock.ts";
import { SimStore } from "../../providers/sim/store.ts";
import type { Config } from "../../src/config/schema.ts";
import { appendMessages, generatePartition } from "../../src/format/generate.ts";
import { initHashes } from "../../src/hash.ts";
import { markerPaths, partitionStateDir } from "../../src/layout/state_paths.ts";
import { CLEAN_STOP_FILE } from "../../src/state/clean_stop.ts";
import { listMarkerNames } from "../../src/state/marker_dir.ts";
import { readMarker } from "../../src/state/marker.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import {
  capturingLogger,
  type LogLine,
  recordingObserver,
  scratchDir,
} from "../_model/tier_harness.ts";
import { testConfig } from "../_config.ts";
import { aheadClock } from "../_fake_clock.ts";

await initHashes();

const ID = { stream: 0, topic: 0, partition: 0 };

interface Rig {
  config: Config;
  stateDir: string;
  recordPath: string;
  logs: LogLine[];
  observer: ReturnType<typeof recordingObserver>;
  worker(): TierWorker;
  /** Flips a checksummed byte of the first marker in place (its name stays). */
  damageFirstMarker(): Promise<string>;
  cleanup(): Promise<void>;
}

/** A partition whose copied segments the first pass evicts (each with its marker). */
async function rig(): Promise<Rig> {
  const tmp = await scratchDir("tierd-clean-stop");
  const config = testConfig({ dir: tmp.path, backend: "sim", uploadTimeout: "2 s" });
  config.topic[0].local_retention_size = 0;
  await generatePartition({
    format: "iggy-0.9",
    dataDir: config.agent.data_dir,
    ...ID,
    messages: 600,
    segmentSize: 16 * 1024,
    payloadSize: 100,
  });
  const sim = new SimStore();
  const clock: Clock = aheadClock(1000);
  const { logger, lines } = capturingLogger();
  const observer = recordingObserver();
  const stateDir = partitionStateDir(config.agent.state_dir, ID);
  return {
    config,
    stateDir,
    recordPath: join(config.agent.state_dir, CLEAN_STOP_FILE),
    logs: lines,
    observer,
    worker: () =>
      new TierWorker({ config, store: sim, prefix: "iggy", logger, clock, observer, rng: () => 0 }),
    async damageFirstMarker() {
      const [name] = await listMarkerNames(stateDir);
      const path = join(stateDir, name);
      const bytes = await readFile(path);
      bytes[24] ^= 0x01; // the end offset, inside the checksummed bytes
      await writeFile(path, bytes);
      return path;
    },
    cleanup: tmp.cleanup,
  };
}

function quarantinedPaths(r: Rig): string[] {
  return r.observer.quarantined.map((q) => q.path);
}

function quarantinedReasons(r: Rig): string[] {
  return r.observer.quarantined.map((q) => q.reason);
}

/** A new worker reads every marker as it opens: the damaged one is quarantined before any pass. */
async function assertReadAtBoot(r: Rig, damaged: string): Promise<void> {
  const w = r.worker();
  try {
    await w.open();
    assert.equal(w.partitions[0].boot.markersUnread, 0);
    assert.deepEqual(quarantinedPaths(r), [damaged], "read at boot");
  } finally {
    await w.close();
  }
}

async function exists(path: string): Promise<boolean> {
  return await access(path).then(() => true, () => false);
}

/** One worker's first pass (markers read at boot: there is no record yet), then a clean stop. */
async function firstRunAndStop(r: Rig): Promise<number> {
  const w = r.worker();
  const report = await w.pass();
  assert.deepEqual(report.problems, []);
  assert.ok(report.evicted >= 2, `evicted ${report.evicted}`);
  await w.close();
  assert.ok(await exists(r.recordPath), "a clean stop writes the record");
  return (await listMarkerNames(r.stateDir)).length;
}

Deno.test("after a clean stop, boot reads no marker; the first pass reads them all and quarantines damage done while stopped", async () => {
  const r = await rig();
  try {
    const markers = await firstRunAndStop(r);
    const damaged = await r.damageFirstMarker();

    const w = r.worker();
    try {
      await w.open();
      assert.equal(await exists(r.recordPath), false, "the record is taken at boot");
      const [p] = w.partitions;
      assert.equal(p.boot.markersUnread, markers, "every marker trusted, none read");
      assert.equal(r.observer.unread, markers, "the gauge says how many wait");
      assert.deepEqual(quarantinedPaths(r), [], "the damaged marker was not read at boot");
      assert.ok(
        r.logs.some((l) =>
          l.msg.startsWith("markers trusted from the clean-stop record") && l.markers === markers
        ),
      );

      const report = await w.pass();
      assert.deepEqual(report.problems, []);
      assert.deepEqual(quarantinedPaths(r), [damaged]);
      assert.match(quarantinedReasons(r)[0], /checksum/);
      assert.equal(p.boot.markersUnread, 0);
      assert.equal(r.observer.unread, 0);
      assert.equal(p.boot.quarantined.length, 1, "the partition's health names it");
    } finally {
      await w.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("a journal other than the one the clean stop closed means every marker is read at boot", async () => {
  const r = await rig();
  try {
    await firstRunAndStop(r);
    const oldRecord = await readFile(r.recordPath);
    // More segments sealed, copied and evicted in a second run: a new journal, a new record.
    await appendMessages({
      format: "iggy-0.9",
      dataDir: r.config.agent.data_dir,
      ...ID,
      messages: 300,
      segmentSize: 16 * 1024,
      payloadSize: 100,
    });
    const w2 = r.worker();
    assert.deepEqual((await w2.pass()).problems, []);
    await w2.close();
    // The old record back (a restored backup of the state dir's root, say): it no longer fits.
    await writeFile(r.recordPath, oldRecord);
    const damaged = await r.damageFirstMarker();
    await assertReadAtBoot(r, damaged);
  } finally {
    await r.cleanup();
  }
});

Deno.test("a marker added after the clean stop means every marker is read at boot", async () => {
  const r = await rig();
  try {
    await firstRunAndStop(r);
    const [first] = await listMarkerNames(r.stateDir);
    // A copy under another segment's name: its start offset will not match its name.
    const stray = markerPaths(r.stateDir, 999_999n).marker;
    await copyFile(join(r.stateDir, first), stray);
    const w = r.worker();
    try {
      await w.open();
      assert.equal(w.partitions[0].boot.markersUnread, 0);
      assert.deepEqual(quarantinedPaths(r), [stray]);
      assert.match(quarantinedReasons(r)[0], /start offset/);
    } finally {
      await w.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("a run that never read the markers it trusted vouches for none: the next boot reads them", async () => {
  const r = await rig();
  try {
    await firstRunAndStop(r);
    const damaged = await r.damageFirstMarker();
    const w2 = r.worker();
    await w2.open(); // trusts the markers; stopped before its first pass read them
    assert.ok(w2.partitions[0].boot.markersUnread > 0);
    await w2.close();
    assert.equal(r.observer.unread, 0, "a closed partition's unread markers leave the gauge");
    assert.deepEqual(quarantinedPaths(r), []);
    await assertReadAtBoot(r, damaged);
  } finally {
    await r.cleanup();
  }
});

Deno.test("a boot that took the record and never stopped cleanly leaves none: the boot after reads every marker", async () => {
  const r = await rig();
  try {
    await firstRunAndStop(r);
    const w2 = r.worker();
    await w2.open();
    assert.deepEqual((await w2.pass()).problems, []);
    // The process dies here: no close, no new record. (The journal handle is closed below only
    // so the test leaks nothing; close() would write a record.)
    assert.equal(await exists(r.recordPath), false);
    const damaged = await r.damageFirstMarker();
    try {
      await assertReadAtBoot(r, damaged);
    } finally {
      for (const p of w2.partitions) await p.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("a damaged clean-stop record is said, removed, and every marker is read at boot", async () => {
  const r = await rig();
  try {
    await firstRunAndStop(r);
    const bytes = await readFile(r.recordPath);
    bytes[bytes.length - 3] ^= 0x01; // inside the checksum line
    await writeFile(r.recordPath, bytes);
    const damaged = await r.damageFirstMarker();
    const w = r.worker();
    try {
      await w.open();
      assert.equal(await exists(r.recordPath), false);
      const line = r.logs.find((l) => l.msg.startsWith("clean-stop record not usable"));
      assert.equal(line?.level, "warn");
      assert.deepEqual(quarantinedPaths(r), [damaged], "read at boot");
    } finally {
      await w.close();
    }
  } finally {
    await r.cleanup();
  }
});

Deno.test("a journal damaged after the clean stop is rebuilt from the bucket, its markers written again from it", async () => {
  const r = await rig();
  try {
    await firstRunAndStop(r);
    const journal = join(r.stateDir, "journal");
    const bytes = await readFile(journal);
    bytes[Math.floor(bytes.length / 2)] ^= 0xff; // inside a record: damage, not a torn tail
    await writeFile(journal, bytes);
    const damaged = await r.damageFirstMarker();
    const w = r.worker();
    try {
      await w.open();
      const [p] = w.partitions;
      assert.ok(p.boot.damage, "the journal is named damaged");
      assert.equal(p.boot.incarnation.kind, "rebuilt", "rebuilt from the bucket");
      assert.equal(p.boot.markersUnread, 0, "nothing trusted from the record");
      // The rebuild wrote every evicted segment's marker again from the bucket: the one damaged
      // in place is whole again, of the rebuilt incarnation, and nothing needed quarantining.
      const marker = await readMarker(damaged);
      assert.equal(marker.incarnation, p.state.incarnation);
      assert.deepEqual(quarantinedPaths(r), []);
    } finally {
      await w.close();
    }
  } finally {
    await r.cleanup();
  }
});
