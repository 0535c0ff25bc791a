// Thirty clients read 64 MiB of evicted data each, at once, from an empty chunk cache — on the
// fs store and on MinIO. Nobody is starved: a read the store cannot feed within `fetch_timeout`
// gets 503 + Retry-After while its fetches go on, and every client is answered 200 within three
// retries, byte for byte what the broker wrote, starting at the offset it asked for.
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { Buffer } from "node:buffer";
import { join } from "node:path";
import { codecFor } from "../../src/format/codecs.ts";
import { generatePartition } from "../../src/format/generate.ts";
import { initHashes } from "../../src/hash.ts";
import {
  buildTierdBinary,
  freePort,
  minioAvailable,
  s3ConfigText,
  s3Env,
  spawnTierd,
  startMinioReady,
} from "../fixtures/_agent.ts";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";

const MiB = 1024 * 1024;
const READS = 30;
const READ_BYTES = 64 * MiB;
/** Retries a client makes after its first 503 before the test calls it starved. */
const RETRIES = 3;
const MESSAGES = 4000;
const SEGMENT_SIZE = 32 * MiB;
/** Sealed segments the agent evicts (the last of the eight is the active one). */
const EVICTED = 7;

/** The partition's bytes end to end and where each record starts in them. */
interface Original {
  bytes: Uint8Array;
  /** Record first offset → position in `bytes`. */
  starts: Map<bigint, number>;
  /** Every record boundary in `bytes` (its end included). */
  boundaries: Set<number>;
  /** The first offset the agent keeps on local disk (the reads start below it). */
  firstLocal: number;
  /** The largest record: an answer stops short of `max_bytes` by less than that. */
  largest: number;
}

async function generate(dataDir: string): Promise<Original> {
  const segments = await generatePartition({
    format: "iggy-0.9",
    dataDir,
    stream: 0,
    topic: 0,
    partition: 0,
    messages: MESSAGES,
    payloadSize: 65_000,
    segmentSize: SEGMENT_SIZE,
    seed: 26,
  });
  assert.equal(segments.length, EVICTED + 1);
  const bytes = new Uint8Array(segments.reduce((n, s) => n + s.size, 0));
  const starts = new Map<bigint, number>();
  const boundaries = new Set<number>([bytes.length]);
  let at = 0;
  let largest = 0;
  for (const s of segments) {
    const file = new Uint8Array(await readFile(s.logPath));
    bytes.set(file, at);
    const walk = codecFor("iggy-0.9").walk(file, { file: s.logPath, startOffset: s.startOffset });
    for (const r of walk) {
      starts.set(r.firstOffset, at + r.position);
      boundaries.add(at + r.position);
      largest = Math.max(largest, r.size);
    }
    at += s.size;
  }
  return { bytes, starts, boundaries, firstLocal: Number(segments[EVICTED].startOffset), largest };
}

async function evictedCount(url: string): Promise<number> {
  const text = await fetch(`${url}/metrics`).then((r) => r.text()).catch(() => "");
  return Number(/^tierd_evictions_total (\d+)/m.exec(text)?.[1] ?? 0);
}

/** One client's answers: the statuses (with the 503 codes) before and including its 200. */
type Attempts = string[];

/**
 * Reads `max_bytes=64 MiB` at `offset` until 200, waiting each 503's Retry-After; checks the
 * body against the original as it streams (so thirty 64 MiB answers are never held at once).
 */
async function readUntilServed(url: string, offset: number, original: Original): Promise<Attempts> {
  const attempts: Attempts = [];
  for (let attempt = 0; attempt <= RETRIES; attempt++) {
    const res = await fetch(
      `${url}/v1/streams/0/topics/0/partitions/0/records?offset=${offset}&max_bytes=${READ_BYTES}`,
    );
    if (res.status !== 200) {
      const body = await res.text();
      attempts.push(`${res.status} ${/"error":"(\w+)"/.exec(body)?.[1] ?? body.slice(0, 80)}`);
      assert.equal(res.status, 503, body);
      const after = Number(res.headers.get("retry-after"));
      assert.ok(after >= 1 && after <= 10, `Retry-After ${res.headers.get("retry-after")}`);
      await new Promise((r) => setTimeout(r, after * 1000));
      continue;
    }
    const start = original.starts.get(BigInt(offset));
    assert.ok(start !== undefined, `offset ${offset} starts no record`);
    let at = start;
    for await (const piece of res.body!) {
      const want = original.bytes.subarray(at, at + piece.length);
      assert.ok(
        Buffer.from(want.buffer, want.byteOffset, want.length).equals(piece),
        `offset ${offset}: the answer differs from the broker's bytes at ${at - start}`,
      );
      at += piece.length;
    }
    const length = at - start;
    assert.ok(length > READ_BYTES - original.largest && length <= READ_BYTES, `${length} bytes`);
    assert.ok(original.boundaries.has(at), `offset ${offset}: the answer ends inside a record`);
    attempts.push("200");
    return attempts;
  }
  assert.fail(`offset ${offset} starved: ${attempts.join(", ")}`);
}

