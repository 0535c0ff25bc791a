// AzureStore against a real Azurite: a wrong key or SAS is refused as Auth, a missing container
// is NotFound, the boot probe names what is wrong, large objects go through the shared
// multipart writer as block lists, metadata names travel as C# identifiers, and listings come in
// Azure's UTF-16 order. Skipped with one loud line without Azurite (failed in CI).
import { listBounded } from "../../../providers/listing.ts";
import assert from "node:assert/strict";
import { AzureStore, type AzureStoreOptions } from "../../../providers/azure/store.ts";
import { BufferedMultipartWriter } from "../../../providers/multipart_writer.ts";
import { probeStore } from "../../../providers/probe.ts";
import { StoreError } from "../../../providers/types.ts";
import { type AzuriteServer, findAzurite, startAzurite } from "../../fixtures/azurite.ts";
import { announceSkip, freePort } from "../../fixtures/_server.ts";
import { accountSas } from "./_sas.ts";
import { assertNoLeak } from "../_faults.ts";
import { checkUploadFile } from "../_upload.ts";
import { randomBytes } from "../_bytes.ts";

const MiB = 1024 * 1024;
const WRONG_KEY = btoa("a wrong key for devstoreaccount1, 64 bytes long, padded.........");

function storeFor(azurite: AzuriteServer, options: Partial<AzureStoreOptions> = {}): AzureStore {
  return new AzureStore({
    account: azurite.account,
    container: azurite.container,
    endpoint: azurite.endpoint,
    sharedKey: azurite.key,
    ...options,
  });
}

function assertNoSecret(err: unknown, secrets: string[]): void {
  assert.ok(err instanceof StoreError);
  assertNoLeak(err, secrets.map((secret) => [secret, "secret"] as const), { depth: 8 });
}

