// The shared part-buffer pool bounds upload memory node-wide and never hands one buffer to two
// parts at once: concurrent multipart uploads through one pool still store the right bytes.
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PartBufferPool } from "../../providers/part_pool.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { uploadFile } from "../../providers/upload.ts";
import { tempDir } from "../_util.ts";
import { randomBytes } from "./_bytes.ts";

Deno.test("concurrent uploads through one pool: bounded buffers, exact bytes", async () => {
  const tmp = await tempDir();
  try {
    const partSize = 64 * 1024;
    const pool = new PartBufferPool(partSize, 3);
    const sim = new SimStore({ minPartSize: 1, faults: { latencyMs: [0, 3] }, seed: 5 });
    let peak = 0;
    const files: { path: string; bytes: Uint8Array }[] = [];
    for (let i = 0; i < 4; i++) {
      const bytes = randomBytes(partSize * (3 + i) + 1234 * i + 7);
      const path = join(tmp.path, `f${i}`);
      await writeFile(path, bytes);
      files.push({ path, bytes });
    }
    const timer = setInterval(() => (peak = Math.max(peak, pool.outstanding)), 0);
    await Promise.all(files.map((f, i) =>
      uploadFile(sim, `k${i}`, f.path, {
        minPartSize: 1,
        partSize,
        concurrency: 2,
        pool,
        onProgress: () => (peak = Math.max(peak, pool.outstanding)),
      })
    ));
    clearInterval(timer);
    assert.ok(peak <= 3, `peak ${peak} buffers out of 3`);
    assert.equal(pool.outstanding, 0, "every buffer came back");
    for (const [i, f] of files.entries()) {
      assert.deepEqual(new Uint8Array((await sim.get(`k${i}`)).bytes), f.bytes);
    }
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("a failed upload gives its buffers back", async () => {
  const tmp = await tempDir();
  try {
    const partSize = 64 * 1024;
    const pool = new PartBufferPool(partSize, 2);
    const sim = new SimStore({ minPartSize: 1 });
    const path = join(tmp.path, "f");
    await writeFile(path, randomBytes(partSize * 5));
    sim.setUnavailable(true);
    await assert.rejects(
      uploadFile(sim, "k", path, { partSize, minPartSize: 1, concurrency: 2, pool }),
    );
    assert.equal(pool.outstanding, 0);
    sim.setUnavailable(false);
    await uploadFile(sim, "k", path, { partSize, minPartSize: 1, concurrency: 2, pool });
    assert.equal(pool.outstanding, 0);
  } finally {
    await tmp.cleanup();
  }
});
