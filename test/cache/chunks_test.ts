// Chunk geometry and readahead steps: the pure functions every cached byte goes through.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  chunkBounds,
  chunkIndexOf,
  chunksCovering,
  firstFetchRange,
} from "../../src/cache/chunks.ts";
import { readaheadStep, type ReadStep } from "../../src/cache/readahead.ts";

/** An object: record sizes (some larger than a chunk), its size, and a chunk size. */
const objectArb = fc.record({
  records: fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 1, maxLength: 80 }),
  chunkSize: fc.integer({ min: 16, max: 4000 }),
  shuffle: fc.boolean(),
}).map(({ records, chunkSize, shuffle }) => {
  const starts: number[] = [];
  let size = 0;
  for (const r of records) {
    starts.push(size);
    size += r;
  }
  const given = shuffle ? [...starts, ...starts.slice(0, 3)].reverse() : starts;
  return { starts, given, size, chunkSize };
});

/** The record `[start, end)` holding byte `pos`. */
function recordAround(starts: number[], size: number, pos: number): [number, number] {
  let i = starts.length - 1;
  while (starts[i] > pos) i--;
  return [starts[i], i + 1 < starts.length ? starts[i + 1] : size];
}

Deno.test("chunks tile [0, size) exactly, each at most two chunk sizes long", () => {
  fc.assert(
    fc.property(objectArb, ({ given, size, chunkSize }) => {
      const b = chunkBounds(given, size, chunkSize);
      assert.equal(b[0], 0);
      assert.equal(b[b.length - 1], size);
      for (let k = 0; k + 1 < b.length; k++) {
        assert.ok(b[k] < b[k + 1], "bounds strictly increase");
        assert.ok(b[k + 1] - b[k] <= 2 * chunkSize, "a chunk is at most 2 × chunk_size");
      }
    }),
    { numRuns: 500 },
  );
});

Deno.test("the bounds depend only on which record starts there are, not their order", () => {
  // An index hands its starts over rising (taken as they are); any other list is sorted first.
  fc.assert(
    fc.property(
      objectArb,
      fc.array(fc.integer({ min: -50, max: 400_000 }), { maxLength: 5 }),
      ({ starts, size, chunkSize }, extra) => {
        const rising = [...new Set([...starts, ...extra])].sort((a, b) => a - b);
        const scrambled = [...rising, ...rising.slice(0, 2)].reverse();
        assert.deepEqual(
          chunkBounds(rising, size, chunkSize),
          chunkBounds(scrambled, size, chunkSize),
        );
      },
    ),
    { numRuns: 500 },
  );
});

Deno.test("every boundary is a record start, unless it cuts a record larger than a chunk", () => {
  fc.assert(
    fc.property(objectArb, ({ starts, given, size, chunkSize }) => {
      const b = chunkBounds(given, size, chunkSize);
      const isStart = new Set(starts);
      for (const boundary of b.slice(1, -1)) {
        if (isStart.has(boundary)) continue;
        const [s, e] = recordAround(starts, size, boundary);
        assert.ok(e - s > chunkSize, `boundary ${boundary} cuts record [${s}, ${e})`);
      }
      // So a record no larger than a chunk never spans two chunks.
      for (let i = 0; i < starts.length; i++) {
        const end = i + 1 < starts.length ? starts[i + 1] : size;
        if (end - starts[i] > chunkSize) continue;
        assert.equal(chunkIndexOf(b, starts[i]), chunkIndexOf(b, end - 1));
      }
    }),
    { numRuns: 500 },
  );
});

Deno.test("with records no larger than a chunk, every boundary is a record start", () => {
  const dense = fc.integer({ min: 16, max: 4000 }).chain((chunkSize) =>
    fc.record({
      chunkSize: fc.constant(chunkSize),
      records: fc.array(fc.integer({ min: 1, max: chunkSize }), { minLength: 1, maxLength: 200 }),
    })
  );
  fc.assert(
    fc.property(dense, ({ chunkSize, records }) => {
      const starts: number[] = [];
      let size = 0;
      for (const r of records) {
        starts.push(size);
        size += r;
      }
      const isStart = new Set(starts);
      for (const boundary of chunkBounds(starts, size, chunkSize).slice(0, -1)) {
        assert.ok(isStart.has(boundary));
      }
    }),
    { numRuns: 500 },
  );
});

