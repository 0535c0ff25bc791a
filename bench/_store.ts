// The object store benchmarks write to: the one named by TIERD_BENCH_S3_*, else a
// local MinIO started by the test fixture. Also lists and empties a run's key prefix.
import { listBounded } from "../providers/listing.ts";
import { S3Store } from "../providers/s3/store.ts";

import { findMinio, MINIO_MODULE, startMinio } from "../test/fixtures/minio.ts";

/** Where benchmark objects go. */
export interface BenchStore {
  endpoint: string;
  region: string;
  bucket: string;
  accessKey: string;
  secretKey: string;
  /** e.g. `MinIO DEVELOPMENT.GOGET (github.com/minio/minio@…), local` or `TIERD_BENCH_S3_ENDPOINT`. */
  describe: string;
  /** A client for listing and cleanup (not the thing measured). */
  client: S3Store;
  /** The local MinIO's process id, for CPU accounting; undefined for a remote store. */
  serverPid?: number;
  /** Stops the local MinIO, if one was started. */
  stop(): Promise<void>;
}

const env = (name: string) => Deno.env.get(name) ?? "";

/**
 * Opens the benchmark store.
 * @throws {Error} when no store is configured and MinIO cannot start
 */
export async function openBenchStore(): Promise<BenchStore> {
  const endpoint = env("TIERD_BENCH_S3_ENDPOINT");
  if (endpoint) {
    const missing = ["BUCKET", "ACCESS_KEY", "SECRET_KEY"].filter((k) =>
      !env(`TIERD_BENCH_S3_${k}`)
    );
    if (missing.length > 0) {
      throw new Error(
        `TIERD_BENCH_S3_ENDPOINT is set but ${
          missing.map((k) => `TIERD_BENCH_S3_${k}`).join(", ")
        } is not`,
      );
    }
    const region = env("TIERD_BENCH_S3_REGION") || "us-east-1";
    const s = {
      endpoint,
      region,
      bucket: env("TIERD_BENCH_S3_BUCKET"),
      accessKey: env("TIERD_BENCH_S3_ACCESS_KEY"),
      secretKey: env("TIERD_BENCH_S3_SECRET_KEY"),
    };
    return {
      ...s,
      describe: `${endpoint} (from TIERD_BENCH_S3_ENDPOINT), region ${region}`,
      client: clientFor(s),
      stop: () => Promise.resolve(),
    };
  }
  const minio = await startMinioRetrying();
  if (!minio) throw new Error("no TIERD_BENCH_S3_ENDPOINT and MinIO could not start (see above)");
  return {
    endpoint: minio.endpoint,
    region: minio.region,
    bucket: minio.bucket,
    accessKey: minio.accessKey,
    secretKey: minio.secretKey,
    describe: `local MinIO ${await minioVersion()} (single drive, data on the same disk), ` +
      `${minio.endpoint}`,
    client: clientFor({ ...minio }),
    serverPid: await findServerPid(`--address\0${minio.endpoint.replace("http://", "")}`),
    stop: () => minio.stop(),
  };
}

/**
 * Starts MinIO, trying again when it answered "live" but refused the bucket creation with
 * XMinioServerNotInitialized (a start-up race on a loaded machine).
 */
async function startMinioRetrying(): Promise<Awaited<ReturnType<typeof startMinio>>> {
  for (let attempt = 1;; attempt++) {
    try {
      return await startMinio({ bucket: "tierd-bench" });
    } catch (err) {
      if (attempt >= 3 || !String((err as Error).message).includes("not initialized")) throw err;
      await new Promise((resolve) => setTimeout(resolve, 1000 * attempt));
    }
  }
}

function clientFor(
  s: { endpoint: string; region: string; bucket: string; accessKey: string; secretKey: string },
): S3Store {
  return new S3Store({
    endpoint: s.endpoint,
    region: s.region,
    bucket: s.bucket,
    credentials: { accessKeyId: s.accessKey, secretAccessKey: s.secretKey },
    urlStyle: "path",
  });
}

/** The process whose command line contains `needle` (NUL-separated arguments). */
async function findServerPid(needle: string): Promise<number | undefined> {
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const cmdline = await Deno.readTextFile(`/proc/${entry.name}/cmdline`);
      if (cmdline.includes(needle)) return Number(entry.name);
    } catch {
      // gone, or not ours to read
    }
  }
  return undefined;
}

async function minioVersion(): Promise<string> {
  const found = await findMinio();
  if ("image" in found) return found.image;
  if ("reason" in found) return "(unknown version)";
  try {
    const out = await new Deno.Command(found.bin, { args: ["--version"], stderr: "null" }).output();
    const first = new TextDecoder().decode(out.stdout).split("\n")[0].replace(
      /^minio version /,
      "",
    );
    return first.includes("DEVELOPMENT.GOGET") ? `${MINIO_MODULE} (go install)` : first;
  } catch {
    return "(unknown version)";
  }
}

/** Objects and bytes under `prefix`. */
export async function listPrefix(
  store: S3Store,
  prefix: string,
): Promise<{ keys: string[]; bytes: number; sizes: Map<string, number> }> {
  const objects = await listBounded(store, prefix);
  const sizes = new Map(objects.map((o) => [o.key, o.size]));
  const bytes = objects.reduce((n, o) => n + o.size, 0);
  return { keys: objects.map((o) => o.key), bytes, sizes };
}

/** Deletes every object under `prefix` (so runs do not fill the disk). */
export async function emptyPrefix(store: S3Store, prefix: string): Promise<void> {
  const { keys } = await listPrefix(store, prefix);
  for (let i = 0; i < keys.length; i += 1000) await store.deleteMany(keys.slice(i, i + 1000));
}
