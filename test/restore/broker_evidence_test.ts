// The broker's bytes are evidence too. A restore (without data) onto a host whose broker
// directory survived records the segments it still holds as local, not evicted, and the agent
// then reads every offset; a directory holding other bytes is no evidence for the bucket's
// copies, which are then not restored there. A running agent that finds evicted segments back
// in the directory decides by their bytes: the same bytes are local again, other bytes are a
// recreated topic (a new incarnation, the old one retired).
import assert from "node:assert/strict";
import { copyFile, mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { systemClock } from "../../src/base/clock.ts";
import { FsStore } from "../../providers/fs/store.ts";
import { RetryingStore } from "../../providers/retrying_store.ts";
import { parseConfig } from "../../src/config/load.ts";
import { generatePartition, partitionDir } from "../../src/format/generate.ts";
import { initHashes } from "../../src/hash.ts";
import { silentLogger } from "../../src/log.ts";
import { createReadContext } from "../../src/read/context.ts";
import { readRecords } from "../../src/read/read_records.ts";
import { PartitionRebuilding } from "../../src/read/errors.ts";
import { partitionsToRestore, restore } from "../../src/restore/restore.ts";
import { getSegment, retiredOf, segmentsOf } from "../../src/state/segment_state.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import { testConfigText } from "../_config.ts";
import { scratchDir } from "../_model/tier_harness.ts";

const ID = { stream: 0, topic: 0, partition: 0 };

interface Host {
  root: string;
  config: ReturnType<typeof parseConfig>;
  dir: string;
}

function hostAt(root: string, store: string): Host {
  // Hosts of one test share one store ("bucket").
  const text = testConfigText({ dir: root }).replace(
    `path = "${root}/store"`,
    `path = "${store}"`,
  );
  const config = parseConfig(text, join(root, "tierd.toml"), {});
  return { root, config, dir: partitionDir(config.agent.data_dir, ID) };
}

async function generate(h: Host, seed: number) {
  await generatePartition({
    format: "iggy-0.9",
    dataDir: h.config.agent.data_dir,
    ...ID,
    messages: 400,
    segmentSize: 4096,
    payloadSize: 64,
    seed,
  });
}

/** One pass: every sealed segment copied, and evicted as far as the pass goes. */
async function tierAndEvict(h: Host): Promise<void> {
  h.config.topic[0].local_retention_size = 3 * 4096; // a few segments stay local

  const worker = new TierWorker({
    config: h.config,
    store: new FsStore({ root: h.config.tiered_storage.fs.path }),
    prefix: "iggy",
    logger: silentLogger,
  });
  try {
    const report = await worker.pass();
    assert.deepEqual(report.problems, []);
  } finally {
    await worker.close();
  }
}

function options(h: Host) {
  return {
    config: h.config,
    store: new RetryingStore(new FsStore({ root: h.config.tiered_storage.fs.path }), {
      clock: systemClock,
    }),
    keySpace: { prefix: "iggy", clusterId: "local" },
    clock: systemClock,
    logger: silentLogger,
    filter: () => true,
    withData: false,
  };
}

Deno.test("restore without data over a surviving broker directory: its segments stay local, every offset reads", async () => {
  await initHashes();
  const tmp = await scratchDir("tierd-restore-broker");
  try {
    const store = join(tmp.path, "store");
    const a = hostAt(join(tmp.path, "a"), store);
    await generate(a, 1);
    const everything = new Map<string, Uint8Array>();
    for (const n of await readdir(a.dir)) everything.set(n, await Deno.readFile(join(a.dir, n)));
    await tierAndEvict(a);
    const left = (await readdir(a.dir)).filter((n) => n.endsWith(".log"));
    const all = [...everything.keys()].filter((n) => n.endsWith(".log"));
    assert.ok(
      left.length >= 2 && left.length < all.length,
      `${left.length} of ${all.length} local`,
    );
    // The same host after its state dir was lost: the broker's directory is still there.
    await rm(a.config.agent.state_dir, { recursive: true });
    const o = options(a);
    const ids = await partitionsToRestore(o);
    const [r] = await restore(o, ids);
    assert.equal(r.outcome, "restored");
    const worker = new TierWorker({
      config: a.config,
      store: new FsStore({ root: store }),
      prefix: "iggy",
      logger: silentLogger,
    });
    try {
      await worker.open();
      const state = worker.partitions[0].state;
      for (const n of left) {
        const rec = getSegment(state, 0n, BigInt(n.slice(0, 20)));
        if (rec) assert.equal(rec.evicted, false, `${n} is local, not evicted`);
      }
      assert.ok(segmentsOf(state).some((r) => r.evicted), "the others are evicted");
      const ctx = createReadContext({
        config: a.config,
        store: new FsStore({ root: store }),
        prefix: "iggy",
        states: worker,
      });
      let offset = 0n;
      let reads = 0;
      for (;;) {
        const got = await readRecords(ctx, { partition: ID, offset, maxBytes: 1 << 20 }).catch(
          (err) => err,
        );
        if (got instanceof Error) {
          assert.equal(got.name, "OffsetPastEnd", `offset ${offset}: ${got.message}`);
          break;
        }
        assert.equal(got.gap, undefined);
        offset = got.nextOffset;
        reads++;
      }
      assert.ok(reads > 0 && offset >= 399n, `read up to ${offset}`);
    } finally {
      await worker.close();
    }
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("restore without data: a broker directory holding other bytes is no evidence for the bucket's copies", async () => {
  await initHashes();
  const tmp = await scratchDir("tierd-restore-other");
  try {
    const store = join(tmp.path, "store");
    const a = hostAt(join(tmp.path, "a"), store);
    await generate(a, 1);
    await tierAndEvict(a);
    // Another host whose broker has other bytes at the same offsets.
    const b = hostAt(join(tmp.path, "b"), store);
    await generate(b, 7);
    const o = options(b);
    const [r] = await restore(o, await partitionsToRestore(o));
    assert.equal(r.outcome, "nothing");
    assert.match(r.excluded.join("\n"), /the broker's directory .* holds other bytes/);
    assert.equal(r.segments, 0);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("a running agent finding evicted segments back: the same bytes are local again; other bytes are a recreated topic", async () => {
  await initHashes();
  const tmp = await scratchDir("tierd-reappeared");
  try {
    const store = join(tmp.path, "store");
    const a = hostAt(join(tmp.path, "a"), store);
    await generate(a, 1);
    const originals = join(tmp.path, "originals");
    await mkdir(originals);
    for (const n of await readdir(a.dir)) await copyFile(join(a.dir, n), join(originals, n));
    a.config.topic[0].local_retention_size = 0;
    const worker = new TierWorker({
      config: a.config,
      store: new FsStore({ root: store }),
      prefix: "iggy",
      logger: silentLogger,
    });
    try {
      await worker.pass();
      const evicted = segmentsOf(worker.partitions[0].state).filter((r) => r.evicted);
      assert.ok(evicted.length > 0);
      // An operator copies the first evicted segment back, byte for byte.
      a.config.topic[0].local_retention_size = Infinity;
      const stem = String(evicted[0].start).padStart(20, "0");
      for (const ext of [".log", ".index"]) {
        await copyFile(join(originals, stem + ext), join(a.dir, stem + ext));
      }
      const ctx = createReadContext({
        config: a.config,
        store: new FsStore({ root: store }),
        prefix: "iggy",
        states: worker,
      });
      // Until a pass settles it, reads say "retry", never guess.
      await assert.rejects(
        readRecords(ctx, { partition: ID, offset: evicted[0].start, maxBytes: 1 << 16 }),
        PartitionRebuilding,
      );
      await worker.pass();
      assert.equal(getSegment(worker.partitions[0].state, 0n, evicted[0].start)?.evicted, false);
      const back = await readRecords(ctx, {
        partition: ID,
        offset: evicted[0].start,
        maxBytes: 1,
      });
      assert.equal(back.source, "local");

      // Now the topic is recreated in place: other bytes from offset 0, rolled past the floor.
      const old = worker.partitions[0].state.incarnation!;
      for (const n of await readdir(a.dir)) await rm(join(a.dir, n));
      await generatePartition({
        format: "iggy-0.9",
        dataDir: a.config.agent.data_dir,
        ...ID,
        messages: 400,
        segmentSize: 4096,
        payloadSize: 64,
        seed: 9,
      });
      await worker.pass();
      const state = worker.partitions[0].state;
      assert.notEqual(state.incarnation, old, "a new incarnation");
      assert.deepEqual(retiredOf(state).map((r) => r.incarnation), [old], "the old one retired");
      const r = await readRecords(ctx, { partition: ID, offset: 0n, maxBytes: 1 << 16 });
      assert.equal(r.source, "local", "the new topic's own bytes");
    } finally {
      await worker.close();
    }
  } finally {
    await tmp.cleanup();
  }
});
