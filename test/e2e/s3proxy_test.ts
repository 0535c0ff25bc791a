// s3proxy (filesystem backend) as a second S3 implementation: `checksum = "auto"` settles on
// CRC-32, which it keeps and answers back, the probe's write check passes, and every segment —
// single PUTs and multipart uploads — is copied, proven and evicted. Skipped loudly without
// s3proxy (failed in CI).
import assert from "node:assert/strict";
import { probeStore } from "../../providers/probe.ts";
import { minioStore } from "../fixtures/_agent.ts";
import { startS3proxy } from "../fixtures/s3proxy.ts";
import { copyProveEvict } from "./_copy_prove_evict.ts";

const PREFIX = "iggy";

Deno.test("s3proxy: checksum auto settles, the probe's writes pass, every segment copied, proven and evicted", async () => {
  const server = await startS3proxy();
  if (!server) return; // skipped loudly by the fixture (a failure in CI)
  try {
    const store = minioStore(server, { checksum: "auto" });
    assert.deepEqual(await probeStore(store, PREFIX, { writes: true }), { ok: true });
    const report = store.checksumReport!;
    // s3proxy 4.1.0 takes CRC-32, keeps it and answers it back, multipart uploads included.
    assert.deepEqual(report.way, { body: "crc32", multipart: "crc32", headMode: true });
    assert.equal(report.singleProof, "the stored crc32");
    assert.equal(report.multipartProof, "the stored crc32");
    assert.deepEqual(
      (await store.list(`${PREFIX}/.tierd-probe/`)).objects,
      [],
      "probe objects gone",
    );
    assert.ok(await copyProveEvict(store, { storedProof: true }) >= 2);
  } finally {
    await server.stop();
  }
});
