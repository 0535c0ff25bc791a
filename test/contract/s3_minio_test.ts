// The contract suite against a real MinIO through S3Store, in path style and in virtual-host
// style (MinIO with MINIO_DOMAIN=localhost; `{bucket}.localhost` does not resolve here, so the
// virtual-host run connects to 127.0.0.1 and sends that Host header through node:http).
// The path-style run sends CRC-64/NVME (S3Store's default), the virtual-host one CRC-32 (what
// `checksum = "auto"` settles on with MinIO): both must come back on HEAD as the whole object's,
// multipart uploads too. Without a MinIO binary this is skipped with one loud line — and fails in CI.
import type { FetchFn } from "../../providers/http.ts";
import { S3Store } from "../../providers/s3/store.ts";
import { findMinio, startMinio, virtualHostFetch } from "../fixtures/minio.ts";
import { contractSuite, everyRangeOffThread, offThreadClose, RANGED_GET_CASES } from "./suite.ts";
import { announceSkip } from "../fixtures/_server.ts";

const found = await findMinio();
if ("reason" in found) {
  if (Deno.env.get("CI") === "true") throw new Error(`MinIO is required in CI: ${found.reason}`);
  announceSkip(`contract suite against MinIO: ${found.reason}`);
  Deno.test({ name: `contract: s3 on MinIO (skipped: ${found.reason})`, ignore: true, fn() {} });
} else {
  /** A path-style S3Store on a fresh MinIO, sending through `fetch` when given. */
  const pathStyle = async (fetch?: FetchFn) => {
    const minio = (await startMinio())!;
    const store = new S3Store({
      endpoint: minio.endpoint,
      region: minio.region,
      bucket: minio.bucket,
      credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
      urlStyle: "path",
      fetch,
    });
    return { store, minio };
  };

  contractSuite("s3 on MinIO, path style", async () => {
    const { store, minio } = await pathStyle();
    return { store, close: minio.stop };
  }, { checksum: "crc64nvme", versions: "per-content" });

  contractSuite("s3 on MinIO, ranged GETs on fetch worker threads", async () => {
    const workers = everyRangeOffThread();
    const { store, minio } = await pathStyle(workers.fetch);
    return { store, close: offThreadClose(workers, minio.stop) };
  }, { checksum: "crc64nvme", versions: "per-content", only: RANGED_GET_CASES });

  contractSuite("s3 on MinIO, virtual-host style", async () => {
    const minio = (await startMinio({ domain: "localhost" }))!;
    const port = Number(new URL(minio.endpoint).port);
    const store = new S3Store({
      endpoint: `http://localhost:${port}`,
      region: minio.region,
      bucket: minio.bucket,
      credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
      urlStyle: "virtual",
      checksum: "crc32",
      fetch: virtualHostFetch({ hostname: "127.0.0.1", port }),
    });
    if (store.addressStyle !== "virtual") throw new Error("expected virtual-host addressing");
    return { store, close: minio.stop };
  }, { checksum: "crc32", versions: "per-content" });
}
