// Reads end to end through the compiled binary against a real MinIO: a cold
// read of an evicted segment, the same read warm (served from the chunk cache: no new GET),
// and a read spanning the remote/local boundary — each byte-compared with the original files.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { EventEmitter } from "node:events";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { generatePartition } from "../../src/format/generate.ts";
import {
  buildTierdBinary,
  minioAvailable,
  s3ConfigText,
  s3Env,
  startMinioReady,
} from "../fixtures/_agent.ts";
import { BUN_DIRECT_IO, runBunScript, tempDir } from "../_util.ts";

async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(name))
    .reduce((n, l) => n + Number(l.split(" ").at(-1)), 0);
}

Deno.test("cold, warm and boundary-spanning reads through the binary against MinIO", async () => {
  if (!(await minioAvailable("read e2e against MinIO"))) return;
  const minio = await startMinioReady();
  if (!minio) return;
  const tmp = await tempDir("tierd-read-e2e");
  try {
    const bin = join(tmp.path, "tierd");
    buildTierdBinary(bin);

    const segments = await generatePartition({
      format: "iggy-0.9",
      dataDir: join(tmp.path, "broker"),
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 6000,
      segmentSize: 256 * 1024,
      seed: 11,
    });
    // The original bytes of the whole partition, before anything is evicted.
    const whole = new Uint8Array(segments.reduce((n, s) => n + s.size, 0));
    const startPos = new Map<bigint, number>();
    let at = 0;
    for (const s of segments) {
      startPos.set(s.startOffset, at);
      whole.set(new Uint8Array(await readFile(s.logPath)), at);
      at += s.size;
    }
    const listen = `127.0.0.1:${40000 + Math.floor(Math.random() * 20000)}`;
    const config = join(tmp.path, "tierd.toml");
    await writeFile(
      config,
      s3ConfigText({
        dir: tmp.path,
        minio,
        listen,
        topics: [{ stream: 0, topic: 0, localRetentionSize: "600 KiB" }],
      }),
    );
    const agent = spawn(bin, ["run", "--config", config], {
      env: { ...process.env, ...s3Env(minio) },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    agent.stderr!.on("data", (d) => (stderr += d));
    const base = `http://${listen}`;
    try {
      // Wait until the agent is ready and has evicted most of the partition.
      const deadline = Date.now() + 60_000;
      let remote = 0;
      while (Date.now() < deadline) {
        try {
          const parts = await (await fetch(`${base}/v1/partitions`)).json();
          remote = parts[0]?.segments.remote ?? 0;
          if (remote >= 3) break;
        } catch { /* not listening yet */ }
        await new Promise((r) => setTimeout(r, 200));
      }
      assert.ok(remote >= 3, `segments evicted to the store: ${remote}\n${stderr}`);

      const read = async (offset: bigint, maxBytes: number) => {
        const res = await fetch(
          `${base}/v1/streams/0/topics/0/partitions/0/records?offset=${offset}&max_bytes=${maxBytes}`,
        );
        assert.equal(res.status, 200, await res.clone().text());
        return { res, bytes: new Uint8Array(await res.arrayBuffer()) };
      };
      const expectBytes = (first: string | null, bytes: Uint8Array) => {
        // Records start at a batch in the original files: find its position by walking the
        // segment that holds it (batches are whole, so the bytes must match a slice exactly).
        const seg = [...segments].reverse().find((s) => s.startOffset <= BigInt(first!))!;
        const segStart = startPos.get(seg.startOffset)!;
        const hay = whole.subarray(segStart, segStart + seg.size);
        const idx = indexOf(hay, bytes.subarray(0, Math.min(64, bytes.length)));
        assert.ok(idx >= 0, "the answer starts at a record of the original segment");
        assert.deepEqual(bytes, whole.subarray(segStart + idx, segStart + idx + bytes.length));
      };

      // Cold: segment 0 is only in the store.
      const getsBefore = await metric(base, 'tierd_store_requests_total{op="get"');
      const cold = await read(10n, 64 * 1024);
      assert.equal(cold.res.headers.get("x-tierd-source"), "remote");
      expectBytes(cold.res.headers.get("x-tierd-first-offset"), cold.bytes);
      const getsCold = await metric(base, 'tierd_store_requests_total{op="get"');
      assert.ok(getsCold > getsBefore, "a cold read fetched from the store");

      // Warm: wait for background hydration, then the same read must not GET again.
      await new Promise((r) => setTimeout(r, 1500));
      const getsHydrated = await metric(base, 'tierd_store_requests_total{op="get"');
      const warm = await read(10n, 64 * 1024);
      assert.deepEqual(warm.bytes, cold.bytes);
      assert.equal(await metric(base, 'tierd_store_requests_total{op="get"'), getsHydrated);

      // The chunk files the binary wrote (around the page cache, where this file system takes
      // direct I/O) read back exactly: a read of the first segment to its end lets the chunk's
      // bytes kept in memory go, so the same read again comes from the file.
      const direct = await metric(base, 'tierd_cache_chunk_writes_total{io="direct"}');
      const buffered = await metric(base, 'tierd_cache_chunk_writes_total{io="buffered"}');
      assert.ok(direct + buffered >= 1, "the hydrated chunk was written");
      if (await directIoSupported(tmp.path)) {
        assert.equal(buffered, 0, "the binary wrote its chunk files with direct I/O");
      }
      const whole0 = await read(0n, segments[0].size);
      expectBytes(whole0.res.headers.get("x-tierd-first-offset"), whole0.bytes);
      const fromFile = await read(10n, 64 * 1024);
      assert.deepEqual(fromFile.bytes, cold.bytes);
      assert.equal(await metric(base, 'tierd_store_requests_total{op="get"'), getsHydrated);

      // Spanning: start near the end of the last evicted segment, run into local data.
      const parts = await (await fetch(`${base}/v1/partitions`)).json();
      const lastRemote = segments[parts[0].segments.remote - 1];
      const span = await read(lastRemote.endOffset - 5n, 256 * 1024);
      assert.equal(span.res.headers.get("x-tierd-source"), "mixed", stderr);
      expectBytes(span.res.headers.get("x-tierd-first-offset"), span.bytes);
      assert.ok(
        BigInt(span.res.headers.get("x-tierd-next-offset")!) > lastRemote.endOffset + 1n,
        "the read continued into the local segment",
      );
    } finally {
      agent.kill("SIGTERM");
      // Typed through EventEmitter: @types/node 25 (pulled in by a dev dependency) narrows it.
      await new Promise((r) => (agent as unknown as EventEmitter).once("exit", r));
    }
  } finally {
    await minio.stop();
    await tmp.cleanup();
  }
});

/** Whether the file system of `dir` takes direct I/O (asked from Bun, the binary's runtime). */
async function directIoSupported(dir: string): Promise<boolean> {
  const out = await runBunScript(
    dir,
    `${BUN_DIRECT_IO}\nconsole.log(directIoSupported(${JSON.stringify(dir)}));\n`,
  );
  return out.trim() === "true";
}

function indexOf(hay: Uint8Array, needle: Uint8Array): number {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}
