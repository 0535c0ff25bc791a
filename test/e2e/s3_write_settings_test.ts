// Buckets as companies configure them, against a real MinIO with its built-in KMS (a static key,
// MINIO_KMS_SECRET_KEY): with `sse = "aws:kms"`, a key id, a bucket key, an encryption context
// and a storage class, every PutObject and CreateMultipartUpload carries the headers (checked on
// the wire) and MinIO answers that it encrypted with that key; every segment is copied, proven
// and evicted; and copies made under that setting are still read, proven and deleted by a store
// configured without it. A key the store does not have fails the probe, naming the key setting.
// MinIO runs natively or as a container; without it the suite is skipped loudly (failed in CI).
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { probeStore } from "../../providers/probe.ts";
import type { WriteSettings } from "../../providers/s3/requests.ts";
import type { FetchFn } from "../../providers/http.ts";
import { xxh3_128 } from "../../src/hash.ts";
import { verifyContent } from "../../src/tier/verify_content.ts";
import { minioStore } from "../fixtures/_agent.ts";
import { type MinioServer, startMinio } from "../fixtures/minio.ts";
import { copyProveEvict } from "./_copy_prove_evict.ts";

const PREFIX = "iggy";
const KMS_KEY = "tierd-key";

/** What went over the wire: each request's method, query and headers, and its answer's headers. */
interface Exchange {
  method: string;
  url: string;
  sent: Headers;
  status: number;
  answered: Headers;
}

function s3(minio: MinioServer, write: WriteSettings | undefined, exchanges?: Exchange[]) {
  const recording: FetchFn = async (input, init) => {
    const res = await fetch(input, init);
    exchanges?.push({
      method: init.method ?? "GET",
      url: input,
      sent: new Headers(init.headers),
      status: res.status,
      answered: res.headers,
    });
    return res;
  };
  return minioStore(minio, { checksum: "auto", write, fetch: recording });
}

Deno.test("S3 SSE-KMS and storage class on MinIO's KMS: on every write, copies proven and evicted, still read and deleted after the setting changes", async (t) => {
  const secret = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
  const minio = await startMinio({ env: { MINIO_KMS_SECRET_KEY: `${KMS_KEY}:${secret}` } });
  if (!minio) return; // skipped loudly by the fixture (a failure in CI)
  try {
    const kms: WriteSettings = {
      sse: "aws:kms",
      kmsKeyId: KMS_KEY,
      bucketKey: true,
      context: { app: "tierd" },
      storageClass: "REDUCED_REDUNDANCY", // MinIO's other class besides STANDARD
    };

    await t.step(
      "a key the store does not have fails the probe and names the setting",
      async () => {
        const result = await probeStore(
          s3(minio, { sse: "aws:kms", kmsKeyId: "no-such-key" }),
          PREFIX,
          { writes: true },
        );
        assert.equal(result.ok, false);
        assert.equal((result as { stage: string }).stage, "writes", "reads still work");
        assert.match((result as { reason: string }).reason, /sse_kms_key_id/);
      },
    );

    await t.step(
      "every write carries the settings; every segment is copied, proven and evicted; a store without them still reads, proves and deletes the copies",
      async () => {
        const exchanges: Exchange[] = [];
        const store = s3(minio, kms, exchanges);
        assert.deepEqual(await probeStore(store, PREFIX, { writes: true }), { ok: true });
        const plain = s3(minio, undefined);
        const keys: string[] = [];
        const evicted = await copyProveEvict(store, {
          beforeEvict: async (r, sealed) => {
            // On the wire: every object write asked for the key and the class; MinIO says it did
            // (on a PutObject's answer).
            const writes = exchanges.filter((e) =>
              e.method === "PUT" && !new URL(e.url).searchParams.has("partNumber") ||
              e.method === "POST" && new URL(e.url).searchParams.has("uploads")
            );
            assert.ok(writes.length >= sealed.length, `${writes.length} writes`);
            assert.ok(
              writes.some((e) => new URL(e.url).searchParams.has("uploads")),
              "multipart uploads among them",
            );
            for (const e of writes) {
              const what = `${e.method} ${new URL(e.url).pathname}`;
              assert.equal(e.sent.get("x-amz-server-side-encryption"), "aws:kms", what);
              assert.equal(
                e.sent.get("x-amz-server-side-encryption-aws-kms-key-id"),
                KMS_KEY,
                what,
              );
              assert.equal(
                e.sent.get("x-amz-server-side-encryption-bucket-key-enabled"),
                "true",
                what,
              );
              assert.deepEqual(
                JSON.parse(atob(e.sent.get("x-amz-server-side-encryption-context")!)),
                { app: "tierd" },
                what,
              );
              assert.equal(e.sent.get("x-amz-storage-class"), "REDUCED_REDUNDANCY", what);
              if (e.method === "PUT" && e.status === 200) {
                assert.equal(e.answered.get("x-amz-server-side-encryption"), "aws:kms", what);
              }
            }
            const parts = exchanges.filter((e) => new URL(e.url).searchParams.has("partNumber"));
            assert.ok(parts.length > 0);
            for (const e of parts) {
              assert.equal(
                e.sent.get("x-amz-server-side-encryption"),
                null,
                "parts inherit the upload's",
              );
            }

            // A store configured without SSE (the setting changed) reads and proves the copies.
            for (const seg of sealed) {
              const key = r.ledger.keys(seg.start).log;
              keys.push(key);
              const local = new Uint8Array(await readFile(seg.logPath));
              assert.deepEqual((await plain.get(key)).bytes, local, key);
              const head = await plain.head(key, { checksums: true });
              const proof = await verifyContent(plain, head, {
                path: seg.logPath,
                size: local.length,
                checksum: xxh3_128(local),
              });
              assert.ok(["stored", "read-back"].includes(proof.method), key);
            }
          },
        });
        assert.equal(keys.length, evicted);
        // And a store without the settings deletes them.
        assert.deepEqual(await plain.deleteMany(keys), []);
        for (const key of keys) await assert.rejects(plain.head(key), /NotFound|404|no object/i);
      },
    );
  } finally {
    await minio.stop();
  }
});
