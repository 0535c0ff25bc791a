// Proving a copy's bytes: by the store's own checksum when it keeps one (no GET), else by a
// read-back in ranged GETs that each wait for the bandwidth limit first; a changed local file is
// the local file's fault, never the copy's.
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { decorateStore } from "../../providers/decorate.ts";
import { SimStore } from "../../providers/sim/store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { initHashes, xxh3_128 } from "../../src/hash.ts";
import { CopyMismatchError, SegmentChangedError } from "../../src/tier/copy_segment.ts";
import { type Bandwidth, verifyContent } from "../../src/tier/verify_content.ts";
import { tempDir } from "../_util.ts";

await initHashes();

/** A store that keeps no checksum: HEADs never show one. */
function withoutChecksums(sim: SimStore): ObjectStore {
  const inner = decorateStore(sim, (call) => call.run(call.signal));
  return { ...inner, head: (key, o) => inner.head(key, { ...o, checksums: false }) };
}

Deno.test("verify content: the store's checksum, else a read-back paced by the bandwidth limit", async () => {
  const dir = await tempDir("tierd-verify");
  try {
    const bytes = crypto.getRandomValues(new Uint8Array(50_000));
    const path = join(dir.path, "0.log");
    await writeFile(path, bytes);
    const local = { path, size: bytes.length, checksum: xxh3_128(bytes) };
    const sim = new SimStore();
    await sim.put("k", bytes);

    sim.resetCounts();
    const stored = await verifyContent(sim, await sim.head("k", { checksums: true }), local);
    assert.deepEqual(stored, {
      method: "stored",
      algorithm: "crc64nvme",
      bytesRead: 0,
      requests: 0,
    });
    assert.equal(sim.requestCount("get"), 0);

    const taken: number[] = [];
    const bandwidth: Bandwidth = {
      rate: 1000,
      take: (n) => {
        taken.push(n);
        return Promise.resolve();
      },
    };
    const plain = withoutChecksums(sim);
    const head = await plain.head("k", { checksums: true });
    assert.equal(head.checksums, undefined);
    const proof = await verifyContent(plain, head, local, { bandwidth, chunkSize: 16_384 });
    assert.deepEqual(proof, { method: "read-back", bytesRead: 50_000, requests: 4 });
    assert.deepEqual(taken, [16_384, 16_384, 16_384, 848], "each GET waited for its bytes first");

    // One byte flipped in the store: both ways tell.
    const flipped = bytes.slice();
    flipped[123] ^= 1;
    await sim.put("k", flipped);
    await assert.rejects(
      verifyContent(sim, await sim.head("k", { checksums: true }), local),
      CopyMismatchError,
    );
    await assert.rejects(
      verifyContent(plain, await plain.head("k", { checksums: true }), local),
      (err: unknown) => err instanceof CopyMismatchError && /xxh3-128/.test(err.message),
    );
    // A local file that changed is not the copy's fault.
    await writeFile(path, flipped);
    await assert.rejects(
      verifyContent(sim, await sim.head("k", { checksums: true }), local),
      SegmentChangedError,
    );
  } finally {
    await dir.cleanup();
  }
});

Deno.test("verify content: a stored checksum that differs never condemns a copy — the read-back decides", async () => {
  const dir = await tempDir("tierd-verify-lying");
  try {
    const bytes = crypto.getRandomValues(new Uint8Array(20_000));
    const path = join(dir.path, "0.log");
    await writeFile(path, bytes);
    const local = { path, size: bytes.length, checksum: xxh3_128(bytes) };
    const sim = new SimStore();
    await sim.put("k", bytes);
    const head = await sim.head("k", { checksums: true });
    // A store that labels another value as the object's checksum (a checksum of a kind tierd did
    // not ask for, an ETag that is not an MD5 under encryption, a store's bug).
    const lying = {
      ...head,
      checksums: [{
        algorithm: "crc64nvme" as const,
        value: "AAAAAAAAAAA=",
        type: "full" as const,
      }],
    };
    sim.resetCounts();
    const proof = await verifyContent(sim, lying, local);
    assert.equal(proof.method, "read-back", "whole bytes are proven by reading them");
    assert.equal(proof.bytesRead, bytes.length);
    assert.equal(proof.setAside, "crc64nvme AAAAAAAAAAA=");
    assert.ok(sim.requestCount("get") > 0);
    // And bytes that are damaged are still found, by the read-back.
    const flipped = bytes.slice();
    flipped[7] ^= 1;
    await sim.put("k", flipped);
    await assert.rejects(
      verifyContent(sim, { ...lying, etag: undefined }, local),
      (err: unknown) => err instanceof CopyMismatchError && /xxh3-128/.test(err.message),
    );
  } finally {
    await dir.cleanup();
  }
});
