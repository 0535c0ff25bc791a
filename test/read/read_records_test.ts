// The read path's edge cases: gaps left by the broker's retention, offsets below retention,
// local files vanishing mid-read, corrupt or missing remote objects, a slow or unavailable store.
import assert from "node:assert/strict";
import type { ChunkSource, RangeReader } from "../../src/cache/types.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics } from "../../src/metrics/tierd.ts";
import { DirectRangeReader } from "../../src/read/direct_reader.ts";
import { IndexCache } from "../../src/read/index_cache.ts";
import type { SegmentIndex } from "../../src/read/segment_index.ts";
import {
  FetchTimeout,
  OffsetBelowRetention,
  OffsetPastEnd,
  RemoteObjectMissing,
  SegmentCorrupt,
  StoreUnavailable,
  UnknownPartition,
} from "../../src/read/errors.ts";
import { readRecords } from "../../src/read/read_records.ts";
import { segmentKeys } from "../../src/layout/object_keys.ts";
import {
  buildScenario,
  expectedRead,
  localStarts,
  loseFirstLocalSegment,
  removeSegment,
  type Scenario,
} from "./_scenario.ts";

const FORMATS = ["iggy-0.8", "iggy-0.9"] as const;

/** The remote keys of segment `start` in the scenario's (only) incarnation. */
async function keysOf(s: Scenario, start: bigint) {
  const state = (await s.context().states.state(s.ids))!;
  return segmentKeys({
    ...s.ids,
    prefix: "iggy",
    clusterId: "local",
    incarnation: state.incarnation!,
    generation: state.generation,
  }, start);
}

