// GcsStore against a real fake-gcs-server: compose trees past 32 parts, the shared multipart
// writer and uploadFile, staged objects cleaned up after completion and abort, strays listed for
// the sweep, and the boot probe. Skipped with one loud line without a binary (failed in CI).
import { listBounded } from "../../../providers/listing.ts";
import assert from "node:assert/strict";
import { NoTokenSource } from "../../../providers/gcs/credentials.ts";
import { GcsStore, type GcsStoreOptions } from "../../../providers/gcs/store.ts";
import { BufferedMultipartWriter } from "../../../providers/multipart_writer.ts";
import { probeStore } from "../../../providers/probe.ts";
import { StoreError } from "../../../providers/types.ts";
import { type FakeGcsServer, findFakeGcs, startFakeGcs } from "../../fixtures/fake_gcs.ts";
import { announceSkip, freePort } from "../../fixtures/_server.ts";
import { concatBytes } from "../../../src/base/bytes.ts";
import { randomBytes } from "../_bytes.ts";
import { checkUploadFile } from "../_upload.ts";

const MiB = 1024 * 1024;

function storeFor(server: FakeGcsServer, options: Partial<GcsStoreOptions> = {}): GcsStore {
  return new GcsStore({
    bucket: server.bucket,
    endpoint: server.endpoint,
    tokens: new NoTokenSource(),
    conditionalCompose: "head", // fake-gcs-server ignores ifGenerationMatch on compose
    ...options,
  });
}

const found = await findFakeGcs();
if ("reason" in found) {
  if (Deno.env.get("CI") === "true") {
    throw new Error(`fake-gcs-server is required in CI: ${found.reason}`);
  }
  announceSkip(`GcsStore tests against fake-gcs-server: ${found.reason}`);
  Deno.test({ name: `fake-gcs (skipped: ${found.reason})`, ignore: true, fn() {} });
} else {
  Deno.test("fake-gcs: multipart uploads by compose", async (t) => {
    const server = (await startFakeGcs())!;
    const store = storeFor(server);
    try {
      await t.step("70 parts compose through a tree (32 per call) into one object", async () => {
        const key = "tree/big.log";
        const uploadId = await store.createMultipart(key, { metadata: { "end-offset": "69" } });
        const bodies = Array.from({ length: 70 }, (_, i) => randomBytes(1000 + i));
        const order = bodies.map((_, i) => i + 1).reverse();
        const parts = [];
        for (let i = 0; i < order.length; i += 10) {
          parts.push(
            ...await Promise.all(
              order.slice(i, i + 10).map((n) => store.putPart(key, uploadId, n, bodies[n - 1])),
            ),
          );
        }
        assert.equal((await store.completeMultipart(key, uploadId, parts)).status, "Created");
        const got = await store.get(key);
        const expected = concatBytes(bodies);
        assert.equal(got.size, expected.length);
        assert.ok(got.bytes.every((b, i) => b === expected[i]), "the parts, in part order");
        assert.deepEqual((await store.head(key)).metadata, { "end-offset": "69" });
        assert.deepEqual(
          await store.listMultipartUploads(""),
          [],
          "marker, parts and intermediates are gone",
        );
        assert.deepEqual((await listBounded(store, "")).map((o) => o.key), [key]);
      });

      await t.step("abort removes the marker and every staged part", async () => {
        const uploadId = await store.createMultipart("abort/x");
        await Promise.all(
          [1, 2, 3].map((n) => store.putPart("abort/x", uploadId, n, randomBytes(10))),
        );
        assert.equal((await listBounded(store, ".tierd-multipart/abort/")).length, 4);
        await store.abortMultipart("abort/x", uploadId);
        assert.deepEqual(await listBounded(store, ".tierd-multipart/"), []);
        const err = await store.completeMultipart("abort/x", uploadId, [{
          partNumber: 1,
          etag: "1",
        }]).catch((e) => e);
        assert.ok(err instanceof StoreError);
        assert.equal(err.detail.code, "NoSuchUpload");
        await store.abortMultipart("abort/x", uploadId); // twice is fine
      });

      await t.step(
        "a part that outlived its marker is still listed, so a sweep removes it",
        async () => {
          const uploadId = await store.createMultipart("stray/x");
          await store.abortMultipart("stray/x", uploadId);
          await store.putPart("stray/x", uploadId, 1, randomBytes(10)); // raced the abort
          const uploads = await store.listMultipartUploads("stray/");
          assert.deepEqual(uploads.map((u) => [u.key, u.uploadId]), [["stray/x", uploadId]]);
          await store.abortMultipart("stray/x", uploadId);
          assert.deepEqual(await store.listMultipartUploads("stray/"), []);
        },
      );

      await t.step("the shared writer: 3 parts in flight, ifAbsent twice", async () => {
        const body = randomBytes(11 * MiB + 3);
        const write = async () => {
          const writer = new BufferedMultipartWriter(store, "writer/w.log", {
            partSize: 5 * MiB,
            concurrency: 3,
            ifAbsent: true,
            metadata: { format: "iggy-0.9" },
          });
          for (let i = 0; i < body.length; i += 777_777) {
            await writer.write(body.subarray(i, i + 777_777));
          }
          return await writer.complete();
        };
        assert.equal((await write()).status, "Created");
        assert.deepEqual(await write(), { status: "AlreadyExists" });
        assert.deepEqual(
          await store.listMultipartUploads("writer/"),
          [],
          "the refused upload was aborted",
        );
        const got = await store.get("writer/w.log");
        assert.ok(got.bytes.length === body.length && got.bytes.every((b, i) => b === body[i]));
      });

      await t.step("uploadFile: one upload up to part size, compose above it", async () => {
        await checkUploadFile(store, { smallSize: 100, tail: 2 });
      });
    } finally {
      await server.stop();
    }
  });

  Deno.test("fake-gcs: the boot probe names a missing bucket and an unreachable endpoint", async () => {
    const server = (await startFakeGcs())!;
    try {
      assert.deepEqual(await probeStore(storeFor(server), "iggy/"), { ok: true });
      const missing = storeFor(server, { bucket: "no-such-bucket" });
      const err = await missing.list("").catch((e) => e);
      assert.equal(err.kind, "NotFound");
      assert.equal(err.detail.code, "notFound");
      const probe = await probeStore(missing, "iggy/");
      assert.match(!probe.ok ? probe.reason : "", /bucket 'no-such-bucket' does not exist/);
      const down = await probeStore(
        storeFor(server, { endpoint: `http://127.0.0.1:${freePort()}` }),
        "iggy/",
      );
      assert.match(!down.ok ? down.reason : "", /^endpoint unreachable/);
    } finally {
      await server.stop();
    }
  });
}
