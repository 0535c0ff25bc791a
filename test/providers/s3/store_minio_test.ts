// S3Store against a real MinIO: the boot probe's one-line reasons, clock-skew recovery, a
// presigned GET, uploadFile with real 5 MiB parts, an outage and recovery, and no secrets in
// real error answers. Skipped with one loud line without a MinIO binary (failed in CI).
import assert from "node:assert/strict";
import { join } from "node:path";
import { crc32, crc32Checksum } from "../../../providers/checksum.ts";
import { probeStore } from "../../../providers/probe.ts";
import type { S3StoreOptions } from "../../../providers/s3/store.ts";
import { uploadFile } from "../../../providers/upload.ts";
import { SimStore } from "../../../providers/sim/store.ts";
import { StoreError } from "../../../providers/types.ts";
import { findMinio, startMinio } from "../../fixtures/minio.ts";
import { announceSkip, freePort } from "../../fixtures/_server.ts";
import { minioStore } from "../../fixtures/_agent.ts";
import { tempDir } from "../../_util.ts";
import { assertNoLeak } from "../_faults.ts";
import { randomBytes } from "../_bytes.ts";
import { aheadClock } from "../../_fake_clock.ts";

const MiB = 1024 * 1024;

Deno.test("probe: generic stores say what kind of thing is wrong", async () => {
  const sim = new SimStore();
  assert.deepEqual(await probeStore(sim, "iggy/"), { ok: true });
  sim.setUnavailable(true);
  const down = await probeStore(sim, "iggy/");
  assert.equal(down.ok, false);
  assert.match(!down.ok ? down.reason : "", /^endpoint unreachable: sim store: /);
});