Deno.test("chunk k starts at the record start nearest k × chunk_size", () => {
  // Dense records: every multiple of 10. Chunk size 1000: boundaries at the multiples of 1000.
  const starts = Array.from({ length: 1000 }, (_, i) => i * 10);
  assert.deepEqual(chunkBounds(starts, 10_000, 1000), [
    0,
    1000,
    2000,
    3000,
    4000,
    5000,
    6000,
    7000,
    8000,
    9000,
    10_000,
  ]);
  assert.deepEqual(chunkBounds([0, 300, 880, 1050], 1500, 1000), [0, 1050, 1500]);
  assert.deepEqual(
    chunkBounds([0, 900, 1100], 1500, 1000),
    [0, 900, 1500],
    "ties go to the lower start",
  );
  assert.deepEqual(chunkBounds([0, 990, 1020], 1500, 1000), [0, 990, 1500]);
  // One record of 3000 bytes: cut at the nominal points.
  assert.deepEqual(chunkBounds([0], 3000, 1000), [0, 1000, 2000, 3000]);
  assert.deepEqual(chunkBounds([], 0, 1000), [0]);
});

Deno.test("a range maps to the minimal run of chunks covering it", () => {
  fc.assert(
    fc.property(objectArb, fc.nat(), fc.nat(), ({ given, size, chunkSize }, a, l) => {
      const b = chunkBounds(given, size, chunkSize);
      const start = a % (size + 10);
      const length = l % (size + 10);
      const { first, end } = chunksCovering(b, start, length);
      const to = Math.min(size, start + length);
      if (to <= start) {
        assert.equal(first, end);
        return;
      }
      assert.ok(first < end);
      assert.ok(b[first] <= start && start < b[first + 1], "the first chunk holds the start");
      assert.ok(b[end - 1] <= to - 1 && to - 1 < b[end], "the last chunk holds the last byte");
    }),
    { numRuns: 1000 },
  );
});

Deno.test("the first fetch holds the wanted bytes, stays in the chunk and under half of it", () => {
  const limits = { min: 64, max: 1024 };
  fc.assert(
    fc.property(
      fc.nat(10_000),
      fc.integer({ min: 1, max: 20_000 }),
      fc.nat(),
      fc.nat(),
      (cs, len, a, l) => {
        const chunk = { start: cs, end: cs + len };
        const from = cs + (a % len);
        const to = from + 1 + (l % (chunk.end - from));
        const r = firstFetchRange({ start: from, end: to }, chunk, limits);
        if (to - from > limits.max) return assert.equal(r, undefined);
        if (!r) {
          const widened = Math.min(len, Math.max(to - from, limits.min));
          return assert.ok(2 * widened >= len, "only skipped when it would be half the chunk");
        }
        assert.ok(r.start <= from && to <= r.end);
        assert.ok(chunk.start <= r.start && r.end <= chunk.end);
        assert.ok(r.end - r.start >= Math.min(limits.min, len));
        assert.ok(2 * (r.end - r.start) < len);
      },
    ),
    { numRuns: 1000 },
  );
});

/** A read of [start, end) of key `k` (100 chunks) touching chunks first..last. */
const step = (start: number, end: number, first: number, last: number): ReadStep => ({
  key: "k",
  start,
  end,
  firstChunk: first,
  lastChunk: last,
  chunks: 100,
});

