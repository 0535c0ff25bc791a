// Issue 10's damage table, the rows beyond the journal: a marker replaced by a directory; every
// marker deleted; the state dir deleted (MinIO, through the real `tierd run`); the broker dir
// copied to a new inode (MinIO, `cp -a` then swap); and the real recreate-topic case (the
// partition directory deleted and generated again with other bytes at the same offsets, on a
// disk that hands the old inode to the new directory). Each ends with every generated offset
// read back byte-identical through the HTTP API and nothing reported lost; the recreated topic
// with a new incarnation serving the new bytes.
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";

import { generatePartition } from "../../src/format/generate.ts";
import { incarnationHex } from "../../src/layout/partition.ts";
import { partitionRoot } from "../../src/layout/object_keys.ts";
import { readMarker } from "../../src/state/marker.ts";
import { segmentsOf } from "../../src/state/segment_state.ts";
import { minioAvailable, startMinioReady } from "../fixtures/_agent.ts";
import {
  assertEverythingReadable,
  bootAgent,
  concat,
  damagedJournals,
  journalState,
  KiB,
  logged,
  partitionEntry,
  readLogs,
  type RecoveryRig,
  recoveryRig,
  replaceByDirectory,
  runAgent,
} from "./_recovery.ts";

async function markerNames(rig: RecoveryRig): Promise<string[]> {
  return (await readdir(rig.stateDir)).filter((n) => n.endsWith(".remote")).sort();
}

function hexOf(incarnation: bigint | undefined): string {
  return incarnationHex(incarnation!);
}

Deno.test("a marker replaced by a directory (iggy-0.9): quarantined and said, nothing lost", async () => {
  const rig = await recoveryRig({ format: "iggy-0.9", store: { kind: "fs" } });
  try {
    const before = await journalState(rig);
    const name = (await markerNames(rig))[1];
    const path = join(rig.stateDir, name);
    await replaceByDirectory(path);
    const agent = await bootAgent(rig);
    try {
      assert.deepEqual(agent.report.problems, []);
      const lines = logged(agent.lines, "warn", /marker quarantined/);
      assert.equal(lines.length, 1, JSON.stringify(agent.lines));
      assert.equal(lines[0].path, path);
      assert.match(String(lines[0].reason), /is a directory, not a marker/);
      const moved = String(lines[0].moved_to);
      assert.ok((await Deno.stat(moved)).isDirectory, "kept in quarantine/, as it was");
      const p = await partitionEntry(agent.api, rig.id);
      assert.equal(p.state, "ok");
      assert.match(p.state_detail ?? "", /1 marker\(s\) quarantined: .*is a directory/);
      assert.ok(p.state_detail!.includes(path), p.state_detail!);
      assert.equal(p.incarnation, hexOf(before.incarnation), "the same partition");
      assert.match(
        await (await agent.api("/metrics")).text(),
        /^tierd_markers_quarantined_total 1$/m,
      );
      await assertEverythingReadable(rig, agent.api);
    } finally {
      await agent.close();
    }
  } finally {
    await rig.cleanup();
  }
});

Deno.test("every marker deleted (iggy-0.8): the journal still knows, nothing lost", async () => {
  const rig = await recoveryRig({ format: "iggy-0.8", store: { kind: "fs" } });
  try {
    const before = await journalState(rig);
    const names = await markerNames(rig);
    assert.equal(names.length, rig.evicted.length);
    for (const n of names) await rm(join(rig.stateDir, n));
    const agent = await bootAgent(rig);
    try {
      assert.deepEqual(agent.report.problems, []);
      assert.deepEqual(logged(agent.lines, "error", /./), []);
      const p = await partitionEntry(agent.api, rig.id);
      assert.equal(p.state, "ok");
      assert.equal(p.incarnation, hexOf(before.incarnation));
      assert.deepEqual(p.segments, {
        local: rig.logs.size - rig.evicted.length,
        uploaded: rig.logs.size - rig.evicted.length - 1,
        remote: rig.evicted.length,
        dangling: 0,
      });
      await assertEverythingReadable(rig, agent.api);
    } finally {
      await agent.close();
    }
  } finally {
    await rig.cleanup();
  }
});