const found = await findMinio();
if ("reason" in found) {
  if (Deno.env.get("CI") === "true") throw new Error(`MinIO is required in CI: ${found.reason}`);
  announceSkip(`S3Store tests against MinIO: ${found.reason}`);
  Deno.test({ name: `s3 on MinIO (skipped: ${found.reason})`, ignore: true, fn() {} });
} else {
  Deno.test("s3 on MinIO", async (t) => {
    const minio = (await startMinio())!;
    try {
      await t.step(
        "probe: ok, then one line naming the endpoint, credentials, bucket or region",
        async () => {
          assert.deepEqual(await probeStore(minioStore(minio), "iggy/"), { ok: true });
          const reason = async (options: Partial<S3StoreOptions>) => {
            const result = await probeStore(minioStore(minio, options), "iggy/");
            assert.equal(result.ok, false);
            const text = result.ok ? "" : result.reason;
            assert.ok(!text.includes("\n"), "one line");
            return text;
          };
          assert.match(
            await reason({ endpoint: `http://127.0.0.1:${freePort()}` }),
            /^endpoint unreachable: http:\/\/127\.0\.0\.1:\d+: connection refused/,
          );
          assert.match(
            await reason({ endpoint: "http://tierd-no-such-host.invalid:9000" }),
            /^endpoint unreachable: .*does not resolve \(DNS\)/,
          );
          assert.match(
            await reason({
              credentials: { accessKeyId: minio.accessKey, secretAccessKey: "wrong-secret-1234" },
            }),
            /^credentials: the secret key does not match the access key id .*\(SignatureDoesNotMatch\)$/,
          );
          assert.match(
            await reason({
              credentials: { accessKeyId: "nobody", secretAccessKey: minio.secretKey },
            }),
            /^credentials: the access key id is not known .*\(InvalidAccessKeyId\)$/,
          );
          assert.match(
            await reason({ bucket: "no-such-bucket" }),
            /^bucket: 'no-such-bucket' does not exist at http:\/\/127\.0\.0\.1:\d+ \(NoSuchBucket\)$/,
          );
          assert.match(
            await reason({ region: "eu-west-3" }),
            /^region: 'eu-west-3' is wrong for .*; the bucket is in 'us-east-1' \(AuthorizationHeaderMalformed\)$/,
          );
        },
      );

      await t.step("no secret in real error answers", async () => {
        const secret = "this-is-the-wrong-secret-0123456789";
        const store = minioStore(minio, {
          credentials: { accessKeyId: minio.accessKey, secretAccessKey: secret },
        });
        for (const attempt of [() => store.list(""), () => store.head("k"), () => store.get("k")]) {
          const err = await attempt().then(() => undefined, (e) => e);
          assert.ok(err instanceof StoreError && err.kind === "Auth", String(err));
          assertNoLeak(err, [[secret, "the secret"]], { depth: 9 });
        }
      });

      await t.step("clock skew: one re-sign on the server's clock, ahead or behind", async () => {
        for (const offset of [-3 * 3600_000, 2 * 3600_000]) {
          const store = minioStore(minio, { clock: aheadClock(offset) });
          await store.put("skew/obj", new Uint8Array([1]));
          assert.ok(
            Math.abs(store.clockOffsetMs + offset) < 60_000,
            `${store.clockOffsetMs} vs ${offset}`,
          );
          assert.equal((await store.head("skew/obj")).size, 1);
        }
      });

      await t.step("presigned GET", async () => {
        const store = minioStore(minio);
        await store.put("presigned/a b+c.txt", new TextEncoder().encode("hello"));
        const url = await store.presignGet("presigned/a b+c.txt", 60);
        const response = await fetch(url);
        assert.equal(response.status, 200);
        assert.equal(await response.text(), "hello");
      });

      await t.step(
        "a checksum the caller already took is sent as it is; MinIO refuses a body it does not fit",
        async () => {
          const store = minioStore(minio, { checksum: "crc32" });
          const body = randomBytes(5 * MiB);
          const right = crc32Checksum(crc32(body));
          const wrong = crc32Checksum(crc32(body) ^ 1);
          // A body that does not fit its checksum is refused (MinIO: XAmzContentChecksumMismatch,
          // AWS: BadDigest); tierd retries it as a damaged transfer.
          const refused = (err: unknown) =>
            err instanceof StoreError && err.detail.status === 400 &&
            /ChecksumMismatch|BadDigest/.test(err.detail.code ?? "");
          await assert.rejects(store.put("given/wrong", body, { checksums: [wrong] }), refused);
          // Another algorithm than the one the store sends is not used.
          const other = { algorithm: "crc32c" as const, value: wrong.value };
          assert.equal(
            (await store.put("given/ok", body, { checksums: [other, right] })).status,
            "Created",
          );
          const stored = (await store.head("given/ok", { checksums: true })).checksums;
          assert.ok(stored?.some((c) => c.algorithm === "crc32" && c.value === right.value));

          const id = await store.createMultipart("given/parts");
          await assert.rejects(
            store.putPart("given/parts", id, 1, body, { checksums: [wrong] }),
            refused,
          );
          const tail = randomBytes(1000);
          const parts = [
            await store.putPart("given/parts", id, 1, body, { checksums: [right] }),
            await store.putPart("given/parts", id, 2, tail, {
              checksums: [crc32Checksum(crc32(tail))],
            }),
          ];
          assert.equal((await store.completeMultipart("given/parts", id, parts)).status, "Created");
          const whole = (await store.head("given/parts", { checksums: true })).checksums;
          const expected = crc32Checksum(crc32(tail, crc32(body))).value;
          assert.ok(
            whole?.some((c) => c.algorithm === "crc32" && c.value === expected),
            `full-object crc32 ${expected} in ${JSON.stringify(whole)}`,
          );
        },
      );

      await t.step("uploadFile: 12 MiB in 5 MiB parts, then AlreadyExists", async () => {
        const store = minioStore(minio);
        const dir = await tempDir("tierd-minio-upload");
        try {
          const path = join(dir.path, "00000000000000000000.log");
          const data = randomBytes(12 * MiB + 7);
          await Deno.writeFile(path, data);
          const ids: string[] = [];
          let stored = 0;
          const result = await uploadFile(store, "segments/0.log", path, {
            partSize: 5 * MiB,
            concurrency: 2,
            ifAbsent: true,
            metadata: { "end-offset": "99" },
            onUploadId: (id) => void ids.push(id),
            onProgress: (n) => (stored = n),
          });
          assert.equal(result.status, "Created");
          assert.match(
            result.status === "Created" ? result.etag ?? "" : "",
            /-3$/,
            "a 3-part object",
          );
          assert.equal(ids.length, 1);
          assert.equal(stored, data.length);
          const head = await store.head("segments/0.log");
          assert.equal(head.size, data.length);
          assert.equal(head.metadata["end-offset"], "99");
          const tail = await store.get("segments/0.log", {
            range: { start: data.length - 100, length: 100 },
          });
          assert.deepEqual(tail.bytes, data.subarray(data.length - 100));
          const again = await uploadFile(store, "segments/0.log", path, {
            partSize: 5 * MiB,
            ifAbsent: true,
          });
          assert.deepEqual(again, { status: "AlreadyExists" });
          assert.deepEqual(
            await store.listMultipartUploads("segments/"),
            [],
            "the refused upload was aborted",
          );
        } finally {
          await dir.cleanup();
        }
      });

      await t.step(
        "outage: MinIO killed is Transport; after restart it answers again",
        async () => {
          const store = minioStore(minio, { requestTimeoutMs: 5000 });
          await store.put("outage/before", new Uint8Array([7]));
          minio.kill();
          const err = await store.head("outage/before").then(() => undefined, (e) => e);
          assert.ok(err instanceof StoreError && err.kind === "Transport", String(err));
          await minio.restart();
          assert.equal((await store.head("outage/before")).size, 1, "data survives the crash");
        },
      );
    } finally {
      await minio.stop();
    }
  });
}