/** Starts the agent, waits for the evictions, then reads 30 × 64 MiB cold at once. */
async function thirtyColdReads(
  dir: string,
  configText: string,
  env: Record<string, string>,
  original: Original,
  viaHttp: boolean,
  bin?: string,
): Promise<void> {
  const configPath = join(dir, "tierd.toml");
  await writeFile(configPath, configText);
  const agent = spawnTierd(["run", "--config", configPath], env, { bin });
  try {
    const url = `http://${/^listen = "([^"]+)"/m.exec(configText)![1]}`;
    for (let i = 0; (await evictedCount(url)) < EVICTED; i++) {
      assert.ok(i < 1200, `the agent did not evict ${EVICTED} segments: ${agent.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // Record starts spread over the evicted range: every read is remote data, many overlap.
    const remote = [...original.starts.keys()].map(Number).filter((o) => o < original.firstLocal);
    const span = Math.floor(remote.length * 0.75);
    const offsets = Array.from({ length: READS }, (_, i) => remote[Math.floor((i * span) / READS)]);
    const outcomes = await Promise.all(offsets.map((o) => readUntilServed(url, o, original)));
    const refused = outcomes.filter((a) => a.length > 1).length;
    console.error(
      `${READS} concurrent 64 MiB cold reads: all 200; ${refused} refused before their 200 ` +
        `(${outcomes.map((a) => a.length - 1).join(" ")} retries)`,
    );
    // Over HTTP the chunk fetches were sent and read by worker threads (fetch_workers "auto");
    // the fs store has no HTTP to move.
    const metrics = await fetch(`${url}/metrics`).then((r) => r.text());
    const offThread = Number(/^tierd_fetch_worker_requests_total (\d+)/m.exec(metrics)?.[1]);
    if (viaHttp) assert.ok(offThread > 0, `no fetch went through a worker thread:\n${metrics}`);
    else assert.equal(offThread, 0);
    // Chunk files written with the worker's block checksums read back clean.
    const corrupt = /^tierd_cache_evictions_total\{reason="corrupt"\} (\d+)/m.exec(metrics)?.[1];
    assert.equal(corrupt, "0", "no chunk file failed its block checksums");
  } finally {
    agent.kill("SIGTERM");
    await agent.status;
  }
}

Deno.test("30 concurrent 64 MiB cold reads on the fs store: all served within three retries", async () => {
  await initHashes();
  const tmp = await tempDir("tierd-cold30-fs");
  try {
    const original = await generate(join(tmp.path, "broker"));
    const text = testConfigText({ dir: tmp.path })
      .replace("[agent]\n", `[agent]\nlisten = "127.0.0.1:${freePort()}"\n`)
      .replace("topic = 0\n", `topic = 0\nlocal_retention_size = "1 MiB"\n`);
    await thirtyColdReads(tmp.path, text, {}, original, false);
  } finally {
    await tmp.cleanup();
  }
});

/** The thirty reads against MinIO, by `deno run main.ts` or by the compiled binary `bin`. */
async function onMinio(tmp: { path: string }, bin?: string): Promise<void> {
  const minio = (await startMinioReady())!;
  await initHashes();
  try {
    const original = await generate(join(tmp.path, "broker"));
    const text = s3ConfigText({
      dir: tmp.path,
      minio,
      logLevel: "warn",
      topics: [{ stream: 0, topic: 0, localRetentionSize: "1 MiB" }],
    });
    await thirtyColdReads(tmp.path, text, s3Env(minio), original, true, bin);
  } finally {
    await minio.stop();
  }
}

Deno.test("30 concurrent 64 MiB cold reads on MinIO: all served within three retries", async () => {
  if (!(await minioAvailable("30 concurrent cold reads against MinIO"))) return;
  const tmp = await tempDir("tierd-cold30-minio");
  try {
    await onMinio(tmp);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("30 concurrent 64 MiB cold reads on MinIO through the compiled binary (Bun, fetch worker threads): all served within three retries", async () => {
  if (!(await minioAvailable("30 concurrent cold reads against MinIO"))) return;
  const tmp = await tempDir("tierd-cold30-bin");
  try {
    const bin = join(tmp.path, "tierd");
    buildTierdBinary(bin);
    await onMinio(tmp, bin);
  } finally {
    await tmp.cleanup();
  }
});
