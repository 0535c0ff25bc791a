// The chunk store under Bun, the compiled binary's runtime: chunks written with direct I/O (the
// page cache takes no copy) read back byte for byte, and damage on disk is still caught;
// `cache.direct_io = false` writes them through the page cache. (Under Deno chunks go through the
// page cache; the cache and format suites cover that path.)
import assert from "node:assert/strict";
import { join } from "node:path";
import { chunkCacheOptions } from "../../src/cache/chunk_cache.ts";
import { parseConfig } from "../../src/config/load.ts";
import { BUN_DIRECT_IO, REPO_ROOT, runBunScript, tempDir } from "../_util.ts";

const MiB = 1024 * 1024;

const SCRIPT = `
${BUN_DIRECT_IO}
import { open } from "node:fs/promises";
import { ChunkStore } from ${JSON.stringify(join(REPO_ROOT, "src/cache/chunk_store.ts"))};
import { ChunkCorruptError } from ${JSON.stringify(join(REPO_ROOT, "src/cache/chunk_format.ts"))};
import { initHashes } from ${JSON.stringify(join(REPO_ROOT, "src/hash.ts"))};
await initHashes();
const [dir, lengthsJson] = process.argv.slice(2);
const supported = directIoSupported(dir);
const modes = [];
const store = new ChunkStore(dir, { onWrite: (mode) => modes.push(mode) });
const out = [];
for (const [i, length] of JSON.parse(lengthsJson).entries()) {
  const data = pageAligned(length);
  for (let k = 0; k < length; k++) data[k] = (k * 131 + i * 7 + (k >> 12)) & 255;
  const name = (i + 1).toString(16).padStart(16, "0");
  const range = { start: 1000, end: 1000 + length };
  await store.write(name, range, data);
  const reads = [[0, length], [5, Math.min(length, 70000)], [Math.max(0, length - 100), length]];
  const same = [];
  for (const [from, to] of reads) {
    const got = await store.read(name, range, from, to);
    same.push(got.length === to - from && got.every((x, k) => x === data[from + k]));
  }
  // Flip one data byte on disk, past the header: the next read of it must refuse the chunk.
  const fh = await open(store.pathOf(name), "r+");
  const size = (await fh.stat()).size;
  const flipAt = size - length + Math.floor(length / 2);
  const one = new Uint8Array(1);
  await fh.read(one, 0, 1, flipAt);
  one[0] ^= 0x10;
  await fh.write(one, 0, 1, flipAt);
  await fh.close();
  let caught = "nothing";
  try {
    await store.read(name, range, 0, length);
  } catch (err) {
    caught = err instanceof ChunkCorruptError ? "ChunkCorruptError" : String(err);
  }
  out.push({ same, caught });
}
await store.closeFiles();
// cache.direct_io = false: the same aligned chunk goes through the page cache.
const offModes = [];
const off = new ChunkStore(dir + "/off", { directIo: false, onWrite: (mode) => offModes.push(mode) });
const aligned = pageAligned(1 << 20);
await off.write("00000000000000ff", { start: 0, end: aligned.length }, aligned);
const offSame = (await off.read("00000000000000ff", { start: 0, end: aligned.length }, 0, aligned.length))
  .every((x, k) => x === aligned[k]);
await off.closeFiles();
console.log(JSON.stringify({ supported, modes, out, offModes, offSame }));
`;

Deno.test("cache.direct_io reaches the chunk cache's options, on by default", () => {
  const base = `[agent]\ndata_dir = "broker"\n[tiered_storage]\nenabled = true\nbackend = "sim"\n`;
  const on = parseConfig(base, "/etc/tierd/tierd.toml", {});
  assert.equal(chunkCacheOptions(on.tiered_storage).directIo, true);
  const off = parseConfig(
    base + `[tiered_storage.cache]\ndirect_io = false\n`,
    "/etc/tierd/tierd.toml",
    {},
  );
  assert.equal(chunkCacheOptions(off.tiered_storage).directIo, false);
});

Deno.test("under Bun, chunks written with direct I/O read back exactly, and a flipped byte is caught", async () => {
  const lengths = [1 * MiB, 1 * MiB + 777, 3000, 8 * MiB];
  const tmp = await tempDir("tierd-chunk-store-bun");
  try {
    const { supported, modes, out, offModes, offSame } = JSON.parse(
      await runBunScript(tmp.path, SCRIPT, [tmp.path, JSON.stringify(lengths)]),
    ) as {
      supported: boolean;
      modes: string[];
      out: { same: boolean[]; caught: string }[];
      offModes: string[];
      offSame: boolean;
    };
    lengths.forEach((length, i) => {
      assert.deepEqual(out[i].same, [true, true, true], `${length} bytes: read back`);
      assert.equal(out[i].caught, "ChunkCorruptError", `${length} bytes: damage on disk`);
    });
    // A chunk shorter than a page has nothing to write around the page cache.
    const expected = lengths.map((n) => supported && n >= 4096 ? "direct" : "buffered");
    assert.deepEqual(modes, expected);
    assert.deepEqual(offModes, ["buffered"], "direct I/O turned off");
    assert.ok(offSame);
  } finally {
    await tmp.cleanup();
  }
});
