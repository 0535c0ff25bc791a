// The tierd container image end to end (README, "Container image"): built from the Dockerfile
// (or TIERD_IMAGE), run as an operator runs it against the MinIO container — its own user, the
// broker's data dir mounted read-write, config, state and cache mounted — it copies, evicts and
// serves every byte back, and Docker reports it healthy through the image's own HEALTHCHECK.
// Needs a Docker engine: skipped loudly without one (failed in CI) or with TIERD_TEST_SERVERS=native.
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { join } from "node:path";

import { generatePartition } from "../../src/format/generate.ts";
import { minioStore, ROOT, s3Env, startMinioReady } from "../fixtures/_agent.ts";
import {
  dockerEngine,
  requestedMode,
  type ServerContainer,
  startContainer,
} from "../fixtures/_containers.ts";
import { announceSkip, freePort, isCI } from "../fixtures/_server.ts";
import { tempDir } from "../_util.ts";

/** The image's own user (Dockerfile: ARG TIERD_UID, USER). */
const IMAGE_USER = "10001:10001";

async function unavailableBecause(): Promise<string | undefined> {
  if (requestedMode() === "native") {
    return "TIERD_TEST_SERVERS=native, and it runs tierd's image against the MinIO container";
  }
  const engine = await dockerEngine();
  return engine.ok ? undefined : engine.reason;
}

/** TIERD_IMAGE, else `tierd:test` built from the Dockerfile now (and removed afterwards). */
async function tierdImage(): Promise<{ image: string; built: boolean }> {
  const given = Deno.env.get("TIERD_IMAGE");
  if (given) return { image: given, built: false };
  const image = "tierd:test";
  console.error(`building ${image} from ${ROOT}Dockerfile…`);
  const out = await new Deno.Command("docker", {
    args: ["build", "--network", "host", "--force-rm", "-t", image, ROOT],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
    throw new Error(`docker build of ${ROOT}Dockerfile failed:\n${text.slice(-3000)}`);
  }
  return { image, built: true };
}

/** Hands `dir` and everything below it to `uid:gid` (the container's user writes there). */
async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await Deno.chown(dir, uid, gid);
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) await chownTree(path, uid, gid);
    else await Deno.chown(path, uid, gid);
  }
}

