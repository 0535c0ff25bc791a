// What a read answers while the partition's state cannot be trusted yet, and over holes: a
// partition the agent is still opening (or rebuilding, or could not open) answers 503
// `partition_rebuilding` with Retry-After — never 416 or 404; a broker directory its journal
// cannot describe (the topic recreated or purged behind the agent's back, same inode or not)
// answers the same until the agent settles it, and so does an emptied directory and a partition
// the broker says it created again while the old files are still there; a hole the bucket has is read as a gap
// (`x-tierd-gap`), and a read that starts in one with nothing after it is 410 `offset_gap`.
import assert from "node:assert/strict";
import { appendFile, mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { generatePartition, partitionDir } from "../../src/format/generate.ts";
import { OffsetInGap, PartitionRebuilding } from "../../src/read/errors.ts";
import { PartitionBirths } from "../../src/read/partition_births.ts";
import { readRecords } from "../../src/read/read_records.ts";
import type { PartitionState } from "../../src/state/segment_state.ts";
import { getSegment, segmentsOf } from "../../src/state/segment_state.ts";
import { PartitionLedger } from "../../src/tier/partition_ledger.ts";
import { journalPath, partitionStateDir } from "../../src/layout/state_paths.ts";
import type { JournalEvent } from "../../src/state/events.ts";
import { copyFinishedEvent } from "../../src/state/events.ts";
import { appFor, errorBody, RECORDS } from "../http/_app.ts";
import { buildScenario, expectedRead, type Scenario } from "./_scenario.ts";

const FORMATS = ["iggy-0.8", "iggy-0.9"] as const;

function scenario(format: (typeof FORMATS)[number]): Promise<Scenario> {
  return buildScenario({
    format,
    before: 60,
    after: 5,
    segmentSize: 1024,
    payloadSize: 64,
    messagesPerBatch: 3,
    evict: 100,
  });
}

/**
 * Rewrites the partition's journal as the old one with the copies of `holes` replaced by hole
 * records (what a restore writes when those objects are missing from the bucket).
 */
async function withHoles(s: Scenario, holes: readonly bigint[]): Promise<PartitionState> {
  const ctx = s.context();
  const before = (await ctx.states.state(s.ids))!;
  const dir = partitionStateDir(s.config.agent.state_dir, s.ids);
  await rm(journalPath(dir));
  const ledger = await PartitionLedger.open(s.config.agent.state_dir, s.ids, {
    prefix: "iggy",
    clusterId: "local",
  });
  try {
    const at = 1;
    const events: JournalEvent[] = [{
      type: "incarnation",
      incarnation: before.incarnation!,
      device: before.device!,
      inode: before.inode!,
      at,
    }];
    for (const r of segmentsOf(before)) {
      if (!r.meta) continue;
      if (holes.includes(r.start)) {
        events.push({
          type: "hole",
          segment: r.start,
          generation: 0n,
          endOffset: r.meta.endOffset,
          reason: `iggy/…/${r.start}.log: missing from the bucket`,
          at,
        });
        continue;
      }
      events.push(
        { type: "copy_started", segment: r.start, generation: 0n, at },
        copyFinishedEvent(r.start, 0n, r.meta, at),
      );
      if (r.evicted) events.push({ type: "evicted", segment: r.start, generation: 0n, at });
    }
    await ledger.record(...events);
    return ledger.state;
  } finally {
    await ledger.close();
  }
}

for (const format of FORMATS) {
  Deno.test(`${format}: while the agent does not know a partition's state, reads answer 503 partition_rebuilding`, async () => {
    const s = await scenario(format);
    try {
      const base = s.context();
      let why: string | undefined = "the agent is starting: journals are replayed";
      const states = { state: base.states.state.bind(base.states), pending: () => why };
      const evicted = s.evicted[0];
      await assert.rejects(
        readRecords(s.context({ states }), {
          partition: s.ids,
          offset: evicted,
          maxBytes: 1 << 16,
        }),
        PartitionRebuilding,
      );
      const { app } = appFor(s, { read: { states } });
      for (const offset of [0n, evicted, 1n << 60n]) {
        const res = await app.request(`${RECORDS}?offset=${offset}`);
        assert.equal(res.status, 503, `offset ${offset}`);
        assert.ok(Number(res.headers.get("retry-after")) >= 1);
        const body = await errorBody(res);
        assert.equal(body.error, "partition_rebuilding");
        assert.match(body.message, /journals are replayed/);
      }
      // Known again: the evicted offset reads, byte for byte.
      why = undefined;
      const res = await app.request(`${RECORDS}?offset=${evicted}`);
      assert.equal(res.status, 200);
      const expected = expectedRead(s.records, { offset: evicted }, 1 << 20)!;
      assert.deepEqual(
        new Uint8Array(await res.arrayBuffer()).subarray(0, 8),
        expected.bytes.subarray(0, 8),
      );
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a directory its journal cannot describe (recreated in place) answers 503, never the old data`, async () => {
    const s = await scenario(format);
    try {
      const dir = partitionDir(s.config.agent.data_dir, s.ids);
      // The topic deleted and recreated in the same directory (the inode it had, as ext4 hands
      // it out again, or as a 0.9 broker leaves it): its files go, new ones come, offsets start
      // again at 0.
      for (const name of await readdir(dir)) await rm(join(dir, name), { recursive: true });
      await generatePartition({
        format,
        dataDir: s.config.agent.data_dir,
        ...s.ids,
        messages: 3,
        segmentSize: 1024,
        payloadSize: 64,
        seed: 99,
      });
      const { app } = appFor(s);
      for (const offset of [0n, s.evicted.at(-1)!]) {
        const res = await app.request(`${RECORDS}?offset=${offset}`);
        assert.equal(res.status, 503, `offset ${offset}`);
        const body = await errorBody(res);
        assert.equal(body.error, "partition_rebuilding");
        assert.match(body.message, /recreated or purged/);
      }
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a directory emptied while the broker deletes or creates the partition answers 503, never the old copies`, async () => {
    const s = await scenario(format);
    try {
      const dir = partitionDir(s.config.agent.data_dir, s.ids);
      for (const name of await readdir(dir)) await rm(join(dir, name), { recursive: true });
      const { app } = appFor(s);
      for (const offset of [0n, s.evicted.at(-1)!]) {
        const res = await app.request(`${RECORDS}?offset=${offset}`);
        assert.equal(res.status, 503, `offset ${offset}`);
        assert.equal(res.headers.get("retry-after"), "1");
        const body = await errorBody(res);
        assert.equal(body.error, "partition_rebuilding");
        assert.match(body.message, /holds no segment/);
      }
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a partition the broker created again while its old files are still there (0.9's reconciler) answers 503, never the old data`, async () => {
    const s = await scenario(format);
    try {
      const dataDir = s.config.agent.data_dir;
      await mkdir(join(dataDir, "metadata"), { recursive: true });
      await writeFile(join(dataDir, "metadata", "journal.wal"), new Uint8Array(256));
      let birth = (Date.now() - 3_600_000) * 1000;
      const births = new PartitionBirths(dataDir, () => Promise.resolve(birth), {
        timeoutMs: 5_000,
      });
      const { app } = appFor(s, { read: { births } });
      const read = (offset: bigint) => app.request(`${RECORDS}?offset=${offset}`);
      const evicted = s.evicted.at(-1)!;
      const first = await read(evicted);
      assert.equal(first.status, 200, "the partition as tiered");
      await first.body?.cancel();
      // Deleted and created again under the same ids: the broker's metadata log grows; the
      // directory still holds every old file.
      birth = Date.now() * 1000;
      await appendFile(join(dataDir, "metadata", "journal.wal"), new Uint8Array(256));
      for (const offset of [0n, evicted]) {
        const res = await read(offset);
        assert.equal(res.status, 503, `offset ${offset}`);
        assert.equal(res.headers.get("retry-after"), "1");
        const body = await errorBody(res);
        assert.equal(body.error, "partition_rebuilding");
        assert.match(body.message, /created it again at/);
      }
    } finally {
      await s.cleanup();
    }
  });

  Deno.test(`${format}: a hole in the bucket reads as a gap; starting in one with nothing after is 410`, async () => {
    const s = await scenario(format);
    try {
      // A hole in the middle of the evicted copies.
      const middle = s.evicted[Math.floor(s.evicted.length / 2)];
      const state = await withHoles(s, [middle]);
      const hole = getSegment(state, 0n, middle)!;
      const ctx = s.context();
      const r = await readRecords(ctx, { partition: s.ids, offset: middle, maxBytes: 1 << 20 });
      assert.deepEqual(r.gap, { from: middle, to: hole.lostEndOffset });
      assert.equal(r.firstOffset, hole.lostEndOffset! + 1n);
      const before = await readRecords(ctx, { partition: s.ids, offset: 0n, maxBytes: 1 << 20 });
      assert.ok(before.nextOffset <= middle, "a read never spans the hole");
      const { app } = appFor(s);
      const res = await app.request(`${RECORDS}?offset=${middle}`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("x-tierd-gap"), `${middle}-${hole.lostEndOffset}`);
      await res.body?.cancel();
    } finally {
      await s.cleanup();
    }
  });
}

Deno.test("a hole with nothing readable after it answers 410 offset_gap, never offset_past_end", async () => {
  const s = await buildScenario({
    format: "iggy-0.9",
    before: 60,
    after: 0,
    segmentSize: 1024,
    payloadSize: 64,
    messagesPerBatch: 3,
    evict: 100,
  });
  try {
    // Every copy but the first is a hole, and the broker's own files are gone too.
    const state = await withHoles(s, s.copied.slice(1));
    await rm(partitionDir(s.config.agent.data_dir, s.ids), { recursive: true });
    const last = getSegment(state, 0n, s.copied.at(-1)!)!;
    await assert.rejects(
      readRecords(s.context(), { partition: s.ids, offset: last.start, maxBytes: 1 << 16 }),
      OffsetInGap,
    );
    const { app } = appFor(s);
    const res = await app.request(`${RECORDS}?offset=${last.start}`);
    assert.equal(res.status, 410);
    const body = await errorBody(res);
    assert.equal(body.error, "offset_gap");
    assert.match(body.message, /a hole in the bucket/);
    assert.equal(res.headers.get("x-tierd-gap"), `${last.start}-${last.lostEndOffset}`);
  } finally {
    await s.cleanup();
  }
});
