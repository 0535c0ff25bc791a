// `tiered_storage.s3.checksum = "auto"` against a real MinIO, directly and behind a proxy that
// refuses S3's checksum headers with Backblaze B2's answer: the probe settles on CRC-32
// (proven by MinIO's stored checksum) and on Content-MD5 (proven by the ETag, multipart copies
// by read-back) respectively, leaves no probe object behind, and behind the proxy every segment —
// single PUTs and multipart uploads — is copied, proven and evicted without one more refused
// header after the probe. MinIO runs natively or as a container; without it the suite is skipped
// loudly (failed in CI).
import assert from "node:assert/strict";
import { probeStore } from "../../providers/probe.ts";
import { minioStore } from "../fixtures/_agent.ts";
import { startMinio } from "../fixtures/minio.ts";
import { startRefusingProxy } from "./_checksum_refusing_proxy.ts";
import { copyProveEvict } from "./_copy_prove_evict.ts";

const PREFIX = "iggy";

Deno.test("checksum auto on MinIO, directly and behind a store that refuses the headers as B2 does", async (t) => {
  const minio = await startMinio();
  if (!minio) return; // skipped loudly by the fixture (a failure in CI)
  const s3 = (endpoint: string) => minioStore(minio, { endpoint, checksum: "auto" });
  const probeObjects = async () =>
    (await s3(minio.endpoint).list(`${PREFIX}/.tierd-probe/`)).objects.map((o) => o.key);

  try {
    await t.step(
      "MinIO: CRC-32, every copy proven by the stored checksum, probe objects gone",
      async () => {
        const store = s3(minio.endpoint);
        assert.deepEqual(await probeStore(store, PREFIX, { writes: true }), { ok: true });
        const report = store.checksumReport!;
        assert.deepEqual(report.way, { body: "crc32", multipart: "crc32", headMode: true });
        assert.equal(report.singleProof, "the stored crc32");
        assert.equal(report.multipartProof, "the stored crc32");
        assert.deepEqual(report.refused, []);
        assert.deepEqual(await probeObjects(), []);
        // Multipart uploads (full-object CRC-32) and single PUTs, all proven without a read-back.
        assert.ok(await copyProveEvict(store, { storedProof: true }) >= 2);
      },
    );

    await t.step(
      "refused as B2 does: Content-MD5, every segment copied, proven and evicted, nothing refused sent again",
      async () => {
        const proxy = await startRefusingProxy(minio.endpoint);
        const store = s3(proxy.endpoint);
        try {
          assert.deepEqual(await probeStore(store, PREFIX, { writes: true }), { ok: true });
          const report = store.checksumReport!;
          assert.deepEqual(report.way, { body: "md5", multipart: "md5", headMode: false });
          assert.equal(report.singleProof, "the ETag (MD5)");
          assert.equal(report.multipartProof, "read-back");
          assert.deepEqual(report.refused.map((r) => r.replace(/ \(.*\)$/, "")), [
            "x-amz-checksum-crc32 on PUT",
            "x-amz-checksum-crc64nvme on PUT",
            "x-amz-checksum-crc32c on PUT",
            "x-amz-checksum-sha256 on PUT",
          ]);
          assert.ok(
            report.refused.every((r) => r.endsWith("(400 InvalidArgument)")),
            report.refused.join(),
          );
          assert.deepEqual(await probeObjects(), []);
          const refusedAtProbe = proxy.refused.length;

          // Segments of 6 MiB with 5 MiB parts: multipart uploads, and a last smaller one as a PUT.
          const evicted = await copyProveEvict(store);
          assert.equal(
            proxy.refused.length,
            refusedAtProbe,
            `refused after the probe: ${proxy.refused.slice(refusedAtProbe)}`,
          );
          assert.ok(
            proxy.contentMd5s > evicted,
            "bodies went with Content-MD5",
          );
        } finally {
          await proxy.close();
        }
      },
    );
  } finally {
    await minio.stop();
  }
});
