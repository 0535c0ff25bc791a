// `tiered_storage.s3.checksum = "auto"` against a real MinIO, directly and behind a proxy that
// refuses S3's checksum headers with Backblaze B2's answer: the probe settles on CRC-64/NVME
// (proven by MinIO's stored checksum) and on Content-MD5 (proven by the ETag, multipart copies
// by read-back) respectively, leaves no probe object behind, and behind the proxy every segment —
// single PUTs and multipart uploads — is copied, proven and evicted without one more refused
// header after the probe. MinIO runs natively or as a container; without it the suite is skipped
// loudly (failed in CI).
import assert from "node:assert/strict";
import { access } from "node:fs/promises";
import { S3Store } from "../../providers/s3/store.ts";
import { getSegment } from "../../src/state/segment_state.ts";
import { UnlinkEvictor } from "../../src/tier/evictor.ts";
import { copyPhase } from "../../src/tier/phases/copy.ts";
import { evictPhase } from "../../src/tier/phases/evict.ts";
import { advanceFloor } from "../../src/tier/phases/floor.ts";
import { startMinio } from "../fixtures/minio.ts";
import { phaseRig } from "../tier/_phase_rig.ts";
import { startRefusingProxy } from "./_checksum_refusing_proxy.ts";

const MiB = 1024 * 1024;
const PREFIX = "iggy";

Deno.test("checksum auto on MinIO, directly and behind a store that refuses the headers as B2 does", async (t) => {
  const minio = await startMinio();
  if (!minio) return; // skipped loudly by the fixture (a failure in CI)
  const s3 = (endpoint: string) =>
    new S3Store({
      endpoint,
      region: minio.region,
      bucket: minio.bucket,
      credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
      urlStyle: "path",
      checksum: "auto",
      probePrefix: PREFIX,
    });
  const probeObjects = async () =>
    (await s3(minio.endpoint).list(`${PREFIX}/.tierd-probe/`)).objects.map((o) => o.key);

  try {
    await t.step(
      "MinIO: CRC-64/NVME, proven by the stored checksum, probe objects gone",
      async () => {
        const store = s3(minio.endpoint);
        await store.probe(PREFIX);
        const report = store.checksumReport!;
        assert.deepEqual(report.way, { body: "crc64nvme", multipart: "crc64nvme", headMode: true });
        assert.equal(report.singleProof, "the stored crc64nvme");
        assert.equal(report.multipartProof, "the stored crc64nvme");
        assert.deepEqual(report.refused, []);
        assert.deepEqual(await probeObjects(), []);
      },
    );

    await t.step(
      "refused as B2 does: Content-MD5, every segment copied, proven and evicted, nothing refused sent again",
      async () => {
        const proxy = await startRefusingProxy(minio.endpoint);
        const store = s3(proxy.endpoint);
        try {
          await store.probe(PREFIX);
          const report = store.checksumReport!;
          assert.deepEqual(report.way, { body: "md5", multipart: "md5", headMode: false });
          assert.equal(report.singleProof, "the ETag (MD5)");
          assert.equal(report.multipartProof, "read-back");
          assert.deepEqual(report.refused.map((r) => r.replace(/ \(.*\)$/, "")), [
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
          const r = await phaseRig({
            messages: 1_300,
            payloadSize: 10_000,
            segmentSize: 6 * MiB,
            wrap: () => store,
            config: (c) => void (c.tiered_storage.part_size = 5 * MiB),
          });
          try {
            const sealed = (await r.local()).filter((s) => s.sealed);
            assert.ok(sealed.length >= 2, `${sealed.length} sealed segments`);
            const copied = await copyPhase(r.ctx, r.ledger, {
              segments: await r.local(),
              format: r.format,
              reportedGaps: new Set(),
            });
            assert.deepEqual(copied.errors, []);
            await advanceFloor(r.ctx, r.ledger);
            const evicted = await evictPhase(r.ctx, r.ledger, {
              dir: r.dir,
              segments: await r.local(),
              format: r.format,
              topic: { ...r.topic, local_retention_size: 0 },
              evictor: new UnlinkEvictor(),
            });
            assert.deepEqual(evicted.errors, []);
            assert.equal(evicted.evicted, sealed.length, "every sealed segment, proven, evicted");
            for (const seg of sealed) {
              assert.equal(getSegment(r.ledger.state, 0n, seg.start)?.evicted, true);
              await assert.rejects(access(seg.logPath));
            }
            assert.equal(
              proxy.refused.length,
              refusedAtProbe,
              `refused after the probe: ${proxy.refused.slice(refusedAtProbe)}`,
            );
            assert.ok(
              (proxy.forwardedChecksums.get("content-md5") ?? 0) > sealed.length,
              "bodies went with Content-MD5",
            );
          } finally {
            await r.cleanup();
          }
        } finally {
          await proxy.close();
        }
      },
    );
  } finally {
    await minio.stop();
  }
});