/**
 * How the topic is deleted and recreated: the directory removed and made again (ext4 may or may
 * not hand it the old inode), or — the same inode for sure, as ext4 often gives it — its files
 * deleted and written again in place.
 */
const RECREATES: { name: string; recreate: (rig: RecoveryRig) => Promise<void> }[] = [
  {
    name: "the directory deleted and made again",
    recreate: (rig) => rm(rig.dir, { recursive: true }),
  },
  {
    name: "under the same inode",
    recreate: async (rig) => {
      for (const n of await readdir(rig.dir)) await rm(join(rig.dir, n), { recursive: true });
    },
  },
];

for (const { name, recreate } of RECREATES) {
  Deno.test(`the recreate-topic case (iggy-0.9), ${name}: other bytes at the same offsets → a new incarnation serving the new bytes`, async () => {
    // On the system temp disk (ext4 here), as a broker's data dir would be.
    const rig = await recoveryRig({ format: "iggy-0.9", store: { kind: "fs" }, onDisk: true });
    try {
      const before = await journalState(rig);
      const oldInode = (await Deno.stat(rig.dir)).ino;
      await recreate(rig);
      await generatePartition({
        format: rig.format,
        dataDir: rig.config.agent.data_dir,
        ...rig.id,
        messages: 1200,
        segmentSize: 16 * KiB,
        payloadSize: 100,
        seed: 7,
      });
      const fresh = await readLogs(rig.dir);
      assert.deepEqual([...fresh.keys()], [...rig.logs.keys()], "the same offsets");
      assert.ok(
        [...fresh].some(([start, bytes]) => !equal(bytes, rig.logs.get(start)!)),
        "other bytes",
      );
      if (name === "under the same inode") assert.equal((await Deno.stat(rig.dir)).ino, oldInode);
      const agent = await bootAgent(rig);
      try {
        assert.deepEqual(agent.report.problems, []);
        assert.equal(agent.report.lost, 0);
        const line = logged(agent.lines, "warn", /recreated: new incarnation/);
        assert.equal(line.length, 1, JSON.stringify(agent.lines));
        assert.match(String(line[0].evidence), /the local bytes differ from the journal's copy/);
        const after = await journalState(rig);
        assert.notEqual(after.incarnation, before.incarnation);
        const p = await partitionEntry(agent.api, rig.id);
        assert.equal(p.incarnation, hexOf(after.incarnation));
        // The log names incarnations as keys and /v1/partitions do (16 hex digits).
        assert.equal(line[0].incarnation, p.incarnation);
        assert.equal(line[0].old_incarnation, hexOf(before.incarnation));
        assert.equal(p.state, "ok");
        assert.match(
          p.state_detail ?? "",
          /new incarnation: recreated: segment \d+: the local bytes/,
        );
        // The old partition's markers are not this one's: moved aside.
        assert.equal(logged(agent.lines, "warn", /marker quarantined/).length, rig.evicted.length);
        // The new bytes were copied and evicted under the new incarnation.
        assert.equal(agent.report.copied, fresh.size - 1);
        assert.ok(segmentsOf(after).filter((r) => r.evicted).length >= fresh.size - 3);
        await assertEverythingReadable(rig, agent.api, concat([...fresh.values()]));
        // The old incarnation's objects wait for the orphan sweep; none was touched.
        const root = partitionRoot({ ...rig.id, prefix: rig.prefix, clusterId: "local" });
        const oldObjects = (await listBounded(rig.store, root)).filter((o) =>
          o.key.startsWith(`${root}${hexOf(before.incarnation)}-0/`)
        );
        assert.equal(oldObjects.length, 2 * (rig.logs.size - 1));
      } finally {
        await agent.close();
      }
    } finally {
      await rig.cleanup();
    }
  });
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

if (await minioAvailable("recovery rows against MinIO")) {
  Deno.test("against MinIO: the state dir deleted (real `tierd run`), the broker dir copied to a new inode", async (t) => {
    const minio = (await startMinioReady())!;
    try {
      await t.step(
        "the state dir deleted (iggy-0.9, `tierd run`): rebuilt from the bucket",
        async () => {
          const rig = await recoveryRig({
            format: "iggy-0.9",
            store: { kind: "minio", minio },
            prefix: "statedir",
          });
          try {
            const before = await journalState(rig);
            await rm(rig.config.agent.state_dir, { recursive: true });
            const agent = await runAgent(rig);
            try {
              const lines = agent.process.lines;
              const rebuilt = logged(lines, "warn", /no journal for this partition: rebuilt/);
              assert.equal(rebuilt.length, 1, agent.process.output().slice(-3000));
              assert.equal(rebuilt[0].segments, rig.logs.size - 1);
              assert.equal(rebuilt[0].evicted, rig.evicted.length);
              assert.deepEqual(logged(lines, "error", /./), []);
              const p = await partitionEntry(agent.api, rig.id);
              assert.equal(p.state, "rebuilt");
              assert.match(
                p.state_detail ?? "",
                /no journal: rebuilt from the bucket \(\d+ segments\)/,
              );
              assert.equal(p.incarnation, hexOf(before.incarnation), "the bucket's incarnation");
              assert.equal(rebuilt[0].incarnation, p.incarnation, "named as in the keys");
              assert.deepEqual(await damagedJournals(rig), [], "nothing to keep aside");
              // Markers and kept index copies are back for every evicted segment.
              const markers = await markerNames(rig);
              assert.equal(markers.length, rig.evicted.length);
              for (const n of markers) {
                const m = await readMarker(join(rig.stateDir, n));
                assert.equal(m.incarnation, before.incarnation);
                await Deno.stat(join(rig.stateDir, n.replace(".remote", ".index")));
              }
              const metrics = await (await agent.api("/metrics")).text();
              assert.match(metrics, /^tierd_state_rebuilds_total 1$/m);
              await assertEverythingReadable(rig, agent.api);
            } finally {
              assert.equal((await agent.stop()).code, 0);
            }
          } finally {
            await rig.cleanup();
          }
        },
      );

      await t.step(
        "the broker dir copied to a new inode (iggy-0.8, cp -a then swap): same incarnation",
        async () => {
          const rig = await recoveryRig({
            format: "iggy-0.8",
            store: { kind: "minio", minio },
            prefix: "copied",
          });
          try {
            const before = await journalState(rig);
            const inode = (await Deno.stat(rig.dir)).ino;
            const sh =
              `cp -a "${rig.dir}" "${rig.dir}.new" && mv "${rig.dir}" "${rig.dir}.old" && ` +
              `mv "${rig.dir}.new" "${rig.dir}" && rm -rf "${rig.dir}.old"`;
            const cp = await new Deno.Command("sh", { args: ["-c", sh] }).output();
            assert.equal(cp.code, 0, new TextDecoder().decode(cp.stderr));
            assert.notEqual((await Deno.stat(rig.dir)).ino, inode, "a new inode");
            const agent = await bootAgent(rig);
            try {
              assert.deepEqual(agent.report.problems, []);
              const moved = logged(agent.lines, "info", /moved or restored: same incarnation/);
              assert.equal(moved.length, 1, JSON.stringify(agent.lines));
              assert.match(String(moved[0].evidence), /match byte for byte/);
              const p = await partitionEntry(agent.api, rig.id);
              assert.equal(p.state, "ok");
              assert.match(p.state_detail ?? "", /directory moved or restored, same incarnation/);
              assert.equal(p.incarnation, hexOf(before.incarnation));
              assert.equal(agent.report.copied, 0, "nothing copied again");
              const after = await journalState(rig);
              assert.equal(after.inode, (await Deno.stat(rig.dir)).ino, "the new inode recorded");
              await assertEverythingReadable(rig, agent.api);
            } finally {
              await agent.close();
            }
          } finally {
            await rig.cleanup();
          }
        },
      );
    } finally {
      await minio.stop();
    }
  });
}
