// The store out of reach when the agent starts (a host booting before its network, a store
// restarting): `tierd run` does not exit. It answers /healthz, says on /readyz what it waits
// for, counts as stalled in /metrics, probes again, and once the store answers it starts for
// real — ready, and copying. A SIGTERM while it waits stops it cleanly. A store that refuses
// (a wrong key) still stops the start at once: waiting would not fix a setting.
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { generatePartition } from "../../src/format/generate.ts";
import {
  freePort,
  minioAvailable,
  minioStore,
  runTierd,
  s3ConfigText,
  s3Env,
  spawnTierd,
  startMinioReady,
} from "../fixtures/_agent.ts";
import { listBounded } from "../../providers/listing.ts";
import { tempDir } from "../_util.ts";
import { waitUntil } from "./_iggy_steps.ts";
import { startS3Tap } from "./_s3_tap.ts";

async function get(url: string): Promise<{ status: number; body: string }> {
  try {
    const res = await fetch(url);
    return { status: res.status, body: await res.text() };
  } catch {
    return { status: 0, body: "" };
  }
}

Deno.test("the store down at boot: the agent waits for it, answering its probes, then starts", async (t) => {
  if (!(await minioAvailable("store down at boot"))) return;
  const minio = (await startMinioReady())!;
  const tap = await startS3Tap(minio.endpoint);
  const tmp = await tempDir("tierd-store-down");
  try {
    const segments = await generatePartition({
      format: "iggy-0.9",
      dataDir: join(tmp.path, "broker"),
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 300,
      segmentSize: 64 * 1024,
      seed: 5,
    });
    const port = freePort();
    const url = `http://127.0.0.1:${port}`;
    const configPath = join(tmp.path, "tierd.toml");
    await writeFile(
      configPath,
      s3ConfigText({
        dir: tmp.path,
        minio,
        endpoint: tap.endpoint,
        listen: `127.0.0.1:${port}`,
        topics: [{ stream: 0, topic: 0 }],
      }).replace("[tiered_storage]\n", '[tiered_storage]\nfetch_timeout = "1 s"\n'),
    );

    await t.step("SIGTERM while it waits stops it with 0", async () => {
      tap.cut(true);
      const agent = spawnTierd(["run", "--config", configPath], s3Env(minio));
      await waitUntil(
        "/healthz",
        30_000,
        async () => (await get(`${url}/healthz`)).status === 200 || undefined,
      );
      agent.kill("SIGTERM");
      const status = await agent.status;
      assert.equal(status.code, 0, agent.output().slice(-2000));
    });

    await t.step("it waits, then starts when the store answers, and copies", async () => {
      tap.cut(true);
      const agent = spawnTierd(["run", "--config", configPath], s3Env(minio));
      try {
        await waitUntil(
          "/healthz",
          30_000,
          async () => (await get(`${url}/healthz`)).status === 200 || undefined,
        );
        const readyz = await get(`${url}/readyz`);
        assert.equal(readyz.status, 503);
        assert.match(
          readyz.body,
          /waiting for the store since \S+ \(\d+ s\): endpoint unreachable/,
        );
        const partitions = await get(`${url}/v1/partitions`);
        assert.equal(partitions.status, 503);
        assert.match(partitions.body, /not ready: waiting for the store/);
        const metrics = await get(`${url}/metrics`);
        assert.match(metrics.body, /^tierd_upload_stalled 1$/m);
        await agent.waitFor((l) => /the store cannot be reached/.test(String(l.msg)), 10_000);
        // Still there after a few more probes.
        await new Promise((r) => setTimeout(r, 3000));
        assert.equal((await get(`${url}/healthz`)).status, 200);

        tap.cut(false);
        await waitUntil(
          "/readyz 200",
          60_000,
          async () => (await get(`${url}/readyz`)).status === 200 || undefined,
        );
        // Logged before /readyz turned 200; its line may still be in the pipe from the agent.
        await agent.waitFor((l) => /the store answers/.test(String(l.msg)), 10_000);
        // And it works: every sealed segment is copied.
        const store = minioStore(minio);
        const sealed = segments.length - 1;
        await waitUntil(`${sealed} copies`, 60_000, async () => {
          const keys = await listBounded(store, "iggy/");
          const logs = keys.filter((k) => k.key.endsWith(".log"));
          return logs.length >= sealed || undefined;
        });
        assert.match((await get(`${url}/metrics`)).body, /^tierd_upload_stalled 0$/m);
      } finally {
        agent.kill("SIGTERM");
        await agent.status;
      }
    });

    await t.step("a store that refuses (a wrong key) still stops the start at once", async () => {
      tap.cut(false);
      const wrong = `${minio.secretKey.slice(0, 6)}WRONG${minio.secretKey.slice(6)}`;
      const run = await runTierd(["run", "--config", configPath], s3Env(minio, wrong));
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, /probe failed/);
      assert.ok(!run.stderr.includes(wrong));
    });
  } finally {
    await tmp.cleanup();
    await tap.close();
    await minio.stop();
  }
});
