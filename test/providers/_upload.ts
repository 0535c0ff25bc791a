// uploadFile against a real emulator (Azurite, fake-gcs-server): a small file goes as one put,
// an 11 MiB one in 5 MiB parts through the store's multipart flow, and both read back.
import assert from "node:assert/strict";
import { join } from "node:path";
import type { ObjectStore } from "../../providers/types.ts";
import { uploadFile } from "../../providers/upload.ts";
import { tempDir } from "../_util.ts";
import { randomBytes } from "./_bytes.ts";

const MiB = 1024 * 1024;

/**
 * Uploads a `smallSize`-byte file (one put) and an 11 MiB one (5 MiB parts, `concurrency` at a
 * time) under `file/`, and checks the large one's size and its last bytes.
 */
export async function checkUploadFile(
  store: ObjectStore,
  options: { smallSize: number; concurrency?: number; tail: number },
): Promise<void> {
  const dir = await tempDir("tierd-upload-file");
  try {
    const small = join(dir.path, "small.log");
    const large = join(dir.path, "large.log");
    await Deno.writeFile(small, randomBytes(options.smallSize));
    const largeBody = randomBytes(11 * MiB);
    await Deno.writeFile(large, largeBody);
    assert.equal(
      (await uploadFile(store, "file/small.log", small, { partSize: 5 * MiB })).status,
      "Created",
    );
    assert.equal(
      (await uploadFile(store, "file/large.log", large, {
        partSize: 5 * MiB,
        concurrency: options.concurrency,
      })).status,
      "Created",
    );
    assert.equal((await store.head("file/large.log")).size, largeBody.length);
    const tail = await store.get("file/large.log", {
      range: { start: largeBody.length - options.tail, length: options.tail + 7 },
    });
    assert.deepEqual(tail.bytes, largeBody.subarray(-options.tail));
    assert.equal(tail.size, largeBody.length);
  } finally {
    await dir.cleanup();
  }
}
