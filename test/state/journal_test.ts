// The Journal on real files: replay, torn-tail repair, serialized appends and compaction.
import assert from "node:assert/strict";
import { appendFile, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import type { JournalEvent } from "../../src/state/events.ts";
import {
  encodeRecord,
  Journal,
  JournalDamaged,
  type TornTailInfo,
} from "../../src/state/journal.ts";
import { tempDir } from "../_util.ts";
import { anyEvent } from "./_arbitraries.ts";

const ev = (generation: bigint): JournalEvent => ({ type: "generation", generation, at: 1 });

/** Splits `events` into consecutive batches at the given cut points. */
function batches<T>(items: T[], cuts: number[]): T[][] {
  const points = [...new Set(cuts.map((c) => c % (items.length + 1)))].sort((a, b) => a - b);
  const out: T[][] = [];
  let from = 0;
  for (const p of [...points, items.length]) {
    out.push(items.slice(from, p));
    from = p;
  }
  return out;
}

Deno.test("open creates the file and its directories; an empty journal replays nothing", async () => {
  const dir = await tempDir("tierd-journal");
  try {
    const path = join(dir.path, "1", "2", "3", "journal");
    const { journal, events } = await Journal.open(path);
    assert.deepEqual(events, []);
    assert.equal(journal.size, 0);
    assert.equal((await stat(path)).size, 0);
    await journal.close();
  } finally {
    await dir.cleanup();
  }
});

Deno.test("appends in several calls replay in order after reopen (property, 1000 runs)", async () => {
  const dir = await tempDir("tierd-journal");
  let n = 0;
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.array(anyEvent(), { maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 4 }),
        async (events, cuts) => {
          const path = join(dir.path, `j${n++}`);
          const { journal } = await Journal.open(path);
          for (const batch of batches(events, cuts)) await journal.append(...batch);
          const size = journal.size;
          await journal.close();
          assert.equal((await stat(path)).size, size);
          const reopened = await Journal.open(path, {
            onTornTail: () => assert.fail("no torn tail expected"),
          });
          assert.deepEqual(reopened.events, events);
          assert.equal(reopened.journal.size, size);
          await reopened.journal.close();
        },
      ),
      { numRuns: 1000 },
    );
  } finally {
    await dir.cleanup();
  }
});

Deno.test("an interrupted last append is truncated and reported; later appends survive (property, 1000 runs)", async () => {
  const dir = await tempDir("tierd-journal");
  let n = 0;
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.array(anyEvent(), { maxLength: 6 }),
        anyEvent(),
        fc.nat(),
        fc.array(anyEvent(), { minLength: 1, maxLength: 4 }),
        async (before, interrupted, cutAt, after) => {
          const path = join(dir.path, `j${n++}`);
          const first = await Journal.open(path);
          await first.journal.append(...before);
          const validBytes = first.journal.size;
          await first.journal.close();
          // What a crash mid-append leaves: some leading bytes of the next record.
          const record = encodeRecord(interrupted);
          const garbage = record.subarray(0, 1 + (cutAt % (record.length - 1)));
          await appendFile(path, garbage);

          const reports: TornTailInfo[] = [];
          const second = await Journal.open(path, { onTornTail: (t) => reports.push(t) });
          assert.deepEqual(second.events, before);
          assert.equal(reports.length, 1);
          assert.equal(reports[0].path, path);
          assert.equal(reports[0].validBytes, validBytes);
          assert.equal(reports[0].droppedBytes, garbage.length);
          assert.equal((await stat(path)).size, validBytes);
          await second.journal.append(...after);
          await second.journal.close();

          const third = await Journal.open(path, { onTornTail: () => assert.fail("clean now") });
          assert.deepEqual(third.events, [...before, ...after]);
          await third.journal.close();
        },
      ),
      { numRuns: 1000 },
    );
  } finally {
    await dir.cleanup();
  }
});