Deno.test("readahead opens at one chunk on a sequential read, doubles to the cap, resets otherwise", () => {
  let r = readaheadStep(undefined, step(0, 10, 0, 0), 4);
  assert.equal(r.state.window, 0);
  const windows: number[] = [];
  for (let i = 1; i <= 6; i++) {
    r = readaheadStep(r.state, step(i * 10, i * 10 + 10, i, i), 4);
    windows.push(r.state.window);
    assert.deepEqual([r.from, r.to], [i + 1, i + 1 + r.state.window]);
  }
  assert.deepEqual(windows, [1, 2, 4, 4, 4, 4]);
  r = readaheadStep(r.state, step(500, 510, 50, 50), 4);
  assert.equal(r.state.window, 0, "a jump resets the window");
  assert.equal(r.to - r.from, 0);
  // Off: never prefetches.
  assert.equal(readaheadStep(r.state, step(510, 520, 51, 51), 0).state.window, 0);
  // Never past the last chunk.
  const end = readaheadStep(
    { key: "k", end: 980, lastChunk: 98, window: 4 },
    step(980, 990, 98, 98),
    4,
  );
  assert.equal(end.to, 100);
});

Deno.test("readahead windows stay within [0, max] and only grow on sequential reads", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 16 }),
      fc.array(fc.record({ skip: fc.nat(3), len: fc.integer({ min: 1, max: 3 }) }), {
        maxLength: 40,
      }),
      (max, reads) => {
        let state;
        let pos = 0;
        for (const { skip, len } of reads) {
          const start = pos + skip;
          const read = {
            key: "k",
            start,
            end: start + len,
            firstChunk: start,
            lastChunk: start + len - 1,
            chunks: 1000,
          };
          const before = state?.window ?? 0;
          const r = readaheadStep(state, read, max);
          assert.ok(r.state.window >= 0 && r.state.window <= max);
          if (r.state.window > 0) {
            assert.ok(r.state.window === Math.min(max, Math.max(1, before * 2)));
          }
          state = r.state;
          pos = start + len;
        }
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("a reader that re-reads the tail of its last range and moves on is sequential", () => {
  // Whole-record reads: each asks from the next record start, inside the previous range.
  let r = readaheadStep(undefined, step(0, 1000, 0, 0), 4);
  r = readaheadStep(r.state, step(900, 1900, 0, 1), 4);
  assert.equal(r.state.window, 1, "overlapping forward read opens the window");
  r = readaheadStep(r.state, step(1800, 2800, 1, 2), 4);
  assert.equal(r.state.window, 2);
  // Re-reading an earlier range (not moving forward) resets it.
  r = readaheadStep(r.state, step(100, 200, 0, 0), 4);
  assert.equal(r.state.window, 0);
});

Deno.test("readahead carries on into the next object: the window spills over and keeps growing", () => {
  // Objects "a" and "b" of 3 chunks each; the reader reads "a" chunk by chunk, then "b".
  const at = (key: string, k: number, nextKey?: string): ReadStep => ({
    key,
    start: k * 10,
    end: k * 10 + 10,
    firstChunk: k,
    lastChunk: k,
    chunks: 3,
    atEnd: k === 2,
    nextKey,
  });
  let r = readaheadStep(undefined, at("a", 0, "b"), 4);
  r = readaheadStep(r.state, at("a", 1, "b"), 4);
  assert.deepEqual([r.state.window, r.from, r.to, r.spill], [1, 2, 3, 0]);
  r = readaheadStep(r.state, at("a", 2, "b"), 4);
  assert.deepEqual([r.state.window, r.from, r.to, r.spill], [2, 3, 3, 2], "2 chunks of b");
  assert.equal(r.state.next, "b");
  r = readaheadStep(r.state, at("b", 0), 4);
  assert.equal(r.state.window, 4, "starting b continues the reader");
  // Without a next object, nothing spills; a read of another object's start is a new reader.
  const alone = readaheadStep(r.state, { ...at("b", 2), atEnd: true }, 4);
  assert.equal(alone.spill, 0);
  assert.equal(readaheadStep(alone.state, at("c", 0), 4).state.window, 0);
});