for (const format of FORMATS) {
  Deno.test(`${format}: a lost_before_upload gap is reported, never skipped`, async () => {
    // Copied segments are evicted, then the broker deletes the next (uncopied) one.
    const s = await buildScenario({
      format,
      before: 30,
      after: 40,
      segmentSize: 1024,
      payloadSize: 64,
      messagesPerBatch: 3,
      evict: 100,
    });
    try {
      const { from: lost, to: lostEnd } = await loseFirstLocalSegment(s);
      const lostRecords = s.records.filter((r) => r.segment === lost);
      const ctx = s.context();

      // A read that reaches the gap stops before it.
      const before = await readRecords(ctx, { partition: s.ids, offset: 0n, maxBytes: 1 << 20 });
      assert.equal(before.nextOffset, lost);
      assert.equal(before.gap, undefined);
      assert.equal(before.source, "remote");

      // A read inside the gap answers from the first offset after it, saying so.
      for (const offset of [lost, lostEnd]) {
        const r = await readRecords(ctx, { partition: s.ids, offset, maxBytes: 1 << 20 });
        assert.deepEqual(r.gap, { from: lost, to: lostEnd });
        assert.equal(r.firstOffset, lostEnd + 1n);
        const rest = s.records.filter((x) => x.segment !== lost);
        const expected = expectedRead(rest, { offset: lostEnd + 1n }, 1 << 20)!;
        assert.deepEqual(r.bytes, expected.bytes);
      }

      // A timestamp inside the lost segment's time range: the answer says the gap is there.
      const byTime = await readRecords(ctx, {
        partition: s.ids,
        timestamp: lostRecords[0].timestamp,
        maxBytes: 100,
      });
      assert.deepEqual(byTime.gap, { from: lost, to: lostEnd });
      assert.equal(byTime.firstOffset, lostEnd + 1n);
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: offsets below the first available one are below retention`, async () => {
    // No tier pass has recorded anything: the broker deleted the first segment.
    const s = await buildScenario({
      format,
      before: 0,
      after: 40,
      segmentSize: 1024,
      payloadSize: 64,
      evict: 0,
    });
    try {
      const first = (await localStarts(s))[0];
      await removeSegment(s, first);
      const second = (await localStarts(s))[0];
      const ctx = s.context();
      await assert.rejects(
        readRecords(ctx, { partition: s.ids, offset: 0n, maxBytes: 100 }),
        (err: unknown) => err instanceof OffsetBelowRetention && err.firstAvailable === second,
      );
      const r = await readRecords(ctx, { partition: s.ids, offset: second, maxBytes: 100 });
      assert.equal(r.firstOffset, second);
      await assert.rejects(
        readRecords(ctx, { partition: s.ids, offset: 1n << 40n, maxBytes: 100 }),
        (err: unknown) =>
          err instanceof OffsetPastEnd && err.nextOffset === s.records.at(-1)!.lastOffset + 1n,
      );
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a local file vanishing mid-read falls back to its remote copy`, async () => {
    const s = await buildScenario({
      format,
      before: 60,
      after: 0,
      segmentSize: 1024,
      payloadSize: 64,
      evict: 1,
    });
    try {
      assert.ok(s.copied.length >= 3);
      const doomed = s.copied[1]; // local and remote
      const direct = new DirectRangeReader(s.store);
      let deleted = false;
      // The broker's retention strikes while the first (remote) segment is being read.
      const reader: RangeReader = {
        async read(src: ChunkSource, start: number, length: number) {
          if (!deleted) {
            deleted = true;
            await removeSegment(s, doomed);
          }
          return await direct.read(src, start, length);
        },
      };
      const ctx = s.context({ reader });
      const r = await readRecords(ctx, { partition: s.ids, offset: 0n, maxBytes: 1 << 20 });
      assert.ok(deleted);
      const expected = expectedRead(s.records, { offset: 0n }, 1 << 20)!;
      assert.deepEqual(r.bytes, expected.bytes);
      assert.equal(r.nextOffset, expected.nextOffset);
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a vanished local-only segment is reported as a hole`, async () => {
    const s = await buildScenario({
      format,
      before: 0,
      after: 60,
      segmentSize: 1024,
      payloadSize: 64,
      evict: 0,
    });
    try {
      const starts = await localStarts(s);
      assert.ok(starts.length >= 4);
      const doomed = starts[1];
      let deleted = false;
      // The broker deletes the segment after the catalog listed it, while the walk is on the
      // segment before (looking up its index).
      class RacingIndexCache extends IndexCache {
        override async get(key: string, load: () => Promise<SegmentIndex>) {
          if (!deleted) {
            deleted = true;
            await removeSegment(s, doomed);
          }
          return await super.get(key, load);
        }
      }
      const first = await readRecords(s.context({ indexes: new RacingIndexCache() }), {
        partition: s.ids,
        offset: 0n,
        maxBytes: 1 << 20,
      });
      assert.ok(deleted);
      assert.equal(first.nextOffset, doomed, "the answer stops at the hole");
      assert.equal(first.gap, undefined);
      const next = await readRecords(s.context(), {
        partition: s.ids,
        offset: doomed,
        maxBytes: 100,
      });
      assert.deepEqual(next.gap, { from: doomed, to: starts[2] - 1n }, "the next read reports it");
      assert.equal(next.firstOffset, starts[2]);
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: corrupt bytes from the store fail the read and name the key`, async () => {
    const s = await buildScenario({
      format,
      before: 40,
      after: 0,
      segmentSize: 1024,
      payloadSize: 64,
      evict: 1,
    });
    try {
      const keys = await keysOf(s, 0n);
      const object = s.store.objects.get(keys.log)!;
      const bad = object.bytes.slice();
      bad[bad.length - 1] ^= 0xff; // inside the last payload: only checksums can tell
      await s.store.put(keys.log, bad, { metadata: { ...object.metadata } });
      await assert.rejects(
        readRecords(s.context(), { partition: s.ids, offset: 0n, maxBytes: 1 << 20 }),
        (err: unknown) =>
          err instanceof SegmentCorrupt && err.code === "remote_data_corrupt" &&
          err.message.includes(keys.log) && /checksum/.test(err.message),
      );
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a missing object is data loss: loud, counted, not repaired`, async () => {
    const s = await buildScenario({
      format,
      before: 40,
      after: 0,
      segmentSize: 1024,
      payloadSize: 64,
      evict: 2,
    });
    try {
      const metrics = createTierdMetrics(new Registry());
      const ctx = s.context({ metrics });
      for (const which of ["log", "index"] as const) {
        const keys = await keysOf(s, which === "log" ? 0n : s.copied[1]);
        await s.store.deleteMany([keys[which]]);
        const offset = which === "log" ? 0n : s.copied[1];
        const before = metrics.remoteObjectsMissing.value();
        await assert.rejects(
          readRecords(ctx, { partition: s.ids, offset, maxBytes: 100 }),
          (err: unknown) => err instanceof RemoteObjectMissing && err.key === keys[which],
        );
        assert.equal(metrics.remoteObjectsMissing.value(), before + 1);
      }
      assert.equal(metrics.reads.value({ source: "none", outcome: "remote_object_missing" }), 2);
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a store outage answers "unavailable"; local reads are unaffected`, async () => {
    const s = await buildScenario({
      format,
      before: 40,
      after: 20,
      segmentSize: 1024,
      payloadSize: 64,
      evict: 1,
    });
    try {
      s.store.setUnavailable(true);
      const ctx = s.context();
      await assert.rejects(
        readRecords(ctx, { partition: s.ids, offset: 0n, maxBytes: 100 }),
        (err: unknown) => err instanceof StoreUnavailable && err.retryAfterSeconds > 0,
      );
      const last = s.records.at(-1)!;
      const r = await readRecords(ctx, {
        partition: s.ids,
        offset: last.firstOffset,
        maxBytes: 100,
      });
      assert.equal(r.source, "local");
      assert.deepEqual(r.bytes, last.bytes);
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a slow store times out while the fetch goes on`, async () => {
    const s = await buildScenario({
      format,
      before: 40,
      after: 0,
      segmentSize: 1024,
      payloadSize: 64,
      evict: 1,
    });
    try {
      s.store.setFaults({ latencyMs: [300, 300] });
      const ctx = s.context({ fetchTimeoutMs: 50 });
      const started = performance.now();
      await assert.rejects(
        readRecords(ctx, { partition: s.ids, offset: 0n, maxBytes: 100 }),
        FetchTimeout,
      );
      assert.ok(
        performance.now() - started < 250,
        "answered at the deadline, not the store's pace",
      );
      const gets = s.store.requestCount("get");
      await new Promise((r) => setTimeout(r, 400)); // the index fetch completes meanwhile
      assert.equal(ctx.indexes.size, 1, "the fetch that outlived the read filled the index cache");
      s.store.setFaults({ latencyMs: [0, 0] });
      const r = await readRecords(ctx, { partition: s.ids, offset: 0n, maxBytes: 100 });
      assert.equal(r.firstOffset, 0n);
      assert.equal(
        s.store.requestCount("get"),
        gets + 1,
        "only the .log range, not the index again",
      );
    } finally {
      await s.cleanup();
    }
  });
}

Deno.test("unknown partitions are refused", async () => {
  const s = await buildScenario({
    format: "iggy-0.8",
    before: 5,
    after: 0,
    segmentSize: 1024,
    payloadSize: 8,
    evict: 0,
  });
  try {
    const ctx = s.context();
    for (
      const partition of [{ stream: 0, topic: 0, partition: 9 }, {
        stream: 5,
        topic: 0,
        partition: 0,
      }]
    ) {
      await assert.rejects(
        readRecords(ctx, { partition, offset: 0n, maxBytes: 100 }),
        UnknownPartition,
      );
    }
  } finally {
    await s.cleanup();
  }
});
