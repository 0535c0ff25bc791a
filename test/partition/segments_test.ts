import assert from "node:assert/strict";
import { mkdir, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { findChainGaps } from "../../src/partition/chain.ts";
import { discoverPartitions } from "../../src/partition/discover.ts";
import { parseSegmentFileName, segmentStem } from "../../src/layout/partition.ts";
import { listSegments } from "../../src/partition/segments.ts";
import { tempDir } from "../_util.ts";

Deno.test("segment file names are 20-digit start offsets", () => {
  assert.equal(segmentStem(1000n), "00000000000000001000");
  assert.deepEqual(parseSegmentFileName("00000000000000001000.log"), { start: 1000n, ext: "log" });
  assert.equal(parseSegmentFileName("1000.log"), undefined);
  assert.equal(parseSegmentFileName("00000000000000001000.staging"), undefined);
});

Deno.test("discovery finds numeric partition dirs of accepted topics only", async () => {
  const tmp = await tempDir();
  try {
    for (
      const p of [
        "streams/0/topics/0/partitions/0",
        "streams/0/topics/0/partitions/1",
        "streams/0/topics/1/partitions/0",
        "streams/x/topics/0/partitions/0",
      ]
    ) {
      await mkdir(join(tmp.path, p), { recursive: true });
    }
    const all = await discoverPartitions(tmp.path);
    assert.deepEqual(all.map((p) => `${p.stream}/${p.topic}/${p.partition}`), [
      "0/0/0",
      "0/0/1",
      "0/1/0",
    ]);
    const topic0 = await discoverPartitions(tmp.path, (id) => id.topic === 0);
    assert.equal(topic0.length, 2);
    assert.ok(topic0[0].inode > 0);
    assert.deepEqual(await discoverPartitions(join(tmp.path, "missing")), []);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("the last segment is active; others are sealed once quiet", async () => {
  const tmp = await tempDir();
  try {
    const old = new Date(Date.now() - 60_000);
    for (const start of [0n, 100n, 200n]) {
      for (const ext of ["log", "index"]) {
        const f = join(tmp.path, `${segmentStem(start)}.${ext}`);
        await writeFile(f, new Uint8Array(10));
        if (start === 0n) await utimes(f, old, old);
      }
    }
    await writeFile(join(tmp.path, `${segmentStem(300n)}.index`), new Uint8Array(0)); // orphan index
    const segs = await listSegments(tmp.path, { now: Date.now(), quiescenceMs: 5_000 });
    assert.deepEqual(segs.map((s) => [s.start, s.sealed]), [[0n, true], [100n, false], [
      200n,
      false,
    ]]);
    const later = await listSegments(tmp.path, { now: Date.now() + 10_000, quiescenceMs: 5_000 });
    assert.deepEqual(later.map((s) => s.sealed), [true, true, false]);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("chain gaps and overlaps are reported", () => {
  assert.deepEqual(
    findChainGaps([{ start: 0n, endOffset: 9n }, { start: 10n, endOffset: 19n }]),
    [],
  );
  assert.deepEqual(findChainGaps([{ start: 0n, endOffset: 9n }, { start: 15n, endOffset: 19n }]), [
    { before: 0n, after: 15n, missingFrom: 10n, missingTo: 14n },
  ]);
  assert.equal(
    findChainGaps([{ start: 0n, endOffset: 9n }, { start: 5n, endOffset: 19n }]).length,
    1,
  );
});
