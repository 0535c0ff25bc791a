// Storage class and customer-managed encryption on GCS and Azure, checked on the wire against
// fake-gcs-server and Azurite (which accept or ignore them): the final objects carry the class or
// tier, every write carries the KMS key or encryption scope (staged parts and markers too, but
// never a colder class), and the copies are read, checked and deleted by a store configured
// without them (the setting changed). Skipped with one loud line without the emulators (failed
// in CI).
import assert from "node:assert/strict";
import { AzureStore } from "../../providers/azure/store.ts";
import { NoTokenSource } from "../../providers/gcs/credentials.ts";
import { GcsStore } from "../../providers/gcs/store.ts";
import type { FetchFn } from "../../providers/http.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { concatBytes } from "../../src/base/bytes.ts";
import { findAzurite, startAzurite } from "../fixtures/azurite.ts";
import { findFakeGcs, startFakeGcs } from "../fixtures/fake_gcs.ts";
import { randomBytes } from "./_bytes.ts";
import { join } from "node:path";
import { initHashes, xxh3_128 } from "../../src/hash.ts";
import { verifyContent } from "../../src/tier/verify_content.ts";

await initHashes();

/** A request as it went out: method, URL, headers and body as text. */
interface Sent {
  method: string;
  url: URL;
  headers: Headers;
  body: string;
}

function recording(sent: Sent[]): FetchFn {
  return async (input, init) => {
    const body = init.body instanceof Uint8Array ? new TextDecoder().decode(init.body) : "";
    sent.push({
      method: init.method ?? "GET",
      url: new URL(input),
      headers: new Headers(init.headers),
      body,
    });
    return await fetch(input, init);
  };
}

/**
 * A PUT and a three-part multipart upload through `store`; both read back, proven against the
 * local bytes as eviction proves a copy, and deleted by `plain`.
 */
async function roundTrip(store: ObjectStore, plain: ObjectStore): Promise<string[]> {
  const small = randomBytes(3000);
  assert.equal((await store.put("ws/small.log", small, { ifAbsent: true })).status, "Created");
  const parts = [randomBytes(5 * 1024 * 1024), randomBytes(5 * 1024 * 1024), randomBytes(777)];
  const id = await store.createMultipart("ws/big.log", { metadata: { "end-offset": "9" } });
  const done = [];
  for (const [i, p] of parts.entries()) done.push(await store.putPart("ws/big.log", id, i + 1, p));
  await store.completeMultipart("ws/big.log", id, done, { ifAbsent: true });
  const dir = await Deno.makeTempDir({ prefix: "tierd-ws-" });
  try {
    for (
      const [key, bytes] of [["ws/small.log", small], ["ws/big.log", concatBytes(parts)]] as const
    ) {
      assert.deepEqual((await plain.get(key)).bytes, bytes, key);
      const path = join(dir, key.replace("/", "-"));
      await Deno.writeFile(path, bytes);
      const proof = await verifyContent(plain, await plain.head(key, { checksums: true }), {
        path,
        size: bytes.length,
        checksum: xxh3_128(bytes),
      });
      assert.ok(["stored", "read-back"].includes(proof.method), `${key}: ${proof.method}`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  assert.equal((await plain.head("ws/big.log")).size, 10 * 1024 * 1024 + 777);
  assert.deepEqual(await plain.deleteMany(["ws/small.log", "ws/big.log"]), []);
  await assert.rejects(plain.head("ws/small.log"));
  return ["ws/small.log", "ws/big.log"];
}

const gcsFound = await findFakeGcs();
if ("reason" in gcsFound) {
  if (Deno.env.get("CI") === "true") throw new Error(`fake-gcs-server is required in CI`);
  Deno.test({ name: `GCS write settings (skipped: ${gcsFound.reason})`, ignore: true, fn() {} });
} else {
  Deno.test("GCS: storage class on the final objects, the KMS key on every write, read and deleted after the setting changes", async () => {
    const server = (await startFakeGcs())!;
    try {
      const sent: Sent[] = [];
      const key = "projects/p/locations/global/keyRings/r/cryptoKeys/tierd";
      const open = (write?: { storageClass?: string; kmsKeyName?: string }, log?: Sent[]) =>
        new GcsStore({
          bucket: server.bucket,
          endpoint: server.endpoint,
          tokens: new NoTokenSource(),
          conditionalCompose: "head",
          write,
          fetch: log ? recording(log) : undefined,
        });
      await roundTrip(open({ storageClass: "NEARLINE", kmsKeyName: key }, sent), open());
      const writes = sent.filter((s) => s.method === "POST" && !s.url.pathname.endsWith("/delete"));
      assert.ok(writes.length >= 6, `${writes.length} writes`);
      for (const s of writes) {
        assert.equal(s.url.searchParams.get("kmsKeyName"), key, `${s.url.pathname}`);
      }
      const finals = writes.filter((s) =>
        s.body.includes('"ws/small.log"') || s.url.pathname.includes("ws%2Fbig.log/compose") ||
        s.url.pathname.endsWith("ws/big.log/compose")
      );
      assert.ok(
        finals.length >= 2,
        `the put and the final compose: ${writes.map((s) => s.url.pathname)}`,
      );
      for (const s of finals) assert.match(s.body, /"storageClass":"NEARLINE"/, s.url.pathname);
      const staged = writes.filter((s) => !finals.includes(s));
      assert.ok(staged.length >= 3);
      for (const s of staged) {
        assert.doesNotMatch(s.body, /storageClass/, "staged parts stay in the default class");
      }
    } finally {
      await server.stop();
    }
  });
}

const azFound = await findAzurite();
if ("reason" in azFound) {
  if (Deno.env.get("CI") === "true") throw new Error(`Azurite is required in CI`);
  Deno.test({ name: `Azure write settings (skipped: ${azFound.reason})`, ignore: true, fn() {} });
} else {
  Deno.test("Azure: the access tier on the blobs, the encryption scope on every write, read and deleted after the setting changes", async () => {
    const azurite = (await startAzurite())!;
    try {
      const sent: Sent[] = [];
      const open = (write?: { accessTier?: string; encryptionScope?: string }, log?: Sent[]) =>
        new AzureStore({
          account: azurite.account,
          container: azurite.container,
          endpoint: azurite.endpoint,
          sharedKey: azurite.key,
          write,
          fetch: log ? recording(log) : undefined,
        });
      await roundTrip(open({ accessTier: "Cool", encryptionScope: "tierd-scope" }, sent), open());
      const writes = sent.filter((s) => s.method === "PUT");
      assert.ok(writes.length >= 5, `${writes.length} writes`);
      for (const s of writes) {
        assert.equal(s.headers.get("x-ms-encryption-scope"), "tierd-scope", s.url.search);
      }
      const blobs = writes.filter((s) =>
        s.url.searchParams.get("comp") === "blocklist" ||
        !s.url.searchParams.has("comp") && s.url.pathname.endsWith("ws/small.log")
      );
      assert.equal(blobs.length, 2, "the put and the block list");
      for (const s of blobs) assert.equal(s.headers.get("x-ms-access-tier"), "Cool");
      for (const s of writes.filter((s) => !blobs.includes(s))) {
        assert.equal(s.headers.get("x-ms-access-tier"), null, "blocks and markers take no tier");
      }
    } finally {
      await azurite.stop();
    }
  });
}
