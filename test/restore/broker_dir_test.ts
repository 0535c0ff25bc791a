// The broker partition directory restore --with-data fills: a new partition's directory as Iggy
// 0.8 and 0.9 make it (empty segment files, `offsets/` without offsets) is accepted, its empty
// files not among the restored ones go; anything with data is refused and left as it was; the
// empty active segment goes right after the last restored one, never over a file that is there.
import assert from "node:assert/strict";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  activeSegmentStart,
  BrokerDirNotEmpty,
  prepareBrokerDir,
  writeActiveSegment,
} from "../../src/restore/broker_dir.ts";
import { tempDir } from "../_util.ts";

const stem = (n: bigint) => n.toString().padStart(20, "0");

/** A partition directory as a broker leaves a new partition: empty segment 0, no offsets. */
async function newPartition(dir: string): Promise<void> {
  await mkdir(join(dir, "offsets", "consumers"), { recursive: true });
  await mkdir(join(dir, "offsets", "groups"), { recursive: true });
  await writeFile(join(dir, `${stem(0n)}.log`), "");
  await writeFile(join(dir, `${stem(0n)}.index`), "");
}

/** Every file and directory under `dir`, relative, sorted. */
async function tree(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).sort();
}

Deno.test("prepareBrokerDir: a missing directory is made", async () => {
  const tmp = await tempDir("tierd-broker-dir");
  try {
    const dir = join(tmp.path, "streams/1/topics/1/partitions/0");
    assert.deepEqual(await prepareBrokerDir(dir, [0n, 100n]), []);
    assert.deepEqual(await tree(dir), []);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("prepareBrokerDir: a new partition's directory is accepted; its empty segment goes only when the restored ones start elsewhere", async () => {
  const tmp = await tempDir("tierd-broker-dir");
  try {
    const at0 = join(tmp.path, "at0");
    await newPartition(at0);
    assert.deepEqual(await prepareBrokerDir(at0, [0n, 100n, 200n]), [], "segment 0 is restored");
    assert.deepEqual(await tree(at0), [
      `${stem(0n)}.index`,
      `${stem(0n)}.log`,
      "offsets",
      "offsets/consumers",
      "offsets/groups",
    ]);

    const later = join(tmp.path, "later");
    await newPartition(later);
    assert.deepEqual(await prepareBrokerDir(later, [5000n, 5100n]), [
      `${stem(0n)}.index`,
      `${stem(0n)}.log`,
    ]);
    assert.deepEqual(await tree(later), ["offsets", "offsets/consumers", "offsets/groups"]);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("prepareBrokerDir: an interrupted restore's files are its own", async () => {
  const tmp = await tempDir("tierd-broker-dir");
  try {
    const dir = join(tmp.path, "p");
    await mkdir(dir);
    await writeFile(join(dir, `${stem(0n)}.log`), "bytes");
    await writeFile(join(dir, `${stem(0n)}.index`), "bytes");
    await writeFile(join(dir, `${stem(100n)}.log.restore`), "half");
    assert.deepEqual(await prepareBrokerDir(dir, [0n, 100n]), []);
    assert.equal(await readFile(join(dir, `${stem(0n)}.log`), "utf8"), "bytes");
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("prepareBrokerDir: data, an offset or a file of the broker's own is refused, and nothing is removed", async () => {
  const tmp = await tempDir("tierd-broker-dir");
  try {
    const cases: [string, (dir: string) => Promise<void>, string[]][] = [
      ["a segment with bytes", (d) => writeFile(join(d, `${stem(50n)}.log`), "x"), [
        `${stem(50n)}.log`,
      ]],
      ["a consumer's offset", async (d) => {
        await writeFile(join(d, "offsets", "consumers", "1"), new Uint8Array(16));
      }, ["offsets/"]],
      ["a superblock", (d) => writeFile(join(d, "superblock.a"), "x"), ["superblock.a"]],
      ["a note", (d) => writeFile(join(d, "notes.txt"), "mine"), ["notes.txt"]],
    ];
    for (const [what, add, named] of cases) {
      const dir = join(tmp.path, what.replaceAll(" ", "-"));
      await newPartition(dir);
      await add(dir);
      const before = await tree(dir);
      const err = await prepareBrokerDir(dir, [5000n]).then(
        () => assert.fail(`${what}: accepted`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof BrokerDirNotEmpty, `${what}: ${err}`);
      assert.deepEqual(err.strangers, named, what);
      assert.match(err.message, /is not empty \(.*\): restore --with-data writes only into/);
      assert.deepEqual(await tree(dir), before, `${what}: the directory changed`);
    }
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("activeSegmentStart: right after the last restored segment, unless offsets are missing past it", () => {
  const restored = [{ start: 0n, end: 99n }, { start: 200n, end: 299n }, {
    start: 100n,
    end: 199n,
  }];
  assert.equal(activeSegmentStart(restored, []), 300n);
  assert.equal(activeSegmentStart(restored, [50n]), 300n, "a hole before it");
  assert.equal(activeSegmentStart(restored, [300n]), undefined, "a hole after it");
  assert.equal(activeSegmentStart([], []), undefined, "nothing restored");
});

Deno.test("writeActiveSegment: an empty pair, never over a file that is there", async () => {
  const tmp = await tempDir("tierd-broker-dir");
  try {
    assert.equal(await writeActiveSegment(tmp.path, 300n), true);
    assert.deepEqual(await tree(tmp.path), [`${stem(300n)}.index`, `${stem(300n)}.log`]);
    for (const n of await readdir(tmp.path)) {
      assert.equal((await readFile(join(tmp.path, n))).length, 0, n);
    }
    // A broker appended to it since: a restore run again keeps what it wrote.
    await writeFile(join(tmp.path, `${stem(300n)}.log`), "appended");
    await writeFile(join(tmp.path, `${stem(300n)}.index`), "indexed");
    assert.equal(await writeActiveSegment(tmp.path, 300n), false);
    assert.equal(await readFile(join(tmp.path, `${stem(300n)}.log`), "utf8"), "appended");
    assert.equal(await readFile(join(tmp.path, `${stem(300n)}.index`), "utf8"), "indexed");
  } finally {
    await tmp.cleanup();
  }
});