Deno.test("compact replaces the journal with the snapshot; appends continue (property, 1000 runs)", async () => {
  const dir = await tempDir("tierd-journal");
  let n = 0;
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.array(anyEvent(), { maxLength: 6 }),
        fc.array(anyEvent(), { maxLength: 6 }),
        fc.array(anyEvent(), { maxLength: 4 }),
        async (history, snapshot, after) => {
          const sub = join(dir.path, `d${n++}`);
          const path = join(sub, "journal");
          const { journal } = await Journal.open(path);
          await journal.append(...history);
          await journal.compact(snapshot);
          await journal.append(...after);
          const size = journal.size;
          await journal.close();
          assert.deepEqual(await readdir(sub), ["journal"]);
          assert.equal((await stat(path)).size, size);
          const reopened = await Journal.open(path, { onTornTail: () => assert.fail("clean") });
          assert.deepEqual(reopened.events, [...snapshot, ...after]);
          await reopened.journal.close();
        },
      ),
      { numRuns: 1000 },
    );
  } finally {
    await dir.cleanup();
  }
});

Deno.test("concurrent appends and a compaction never interleave records", async () => {
  const dir = await tempDir("tierd-journal");
  try {
    const path = join(dir.path, "journal");
    const { journal } = await Journal.open(path);
    const pending: Promise<void>[] = [];
    for (let i = 0; i < 50; i++) pending.push(journal.append(ev(BigInt(i)), ev(BigInt(i) + 1000n)));
    pending.push(journal.compact([ev(7n)]));
    for (let i = 50; i < 60; i++) pending.push(journal.append(ev(BigInt(i))));
    await Promise.all(pending);
    await journal.close();
    const { journal: again, events } = await Journal.open(path);
    assert.deepEqual(events, [ev(7n), ...Array.from({ length: 10 }, (_, i) => ev(BigInt(50 + i)))]);
    await again.close();
  } finally {
    await dir.cleanup();
  }
});

Deno.test("an invalid event rejects the whole append and writes nothing", async () => {
  const dir = await tempDir("tierd-journal");
  try {
    const path = join(dir.path, "journal");
    const { journal } = await Journal.open(path);
    await journal.append(ev(1n));
    const size = journal.size;
    await assert.rejects(journal.append(ev(2n), ev(-1n)), RangeError);
    await assert.rejects(journal.compact([ev(-1n)]), RangeError);
    assert.equal(journal.size, size);
    await journal.append(ev(3n));
    await journal.close();
    await assert.rejects(journal.append(ev(4n)), /closed/);
    const { journal: again, events } = await Journal.open(path);
    assert.deepEqual(events, [ev(1n), ev(3n)]);
    await again.close();
  } finally {
    await dir.cleanup();
  }
});

Deno.test("open removes a temp file left by a compaction that crashed before its rename", async () => {
  const dir = await tempDir("tierd-journal");
  try {
    const path = join(dir.path, "journal");
    const { journal } = await Journal.open(path);
    await journal.append(ev(1n));
    await journal.close();
    await writeFile(path + ".tmp", new Uint8Array([1, 2, 3]));
    const { journal: again, events } = await Journal.open(path);
    assert.deepEqual(events, [ev(1n)]);
    assert.deepEqual(await readdir(dir.path), ["journal"]);
    await again.close();
  } finally {
    await dir.cleanup();
  }
});

Deno.test("a damaged record followed by valid records is refused, never truncated", async () => {
  const dir = await tempDir("tierd-journal");
  try {
    const path = join(dir.path, "journal");
    const { journal } = await Journal.open(path);
    await journal.append(ev(1n), ev(2n), ev(3n));
    await journal.close();
    const bytes = await readFile(path);
    const recordLength = bytes.length / 3; // same-shaped events encode to equal lengths
    bytes[recordLength + 20] ^= 0xff;
    await writeFile(path, bytes);
    const reports: TornTailInfo[] = [];
    await assert.rejects(
      Journal.open(path, { onTornTail: (t) => reports.push(t) }),
      (err: unknown) =>
        err instanceof JournalDamaged && err.path === path && err.position === recordLength &&
        err.reason === "checksum mismatch" && err.message.includes(`byte ${recordLength}`),
    );
    assert.deepEqual(reports, [], "damage is not reported as a torn tail");
    assert.deepEqual(new Uint8Array(await readFile(path)), new Uint8Array(bytes), "left as found");
  } finally {
    await dir.cleanup();
  }
});
