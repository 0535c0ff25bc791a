// src/base/bytes.ts: joining chunks, and file writes and reads that loop over short transfers.
import assert from "node:assert/strict";
import { type FileHandle, open } from "node:fs/promises";
import { join } from "node:path";
import { concatBytes, readInto, writeAll } from "../../src/base/bytes.ts";
import { tempDir } from "../_util.ts";

/** A file in memory that moves at most `step` bytes per call, like a short read or write. */
class ShortFile {
  bytes = new Uint8Array(0);
  #position = 0;
  constructor(readonly step: number) {}
  write(buf: Uint8Array, offset: number, length: number, position?: number | null) {
    const at = position ?? this.#position;
    const n = Math.min(this.step, length);
    if (at + n > this.bytes.length) {
      const grown = new Uint8Array(at + n);
      grown.set(this.bytes);
      this.bytes = grown;
    }
    this.bytes.set(buf.subarray(offset, offset + n), at);
    if (position == null) this.#position += n;
    return Promise.resolve({ bytesWritten: n, buffer: buf });
  }
  read(buf: Uint8Array, offset: number, length: number, position: number) {
    const n = Math.max(0, Math.min(this.step, length, this.bytes.length - position));
    buf.set(this.bytes.subarray(position, position + n), offset);
    return Promise.resolve({ bytesRead: n, buffer: buf });
  }
}

Deno.test("bytes: concatBytes joins chunks in order, empty ones included", () => {
  const a = new Uint8Array([1, 2]);
  const got = concatBytes([a, new Uint8Array(0), new Uint8Array([3])]);
  assert.deepEqual(got, new Uint8Array([1, 2, 3]));
  assert.deepEqual(concatBytes([]), new Uint8Array(0));
  assert.notEqual(concatBytes([a]), a, "always a new array");
});

Deno.test("bytes: writeAll loops over short writes, at a position or the file's own", async () => {
  const file = new ShortFile(3);
  const fh = file as unknown as FileHandle;
  await writeAll(fh, new Uint8Array([1, 2, 3, 4, 5, 6, 7]));
  await writeAll(fh, new Uint8Array([8, 9]));
  assert.deepEqual(file.bytes, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9]));
  await writeAll(fh, new Uint8Array([0, 0, 0, 0]), 2);
  assert.deepEqual(file.bytes, new Uint8Array([1, 2, 0, 0, 0, 0, 7, 8, 9]));
});

Deno.test("bytes: readInto loops over short reads and stops at the end of the file", async () => {
  const file = new ShortFile(2);
  file.bytes = new Uint8Array([1, 2, 3, 4, 5]);
  const fh = file as unknown as FileHandle;
  const buf = new Uint8Array(3);
  assert.equal(await readInto(fh, buf, 1), 3);
  assert.deepEqual(buf, new Uint8Array([2, 3, 4]));
  const tail = new Uint8Array(4);
  assert.equal(await readInto(fh, tail, 3), 2, "the file ends first");
  assert.deepEqual(tail, new Uint8Array([4, 5, 0, 0]));
  assert.equal(await readInto(fh, new Uint8Array(0), 9), 0);
});

Deno.test("bytes: writeAll and readInto on a real file (appending without a position)", async () => {
  const dir = await tempDir("tierd-bytes");
  const path = join(dir.path, "f");
  const fh = await open(path, "a+");
  try {
    await writeAll(fh, new Uint8Array([1, 2, 3]));
    await writeAll(fh, new Uint8Array([4, 5]));
    const buf = new Uint8Array(8);
    assert.equal(await readInto(fh, buf, 0), 5);
    assert.deepEqual(buf.subarray(0, 5), new Uint8Array([1, 2, 3, 4, 5]));
  } finally {
    await fh.close();
    await dir.cleanup();
  }
});