async function poll<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
  log: () => Promise<string>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      throw new Error(`${what}: not within ${timeoutMs} ms; tierd's log:\n${await log()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const why = await unavailableBecause();
if (why) {
  if (isCI() && requestedMode() !== "native") {
    throw new Error(`the tierd image test needs a Docker engine in CI: ${why}`);
  }
  announceSkip(`tierd image end to end: ${why}`);
  Deno.test({ name: `tierd image (skipped: ${why})`, ignore: true, fn() {} });
} else {
  Deno.test("the tierd image copies, evicts and reads back against the MinIO container", async () => {
    const { image, built } = await tierdImage();
    const minio = (await startMinioReady())!;
    const tmp = await tempDir("tierd-image-e2e");
    let tierd: ServerContainer | undefined;
    try {
      const [broker, state, cache, config] = ["broker", "state", "cache", "config"]
        .map((d) => join(tmp.path, d));
      const segments = await generatePartition({
        format: "iggy-0.9",
        dataDir: broker,
        stream: 0,
        topic: 0,
        partition: 0,
        messages: 6000,
        segmentSize: 256 * 1024,
        seed: 17,
      });
      const whole = new Uint8Array(segments.reduce((n, s) => n + s.size, 0));
      let at = 0;
      for (const s of segments) {
        whole.set(await Deno.readFile(s.logPath), at);
        at += s.size;
      }
      await Deno.mkdir(state);
      await Deno.mkdir(cache);
      await Deno.mkdir(config);
      const listen = `127.0.0.1:${freePort()}`;
      await Deno.writeTextFile(
        join(config, "tierd.toml"),
        `
[agent]
data_dir = "/var/lib/iggy"
state_dir = "/var/lib/tierd"
listen = "${listen}"
seal_quiescence = "0 s"
cluster_id = "image-e2e"
evict_via = "unlink"

[tiered_storage]
enabled = true
backend = "s3"
part_size = "5 MiB"

[tiered_storage.s3]
bucket = "${minio.bucket}"
region = "${minio.region}"
endpoint = "${minio.endpoint}"
url_style = "path"
prefix = "iggy"

[tiered_storage.cache]
path = "/var/cache/tierd"

[[topic]]
stream = 0
topic = 0
local_retention_size = "600 KiB"
`,
      );
      // As root here, hand the writable mounts to the image's user; otherwise run the image as
      // this (non-root) user, as an operator runs it with the broker's uid.
      const asRoot = Deno.uid() === 0;
      if (asRoot) {
        const [uid, gid] = IMAGE_USER.split(":").map(Number);
        for (const dir of [broker, state, cache]) await chownTree(dir, uid, gid);
      }
      tierd = await startContainer({
        server: "tierd image",
        image,
        env: s3Env(minio),
        user: asRoot ? undefined : `${Deno.uid()}:${Deno.gid()}`,
        binds: [
          { source: broker, target: "/var/lib/iggy" },
          { source: state, target: "/var/lib/tierd" },
          { source: cache, target: "/var/cache/tierd" },
          { source: config, target: "/etc/tierd", readOnly: true },
        ],
        healthInterval: { intervalMs: 1000, retries: 3 },
      });
      const container = tierd;
      const base = `http://${listen}`;

      await poll("GET /readyz answers 200", 60_000, async () => {
        const res = await fetch(`${base}/readyz`);
        await res.body?.cancel();
        return res.ok || undefined;
      }, container.log);
      const remote = await poll("3 segments evicted to the store", 60_000, async () => {
        const parts = await (await fetch(`${base}/v1/partitions`)).json();
        const n = parts[0]?.segments.remote ?? 0;
        return n >= 3 ? n : undefined;
      }, container.log);

      const running = await container.state();
      assert.equal(running.user, asRoot ? IMAGE_USER : `${Deno.uid()}:${Deno.gid()}`);
      await poll("Docker reports the HEALTHCHECK healthy", 30_000, async () => {
        return (await container.state()).health === "healthy" || undefined;
      }, container.log);

      // Copied: each evicted segment's .log is in the bucket; evicted: gone from the broker.
      const objects = await listBounded(minioStore(minio), "iggy/image-e2e/0/0/0/");
      const logs = objects.filter((o) => o.key.endsWith(".log"));
      assert.ok(logs.length >= remote, `${logs.length} .log objects for ${remote} remote segments`);
      for (const s of segments.slice(0, remote)) {
        await assert.rejects(Deno.stat(s.logPath), Deno.errors.NotFound, `${s.logPath} evicted`);
      }

      // Read back: the whole partition from offset 0, the evicted part through the store.
      const res = await fetch(
        `${base}/v1/streams/0/topics/0/partitions/0/records?offset=0&max_bytes=${whole.length}`,
      );
      const bytes = new Uint8Array(await res.arrayBuffer());
      assert.equal(res.status, 200, new TextDecoder().decode(bytes.subarray(0, 500)));
      assert.equal(res.headers.get("x-tierd-source"), "mixed");
      assert.equal(res.headers.get("x-tierd-first-offset"), "0");
      assert.equal(bytes.length, whole.length, "every record of the partition came back");
      assert.ok(bytes.every((b, i) => b === whole[i]), "byte for byte the original segments");
    } finally {
      await tierd?.stop(10_000);
      await minio.stop();
      await tmp.cleanup();
      if (built && Deno.env.get("TIERD_KEEP_IMAGES") !== "1") {
        await new Deno.Command("docker", { args: ["image", "rm", image], stdout: "null" })
          .output();
      }
    }
  });
}
