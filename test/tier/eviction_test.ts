// Local eviction and total retention on real files with the fs store.
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { FsStore } from "../../providers/fs/store.ts";

import { generatePartition } from "../../src/format/generate.ts";
import { initHashes, xxh3_64 } from "../../src/hash.ts";
import { silentLogger } from "../../src/log.ts";
import { readMarker } from "../../src/state/marker.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import { testConfig } from "../_config.ts";
import { tempDir } from "../_util.ts";

await initHashes();
const partDir = (broker: string) => join(broker, "streams/0/topics/0/partitions/0");

Deno.test("eviction removes a verified prefix, leaves markers, never the active segment", async () => {
  const tmp = await tempDir();
  try {
    const config = testConfig({
      dir: tmp.path,
      extra: "",
    });
    config.topic[0].local_retention_size = 200 * 1024; // keep ~200 KiB locally
    const segments = await generatePartition({
      format: "iggy-0.8",
      dataDir: config.agent.data_dir,
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 4000,
      segmentSize: 64 * 1024,
    });
    const originals = new Map<string, Uint8Array>();
    for (const s of segments) originals.set(s.logPath, new Uint8Array(await readFile(s.logPath)));
    const store = new FsStore({ root: config.tiered_storage.fs.path });
    const worker = new TierWorker({ config, store, prefix: "iggy", logger: silentLogger });
    const report = await worker.pass();
    assert.deepEqual(report.problems, []);
    assert.ok(report.evicted > 0 && report.evicted <= 16, `evicted ${report.evicted}`);
    const left = (await readdir(partDir(config.agent.data_dir))).filter((f) => f.endsWith(".log"));
    // The evicted set is a prefix and the active segment stays.
    const evicted = segments.filter((s) => !left.includes(s.logPath.split("/").at(-1)!));
    assert.deepEqual(evicted, segments.slice(0, evicted.length));
    assert.ok(left.includes(segments.at(-1)!.logPath.split("/").at(-1)!));
    // Every evicted segment has a valid marker and its bytes in the store.
    const stateDir = join(config.agent.state_dir, "streams/0/topics/0/partitions/0");
    const objects = await listBounded(store, "iggy/");
    for (const s of evicted) {
      const stem = s.logPath.split("/").at(-1)!.replace(".log", "");
      const marker = await readMarker(join(stateDir, `${stem}.remote`));
      assert.equal(marker.endOffset, s.endOffset);
      assert.equal(marker.size, BigInt(s.size));
      const obj = objects.find((o) => o.key.endsWith(`${stem}.log`))!;
      assert.deepEqual(new Uint8Array((await store.get(obj.key)).bytes), originals.get(s.logPath));
    }
    // A restart changes nothing that is already right.
    await worker.close();
    const again = new TierWorker({ config, store, prefix: "iggy", logger: silentLogger });
    const second = await again.pass();
    assert.deepEqual(second.problems, []);
    await again.close();
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("total retention deletes expired remote copies, never at or after a consumer offset", async () => {
  const tmp = await tempDir();
  try {
    const config = testConfig({ dir: tmp.path });
    config.topic[0].local_retention_size = 0; // evict everything copied
    config.topic[0].message_expiry = 1000; // generated timestamps are in 2025: all expired
    const segments = await generatePartition({
      format: "iggy-0.9",
      dataDir: config.agent.data_dir,
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 3000,
      segmentSize: 64 * 1024,
    });
    // A consumer stored offset inside the third segment (0.9 16-byte record).
    const barrier = segments[2].startOffset + 3n;
    const rec = new Uint8Array(16);
    const view = new DataView(rec.buffer);
    view.setBigUint64(0, barrier, true);
    view.setBigUint64(8, xxh3_64(rec.subarray(0, 8)), true);
    const offsets = join(partDir(config.agent.data_dir), "offsets/consumers");
    await mkdir(offsets, { recursive: true });
    await writeFile(join(offsets, "1"), rec);

    const store = new FsStore({ root: config.tiered_storage.fs.path });
    const worker = new TierWorker({ config, store, prefix: "iggy", logger: silentLogger });
    const report = await worker.pass();
    assert.deepEqual(report.problems, []);
    const keys = (await listBounded(store, "iggy/")).map((o) => o.key).filter((k) =>
      k.endsWith(".log")
    );
    // Segments ending before the barrier are gone remotely; the one holding it and later stay.
    for (const s of segments.slice(0, -1)) {
      const stem = s.logPath.split("/").at(-1)!;
      const present = keys.some((k) => k.endsWith(stem));
      assert.equal(present, s.endOffset >= barrier, `segment ${s.startOffset}`);
    }
    assert.equal(report.remoteDeleted, 2);
    await worker.close();
  } finally {
    await tmp.cleanup();
  }
});