const found = await findAzurite();
if ("reason" in found) {
  if (Deno.env.get("CI") === "true") throw new Error(`Azurite is required in CI: ${found.reason}`);
  announceSkip(`AzureStore tests against Azurite: ${found.reason}`);
  Deno.test({ name: `azurite (skipped: ${found.reason})`, ignore: true, fn() {} });
} else {
  Deno.test("azurite: credentials, container and the boot probe", async (t) => {
    const azurite = (await startAzurite())!;
    try {
      await t.step("the right key lists; the probe passes", async () => {
        assert.deepEqual(await probeStore(storeFor(azurite), "iggy/"), { ok: true });
      });

      await t.step("a wrong key is refused as Auth, naming the key, never showing it", async () => {
        const store = storeFor(azurite, { sharedKey: WRONG_KEY });
        const err = await store.list("iggy/").catch((e) => e);
        assert.ok(err instanceof StoreError);
        assert.equal(err.kind, "Auth", err.message);
        // Azure answers a bad signature with 403 AuthenticationFailed; Azurite 3.35 with 403
        // AuthorizationFailure. Both are Auth and both messages point at the key.
        assert.ok(["AuthenticationFailed", "AuthorizationFailure"].includes(err.detail.code!));
        assert.equal(err.detail.status, 403);
        assert.match(err.message, /shared key/);
        assert.match(err.message, /devstoreaccount1/);
        assertNoSecret(err, [WRONG_KEY, azurite.key]);
        // HEAD answers have no body: the code comes from x-ms-error-code.
        const head = await store.head("iggy/x").catch((e) => e);
        assert.equal(head.kind, "Auth");
        assert.equal(head.detail.code, err.detail.code);
        const probe = await probeStore(store, "iggy/");
        assert.equal(probe.ok, false);
        assert.match(
          !probe.ok ? probe.reason : "",
          /^credentials rejected.*(AuthenticationFailed|AuthorizationFailure)/,
        );
      });

      await t.step(
        "a missing container is NotFound (ContainerNotFound), and the probe says so",
        async () => {
          const store = storeFor(azurite, { container: "no-such-container" });
          const err = await store.list("").catch((e) => e);
          assert.equal(err.kind, "NotFound");
          assert.equal(err.detail.code, "ContainerNotFound");
          const probe = await probeStore(store, "iggy/");
          assert.match(
            !probe.ok ? probe.reason : "",
            /container 'no-such-container' does not exist/,
          );
        },
      );

      await t.step(
        "a SAS works; a wrong or read-only SAS is Auth; the SAS never shows",
        async () => {
          const good = await accountSas({ account: azurite.account, key: azurite.key });
          const store = storeFor(azurite, { sharedKey: undefined, sasToken: good });
          assert.equal((await store.put("sas/ok", new Uint8Array([1]))).status, "Created");
          const forged = await accountSas({ account: azurite.account, key: WRONG_KEY });
          const bad = storeFor(azurite, { sharedKey: undefined, sasToken: forged });
          const err = await bad.list("sas/").catch((e) => e);
          assert.equal(err.kind, "Auth", err.message);
          assertNoSecret(err, [forged, forged.slice(forged.indexOf("sig=") + 4)]);
          const readOnly = await accountSas({
            account: azurite.account,
            key: azurite.key,
            permissions: "rl",
          });
          const reader = storeFor(azurite, { sharedKey: undefined, sasToken: readOnly });
          assert.equal((await reader.list("sas/")).objects.length, 1);
          const denied = await reader.put("sas/no", new Uint8Array([1])).catch((e) => e);
          assert.equal(denied.kind, "Auth", denied.message);
          assertNoSecret(denied, [readOnly]);
          const expired = await accountSas({
            account: azurite.account,
            key: azurite.key,
            expiry: new Date(Date.now() - 60_000),
          });
          const late = await storeFor(azurite, { sharedKey: undefined, sasToken: expired }).list("")
            .catch((e) => e);
          assert.equal(late.kind, "Auth", late.message);
          await storeFor(azurite).deleteMany(["sas/ok"]);
        },
      );

      await t.step("nothing listens: Transport, and the probe says unreachable", async () => {
        const store = storeFor(azurite, { endpoint: `http://127.0.0.1:${freePort()}` });
        const err = await store.list("").catch((e) => e);
        assert.equal(err.kind, "Transport");
        const probe = await probeStore(store, "iggy/");
        assert.match(!probe.ok ? probe.reason : "", /^endpoint unreachable/);
      });
    } finally {
      await azurite.stop();
    }
  });

  Deno.test("azurite: blobs, block lists and listings", async (t) => {
    const azurite = (await startAzurite())!;
    const store = storeFor(azurite);
    try {
      await t.step(
        "metadata names go on the wire as C# identifiers (real Azure refuses '-')",
        async () => {
          await store.put("meta/o", new Uint8Array([1]), {
            metadata: { "end-offset": "7", "xxh3-128": "ab" },
          });
          const raw = await store.head("meta/o");
          assert.deepEqual(raw.metadata, { "end-offset": "7", "xxh3-128": "ab" });
          // Read the header names the server stored, past the store's decoding.
          const sas = await accountSas({ account: azurite.account, key: azurite.key });
          const response = await fetch(`${azurite.endpoint}/${azurite.container}/meta/o?${sas}`, {
            method: "HEAD",
          });
          await response.body?.cancel();
          const names = [...response.headers.keys()].filter((n) => n.startsWith("x-ms-meta-"))
            .sort();
          assert.deepEqual(names, ["x-ms-meta-end_offset", "x-ms-meta-xxh3_128"]);
        },
      );

      await t.step(
        "SharedKey: metadata names where _ meets a digit sign as the service sorts them",
        async () => {
          const store = storeFor(azurite);
          // Sent as part1/part_1, index2/index_size, i0/i_x: byte order and Azurite's
          // culture-aware order differ for each pair, and a wrong order is 403.
          const metadata = {
            "part1": "a",
            "part-1": "b",
            "index2": "c",
            "index-size": "d",
            "i0": "e",
            "i-x": "f",
          };
          assert.equal(
            (await store.put("meta/order", new Uint8Array([1]), { metadata })).status,
            "Created",
          );
          assert.deepEqual((await store.head("meta/order")).metadata, metadata);
        },
      );

      await t.step("names list in UTF-16 code-unit order, as on Azure, across pages", async () => {
        // Same names as the contract's list-utf8-order; Azure's order differs only in where
        // the surrogate pair (U+1F600) lands relative to U+FF5E.
        const names = ["Z", "a", "a-b", "a~", "b-c", "b/c", "b0", "é", "日本", "😀", "～"];
        for (const name of [...names].reverse()) {
          await store.put(`order/${name}`, new Uint8Array([1]));
        }
        const listed = (await listBounded(store, "order/", { pageSize: 3 })).map((o) =>
          o.key.slice(6)
        );
        assert.deepEqual(listed, names);
        await store.deleteMany(names.map((n) => `order/${n}`));
      });

      await t.step(
        "a 12 MiB object through the shared multipart writer, 3 blocks at once",
        async () => {
          const body = randomBytes(12 * MiB + 5);
          const ids: string[] = [];
          const writer = new BufferedMultipartWriter(store, "big/w.log", {
            partSize: 5 * MiB,
            concurrency: 3,
            ifAbsent: true,
            metadata: { "end-offset": "99" },
            contentType: "application/octet-stream",
            onUploadId: (id) => void ids.push(id),
          });
          for (let i = 0; i < body.length; i += 1_000_003) {
            await writer.write(body.subarray(i, i + 1_000_003));
          }
          const done = await writer.complete();
          const { etag, version } = await store.head("big/w.log");
          assert.deepEqual(done, { status: "Created", etag, version });
          assert.equal(ids.length, 1);
          const got = await store.get("big/w.log");
          assert.equal(got.size, body.length);
          assert.ok(got.bytes.every((b, i) => b === body[i]), "the blob is the bytes written");
          assert.deepEqual((await store.head("big/w.log")).metadata, { "end-offset": "99" });
          assert.deepEqual(await store.listMultipartUploads("big/"), [], "the marker is gone");
          assert.deepEqual(
            (await listBounded(store, "big/")).map((o) => o.key),
            ["big/w.log"],
            "no marker in listings",
          );
          // A second writer with ifAbsent: AlreadyExists, and its upload is cleaned up.
          const again = new BufferedMultipartWriter(store, "big/w.log", {
            partSize: 5 * MiB,
            ifAbsent: true,
          });
          await again.write(randomBytes(6 * MiB));
          assert.deepEqual(await again.complete(), { status: "AlreadyExists" });
          assert.deepEqual(await store.listMultipartUploads("big/"), []);
          assert.equal(
            (await store.get("big/w.log", { range: { start: 0, length: 4 } })).bytes[0],
            body[0],
          );
        },
      );

      await t.step("uploadFile: one Put Blob up to part size, a block list above it", async () => {
        await checkUploadFile(store, { smallSize: 1000, concurrency: 2, tail: 3 });
      });

      await t.step("an aborted upload cannot complete; its blocks never surface", async () => {
        const id = await store.createMultipart("abort/x");
        const part = await store.putPart("abort/x", id, 1, randomBytes(100));
        await store.abortMultipart("abort/x", id);
        const err = await store.completeMultipart("abort/x", id, [part]).catch((e) => e);
        assert.equal(err.kind, "NotFound");
        assert.equal(err.detail.code, "NoSuchUpload");
        assert.equal((await store.head("abort/x").catch((e) => e)).kind, "NotFound");
        assert.deepEqual(await listBounded(store, "abort/"), []);
      });
    } finally {
      await azurite.stop();
    }
  });
}
