// writeNewFile: the file holds exactly the parts, one after another, whatever was there before;
// a failure carries the errno code the callers branch on (ENOSPC, ENOENT), as node:fs errors do.
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { writeNewFile } from "../../src/base/file_write.ts";
import { tempDir } from "../_util.ts";

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
