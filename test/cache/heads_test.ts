// Cold-reader detection: how far a read starts behind its partition's head.
import assert from "node:assert/strict";
import { HeadTracker } from "../../src/cache/heads.ts";
import type { ChunkSource, PositionedChunkSource } from "../../src/cache/types.ts";

const src = (key: string, size: number): ChunkSource => ({
  key,
  checksum: "0".repeat(32),
  size,
  recordStarts: () => Promise.resolve([0]),
});
const seg = (n: number, size = 1000) =>
  src(`iggy/c/1/1/0/1-0/${String(n).padStart(20, "0")}.log`, size);

Deno.test("the head is the newest byte read in a partition; distances count known segments", () => {
  const heads = new HeadTracker();
  assert.equal(heads.observe(seg(0), 0, 100), 0, "the first read is the head");
  assert.equal(heads.observe(seg(300), 500, 600), 0, "a newer segment moves the head");
  // Behind: the rest of segment 0 and the head's position in segment 300.
  assert.equal(heads.observe(seg(0), 200, 300), 800 + 600);
  assert.equal(heads.observe(seg(100), 0, 10), 1000 + 600, "segment 100 is now known");
  assert.equal(heads.observe(seg(0), 200, 300), 800 + 1000 + 600);
  assert.equal(heads.observe(seg(300), 100, 200), 500, "same segment: bytes to the head");
  // Another partition has its own head.
  assert.equal(heads.observe(src("iggy/c/1/1/1/1-0/00000000000000000000.log", 10), 0, 5), 0);
});

Deno.test("positioned sources measure exactly, whatever their keys", () => {
  const heads = new HeadTracker();
  const at = (key: string, base: number): PositionedChunkSource => ({
    ...src(key, 1000),
    position: { partition: "1/1/0", base },
  });
  assert.equal(heads.observe(at("z", 5000), 100, 200), 0);
  assert.equal(heads.observe(at("a", 0), 0, 100), 5200);
  assert.equal(heads.observe(at("m", 4000), 900, 1000), 300);
  assert.equal(heads.observe(at("z", 5000), 300, 400), 0, "past the head: it becomes the head");
});
