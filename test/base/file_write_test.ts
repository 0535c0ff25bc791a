// writeNewFile: the file holds exactly the parts, one after another, whatever was there before;
// a failure carries the errno code the callers branch on (ENOSPC, ENOENT), as node:fs errors do.
// writeNewFileDirect: the same bytes whichever way they went, direct I/O under Bun when the file
// system takes it and the body's memory is page-aligned, the page cache otherwise.
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { DIRECT_IO_ALIGN, writeNewFile, writeNewFileDirect } from "../../src/base/file_write.ts";
import { BUN_DIRECT_IO, REPO_ROOT, runBunScript, tempDir } from "../_util.ts";

Deno.test("the new file holds the parts in order, and nothing of an older, longer file", async () => {
  const tmp = await tempDir("tierd-file-write");
  try {
    const path = join(tmp.path, "f");
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.uint8Array({ maxLength: 70_000 }), { maxLength: 5 }),
        async (parts) => {
          await writeFile(path, new Uint8Array(200_000).fill(9));
          await writeNewFile(path, parts);
          assert.deepEqual(
            new Uint8Array(await readFile(path)),
            Uint8Array.from(parts.flatMap((p) => [...p])),
          );
        },
      ),
      { numRuns: 40 },
    );
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("a failed write names its errno code", async () => {
  const tmp = await tempDir("tierd-file-write");
  try {
    await assert.rejects(
      writeNewFile(join(tmp.path, "missing", "f"), [new Uint8Array(1)]),
      (err) => (err as { code?: string }).code === "ENOENT",
    );
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("under Deno a direct write goes through the page cache and holds the same bytes", async () => {
  const tmp = await tempDir("tierd-file-write");
  try {
    const path = join(tmp.path, "f");
    await writeFile(path, new Uint8Array(300_000).fill(9));
    const head = new Uint8Array(DIRECT_IO_ALIGN).fill(7);
    const body = new Uint8Array(3 * DIRECT_IO_ALIGN + 5).map((_, i) => i * 31);
    assert.equal(await writeNewFileDirect(path, head, body), "buffered");
    assert.deepEqual(new Uint8Array(await readFile(path)), Uint8Array.from([...head, ...body]));
    await assert.rejects(writeNewFileDirect(path, new Uint8Array(100), body), RangeError);
  } finally {
    await tmp.cleanup();
  }
});

/** The Bun side: each case written over an older, longer file, then read back. */
const DIRECT_SCRIPT = `
${BUN_DIRECT_IO}
import { readFile, writeFile } from "node:fs/promises";
import { writeNewFileDirect } from ${JSON.stringify(join(REPO_ROOT, "src/base/file_write.ts"))};
const [dir, casesJson] = process.argv.slice(2);
const supported = directIoSupported(dir);
const out = [];
for (const c of JSON.parse(casesJson)) {
  const body = pageAligned(c.body, c.shift);
  for (let i = 0; i < body.length; i++) body[i] = (i * 31 + c.body) & 255;
  const head = new Uint8Array(c.headPages * 4096).map((_, i) => (i * 7) & 255);
  const path = dir + "/f";
  await writeFile(path, new Uint8Array(c.body + 300000).fill(9));
  const mode = await writeNewFileDirect(path, head, body);
  const got = new Uint8Array(await readFile(path));
  const want = new Uint8Array(head.length + body.length);
  want.set(head);
  want.set(body, head.length);
  out.push({ mode, same: got.length === want.length && got.every((x, i) => x === want[i]) });
}
console.log(JSON.stringify({ supported, out }));
`;

Deno.test("under Bun a direct write holds the same bytes, and goes around the page cache when it can", async () => {
  const cases = fc.sample(
    fc.record({
      headPages: fc.integer({ min: 1, max: 3 }),
      body: fc.oneof(
        fc.integer({ min: 0, max: DIRECT_IO_ALIGN - 1 }),
        fc.integer({ min: 1, max: 40 }).map((pages) => pages * DIRECT_IO_ALIGN),
        fc.integer({ min: DIRECT_IO_ALIGN + 1, max: 300_000 }),
      ),
      shift: fc.constantFrom(0, 0, 1),
    }),
    { numRuns: 40, seed: 2612 },
  );
  const tmp = await tempDir("tierd-file-write-bun");
  try {
    const { supported, out } = JSON.parse(
      await runBunScript(tmp.path, DIRECT_SCRIPT, [tmp.path, JSON.stringify(cases)]),
    ) as { supported: boolean; out: { mode: string; same: boolean }[] };
    cases.forEach((c, i) => {
      const what = `case ${i}: ${JSON.stringify(c)}`;
      assert.ok(out[i].same, `${what}: the file does not hold head then body`);
      const bulk = c.body - c.body % DIRECT_IO_ALIGN;
      const expected = bulk === 0
        ? "buffered"
        : !supported
        ? "unsupported"
        : c.shift === 0
        ? "direct"
        : "buffered";
      assert.equal(out[i].mode, expected, what);
    });
  } finally {
    await tmp.cleanup();
  }
});
