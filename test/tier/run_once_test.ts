// `run --once` semantics on real files and the fs store: byte-identical copies with the right
// metadata, idempotent passes, and a pass that fails part-way completed by the next one.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { FsStore } from "../../providers/fs/store.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import { type GeneratedSegment, generatePartition } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { hex128, initHashes, xxh3_128 } from "../../src/hash.ts";
import { silentLogger } from "../../src/log.ts";
import { decodeRecords } from "../../src/state/journal.ts";
import { fold, segmentsOf } from "../../src/state/segment_state.ts";
import { segmentKeys } from "../../src/layout/object_keys.ts";
import { fromUserMetadata } from "../../src/layout/object_metadata.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import type { Config } from "../../src/config/schema.ts";
import { testConfig } from "../_config.ts";
import { tempDir } from "../_util.ts";

await initHashes();

async function journalState(config: Config, s = 0, t = 0, p = 0) {
  const path = join(config.agent.state_dir, `streams/${s}/topics/${t}/partitions/${p}/journal`);
  return fold(decodeRecords(await readFile(path)).events);
}

/** Checks every sealed segment is in the store, byte for byte, with metadata that describes it. */
async function assertCopied(
  store: ObjectStore,
  config: Config,
  segments: GeneratedSegment[],
  format: FormatName,
) {
  const state = await journalState(config);
  const sealed = segments.slice(0, -1);
  assert.equal(state.floor, sealed.at(-1)!.endOffset, "floor is the last sealed segment's end");
  for (const seg of sealed) {
    const keys = segmentKeys({
      prefix: "iggy",
      clusterId: "local",
      stream: 0,
      topic: 0,
      partition: 0,
      incarnation: state.incarnation!,
      generation: 0n,
    }, seg.startOffset);
    const log = await readFile(seg.logPath);
    const index = await readFile(seg.indexPath);
    assert.deepEqual(
      new Uint8Array((await store.get(keys.log)).bytes),
      new Uint8Array(log),
      keys.log,
    );
    assert.deepEqual(
      new Uint8Array((await store.get(keys.index)).bytes),
      new Uint8Array(index),
      keys.index,
    );
    const meta = fromUserMetadata(keys.log, (await store.head(keys.log)).metadata);
    assert.equal(meta.endOffset, seg.endOffset);
    assert.equal(meta.size, log.length);
    assert.equal(meta.indexSize, index.length);
    assert.equal(meta.startTimestamp, seg.startTimestamp);
    assert.equal(meta.endTimestamp, seg.endTimestamp);
    assert.equal(meta.maxTimestamp, seg.maxTimestamp);
    assert.equal(meta.format, format);
    assert.equal(hex128(meta.checksum), hex128(xxh3_128(log)));
  }
  const active = segments.at(-1)!;
  assert.equal(
    segmentsOf(state).find((r) => r.start === active.startOffset),
    undefined,
    "the active segment is never copied",
  );
}

for (const format of ["iggy-0.8", "iggy-0.9"] as const) {
  Deno.test(`run --once copies every sealed ${format} segment byte for byte`, async () => {
    const tmp = await tempDir();
    try {
      const config = testConfig({ dir: tmp.path });
      const segments = await generatePartition({
        format,
        dataDir: config.agent.data_dir,
        stream: 0,
        topic: 0,
        partition: 0,
        messages: 3000,
        segmentSize: 128 * 1024,
        seed: 7,
      });
      assert.ok(segments.length >= 4);
      const store = new FsStore({ root: config.tiered_storage.fs.path });
      const worker = new TierWorker({ config, store, prefix: "iggy", logger: silentLogger });
      const first = await worker.pass();
      assert.deepEqual(first.problems, []);
      assert.equal(first.copied, segments.length - 1);
      await assertCopied(store, config, segments, format);
      // A second pass finds nothing to do.
      const second = await worker.pass();
      assert.equal(second.copied + second.adopted + second.failed, 0);
      await worker.close();
      // A fresh agent (a restart) also finds nothing to do.
      const restarted = new TierWorker({ config, store, prefix: "iggy", logger: silentLogger });
      const third = await restarted.pass();
      assert.equal(third.copied + third.adopted + third.failed, 0);
      await restarted.close();
    } finally {
      await tmp.cleanup();
    }
  });
}

/** Delegates to `inner` but fails every call after the first `okCalls` puts. */
function failingAfter(inner: ObjectStore, okCalls: number): ObjectStore & { heal(): void } {
  let puts = 0;
  let healed = false;
  const fail = () => {
    if (!healed && puts >= okCalls) {
      throw new StoreError("Transport", "connection reset (injected)", { op: "put" });
    }
  };
  return {
    kind: "flaky",
    heal: () => void (healed = true),
    put: async (k, b, o) => {
      fail();
      puts++;
      return await inner.put(k, b, o);
    },
    get: (k, o) => inner.get(k, o),
    head: async (k, o) => {
      fail();
      return await inner.head(k, o);
    },
    deleteMany: async (k, o) => {
      fail();
      return await inner.deleteMany(k, o);
    },
    list: (p, o) => inner.list(p, o),
    createMultipart: (k, o) => inner.createMultipart(k, o),
    putPart: (k, u, n, b, o) => inner.putPart(k, u, n, b, o),
    completeMultipart: (k, u, p, o) => inner.completeMultipart(k, u, p, o),
    abortMultipart: (k, u, o) => inner.abortMultipart(k, u, o),
    listMultipartUploads: (p, o) => inner.listMultipartUploads(p, o),
  };
}

Deno.test("a pass that fails part-way leaves the journal consistent; the next completes it", async () => {
  const tmp = await tempDir();
  try {
    const config = testConfig({ dir: tmp.path, backend: "sim" });
    const segments = await generatePartition({
      format: "iggy-0.9",
      dataDir: config.agent.data_dir,
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 2000,
      segmentSize: 64 * 1024,
    });
    const sim = new SimStore();
    // 3 puts succeed: segment 1 (log + index) and the log of segment 2, then the store fails.
    const flaky = failingAfter(sim, 3);
    const worker = new TierWorker({ config, store: flaky, prefix: "iggy", logger: silentLogger });
    const broken = await worker.pass();
    assert.equal(broken.copied, 1);
    assert.equal(broken.failed, 1);
    assert.ok(broken.problems.some((p) => p.kind === "copy" && p.storeFault));
    await worker.close();
    const mid = await journalState(config);
    assert.equal(mid.floor, segments[0].endOffset, "the floor covers only verified copies");
    assert.equal(segmentsOf(mid)[1].state, "DANGLING");

    // The store recovers; a restarted agent cleans the dangling copy and finishes the work.
    flaky.heal();
    const again = new TierWorker({ config, store: flaky, prefix: "iggy", logger: silentLogger });
    const done = await again.pass();
    assert.deepEqual(done.problems, []);
    await again.close();
    await assertCopied(sim, config, segments, "iggy-0.9");
    const after = await journalState(config);
    assert.ok(segmentsOf(after).every((r) => r.state === "COPY_SEGMENT_FINISHED"));
  } finally {
    await tmp.cleanup();
  }
});
