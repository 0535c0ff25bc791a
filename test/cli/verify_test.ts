// `tierd verify` as an operator uses it, on the fs store: everything as the journal says exits 0
// (lost offsets and holes said, not counted as differences), beside a running agent's lock; then
// each damage — a truncated object, a flipped byte (found by --deep, and by default where the
// store's checksum of a segment still on local disk tells), a missing object, a local segment
// changed after its copy, orphan objects — exits 1 naming its segment. No run changes a byte of
// the bucket, the journal or the broker's files, and an orphan is never deleted.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdir, readFile, stat, unlink, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { listBounded } from "../../providers/listing.ts";
import { parseConfig } from "../../src/config/load.ts";
import { generatePartition } from "../../src/format/generate.ts";
import { silentLogger } from "../../src/log.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import {
  minioAvailable,
  minioStore,
  s3ConfigText,
  s3Env,
  startMinioReady,
} from "../fixtures/_agent.ts";
import { tempDir } from "../_util.ts";
import { saveIdentity } from "../../src/ownership/identity.ts";
import { lockStateDir } from "../../src/runtime/state_lock.ts";
import { PartitionLedger } from "../../src/tier/partition_ledger.ts";
import { cli, cliProcess, type CliResult } from "./_cli.ts";
import { type TieredFixture, tieredFixture } from "./_tiered.ts";

/** Runs verify and checks it changed no file under the fixture's directory. */
async function verify(f: TieredFixture, ...args: string[]): Promise<CliResult> {
  const before = await f.snapshot();
  const r = await cli(["verify", "--config", f.configPath, ...args]);
  assert.deepEqual(await f.snapshot(), before, `verify ${args.join(" ")} changed a file`);
  return r;
}

interface JsonFinding {
  partition: string;
  segment: string | null;
  status: string;
  key: string | null;
  method: string | null;
  detail: string;
}

interface JsonReport {
  matches: boolean;
  differences: number;
  counts: Record<string, number>;
  checked: number;
  findings: JsonFinding[];
}

async function report(f: TieredFixture, ...args: string[]): Promise<JsonReport> {
  const r = await verify(f, "--json", ...args);
  assert.ok(r.code === 0 || r.code === 1, r.stderr);
  const json = JSON.parse(r.stdout) as JsonReport;
  assert.equal(r.code, json.matches ? 0 : 1);
  return json;
}

/** The finding about segment `start` (the one with a status other than `ok`, if any). */
function about(json: JsonReport, start: bigint): JsonFinding {
  const all = json.findings.filter((x) => x.segment === start.toString());
  assert.ok(all.length > 0, `no finding about segment ${start}`);
  return all.find((x) => x.status !== "ok") ?? all[0];
}

/** A table row of verify's output about segment `start`, split into its cells. */
function row(out: string, start: bigint): string[] {
  const line = out.split("\n").find((l) =>
    l.startsWith("0/0/0 ") && l.split(/\s+/)[1] === `${start}`
  );
  assert.ok(line, `no row for segment ${start} in:\n${out}`);
  return line.split(/\s{2,}/);
}

Deno.test("verify: matches exit 0; each difference exits 1 naming its segment; nothing changes", async (t) => {
  const f = await tieredFixture();
  try {
    const [first, ...rest] = f.segments;
    // The broker's retention took the first segment before tierd ran: offsets lost before upload.
    await unlink(first.logPath);
    await unlink(first.indexPath);
    const sealed = rest.slice(0, -1);
    const half = sealed.slice(0, Math.floor(sealed.length / 2));
    const keep = rest.reduce((n, s) => n + s.size, 0) - half.reduce((n, s) => n + s.size, 0);
    await f.writeConfig(`local_retention_size = "${keep}"`);
    const pass = await f.pass();
    assert.deepEqual(pass.problems, []);
    assert.equal(pass.evicted, half.length, "the older half is evicted");
    const [evicted0, evicted1, evicted2] = half;
    const [local0, local1] = sealed.slice(half.length);
    assert.ok(evicted2 && local1, `${sealed.length} sealed segments`);

    // A hole the journal records (a restore found no usable copy), after the chain.
    const holeAt = rest.at(-1)!.endOffset + 1_000_000n;
    const ledger = await PartitionLedger.open(
      f.config.agent.state_dir,
      { stream: 0, topic: 0, partition: 0 },
      { prefix: "iggy", clusterId: "local" },
    );
    await ledger.record({
      type: "hole",
      segment: holeAt,
      generation: 0n,
      endOffset: holeAt + 9n,
      reason: "test: no usable copy",
      at: Date.UTC(2025, 0, 1),
    });
    await ledger.close();
    const logKey = (start: bigint) => ledger.keys(start).log;

    await t.step("everything as the journal says: exit 0, beside a running agent", async () => {
      const lock = await lockStateDir(f.config.agent.state_dir, "tierd run (the test)");
      try {
        const r = await verify(f);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        assert.match(r.stdout, /verify: everything matches/);
        assert.match(r.stdout, new RegExp(`${sealed.length} copies checked, ${sealed.length} ok`));
        assert.equal(row(r.stdout, first.startOffset)[3], "lost");
        assert.equal(row(r.stdout, holeAt)[3], "hole");
        assert.match(row(r.stdout, holeAt)[5], /test: no usable copy/);
        assert.ok(!/\bok\b/.test(r.stdout.split("\n\n")[0]), "ok rows only with --all");

        const json = await report(f);
        assert.equal(json.matches, true);
        assert.deepEqual(json.counts, { lost: 1, hole: 1, ok: sealed.length });
        assert.equal(about(json, evicted0.startOffset).method, "head");
        assert.equal(about(json, local0.startOffset).method, "stored crc32");

        const deep = await report(f, "--deep");
        assert.equal(deep.matches, true);
        for (const s of sealed) assert.equal(about(deep, s.startOffset).method, "read-back");

        const all = await verify(f, "--all", "--partition", "0");
        assert.equal(all.code, 0);
        assert.equal(row(all.stdout, local1.startOffset)[3], "ok");
      } finally {
        lock.release();
      }
    });

    await t.step("a truncated remote object: size", async () => {
      const key = logKey(evicted0.startOffset);
      const head = await f.store.head(key);
      const { bytes } = await f.store.get(key);
      await f.store.put(key, bytes.subarray(0, bytes.length - 100), { metadata: head.metadata });
      const r = await verify(f);
      assert.equal(r.code, 1, r.stdout + r.stderr);
      const cells = row(r.stdout, evicted0.startOffset);
      assert.equal(cells[3], "size");
      assert.match(
        cells[5],
        new RegExp(`object is ${bytes.length - 100} bytes, the copy was ${bytes.length}`),
      );
      assert.match(r.stdout, /verify: 1 DIFFERENCE\(S\); nothing was changed/);
    });

    await t.step("a flipped byte in an evicted segment's object: found by --deep", async () => {
      const path = f.objectFile(logKey(evicted1.startOffset));
      await flipKeepingMtime(path);
      // Without --deep its HEAD is all there is: size and metadata as recorded.
      assert.equal(about(await report(f), evicted1.startOffset).status, "ok");
      const deep = about(await report(f, "--deep"), evicted1.startOffset);
      assert.equal(deep.status, "checksum");
      assert.match(deep.detail, /its bytes hash to xxh3-128 [0-9a-f]{32}, the segment's are/);
    });

    await t.step(
      "a flipped byte in a local segment's object: the store's checksum tells",
      async () => {
        await flipKeepingMtime(f.objectFile(logKey(local0.startOffset)));
        const r = await verify(f);
        assert.equal(r.code, 1);
        const cells = row(r.stdout, local0.startOffset);
        assert.equal(cells[3], "checksum");
        assert.equal(cells[4], "local+remote");
      },
    );

    await t.step("a missing object", async () => {
      await f.store.deleteMany([logKey(evicted2.startOffset)]);
      const cells = row((await verify(f)).stdout, evicted2.startOffset);
      assert.equal(cells[3], "missing");
      assert.match(cells[5], /the object is gone/);
    });

    await t.step("a local segment changed after its copy", async () => {
      const bytes = await readFile(local1.logPath);
      bytes[bytes.length - 1] ^= 0x01;
      await writeFile(local1.logPath, bytes);
      const r = await verify(f);
      assert.equal(r.code, 1);
      const cells = row(r.stdout, local1.startOffset);
      assert.equal(cells[3], "local-changed");
      assert.match(cells[5], /changed after it was copied/);
    });

    await t.step("orphan objects: reported, never deleted", async () => {
      const stranger = logKey(holeAt + 5_000_000n);
      const note = "iggy/local/0/0/0/notes.txt";
      await f.store.put(stranger, new Uint8Array([1, 2, 3]));
      await f.store.put(note, new Uint8Array([4]));
      const json = await report(f);
      const orphans = json.findings.filter((x) => x.status === "orphan");
      assert.deepEqual(orphans.map((o) => o.key).sort(), [note, stranger].sort());
      assert.match(about(json, holeAt + 5_000_000n).detail, /the journal has no record of segment/);
      const keys = (await listBounded(f.store, "iggy/")).map((o) => o.key);
      assert.ok(keys.includes(stranger) && keys.includes(note), "verify deletes nothing");
      assert.deepEqual(json.counts, {
        lost: 1,
        size: 1,
        checksum: 1,
        ok: sealed.length - 4,
        missing: 1,
        "local-changed": 1,
        orphan: 2,
        hole: 1,
      });
    });

    await t.step("bad usage or a state dir of another key space: exit 2", async () => {
      assert.equal((await verify(f, "--checkers", "0")).code, 2);
      assert.equal((await verify(f, "--stream", "x")).code, 2);
      await saveIdentity(f.config.agent.state_dir, {
        agentId: "0123456789abcdef0123456789abcdef",
        createdAt: 0,
        host: "elsewhere",
        keySpace: { prefix: "other", clusterId: "local" },
      });
      const r = await verify(f);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /belongs to key space other\/local\//);
    });
  } finally {
    await f.cleanup();
  }
});

/** Flips one byte of a file in place and puts its mtime back: bit rot the fs store still opens. */
async function flipKeepingMtime(path: string): Promise<void> {
  const { atime, mtime } = await stat(path);
  const bytes = await readFile(path);
  bytes[Math.floor(bytes.length / 2)] ^= 0x01;
  await writeFile(path, bytes);
  await utimes(path, atime, mtime);
}

// The same check against a real MinIO, the CLI as its own process with the keys in its
// environment: MinIO keeps each object's CRC-64/NVME, which proves a local segment's copy without
// a read-back and catches a flipped byte in it.
if (await minioAvailable("tierd verify against MinIO")) {
  Deno.test("verify against MinIO: matches exit 0; a flipped byte, a missing object and an orphan exit 1", async () => {
    const minio = (await startMinioReady())!;
    const tmp = await tempDir("tierd-verify-minio");
    try {
      const path = join(tmp.path, "tierd.toml");
      const segments = await generatePartition({
        format: "iggy-0.9",
        dataDir: join(tmp.path, "broker"),
        stream: 0,
        topic: 0,
        partition: 0,
        messages: 2000,
        segmentSize: 64 * 1024,
      });
      const sealed = segments.slice(0, -1);
      const keep = segments.reduce((n, s) => n + s.size, 0) - sealed[0].size - sealed[1].size;
      const text = s3ConfigText({
        dir: tmp.path,
        minio,
        topics: [{ stream: 0, topic: 0, localRetentionSize: String(keep) }],
        logLevel: "error",
      });
      await writeFile(path, text);
      const env = s3Env(minio);
      const config = parseConfig(text, path, env);
      const store = minioStore(minio);
      const worker = new TierWorker({ config, store, prefix: "iggy", logger: silentLogger });
      const pass = await worker.pass();
      await worker.close();
      assert.deepEqual([pass.evicted, pass.problems], [2, []]);

      const objects = async () =>
        (await listBounded(store, "iggy/")).map((o) => `${o.key} ${o.size}`).sort();
      const run = async (...args: string[]) => {
        const before = [await objects(), await snapshotFiles(tmp.path)];
        const r = await cliProcess(["verify", "--config", path, "--json", ...args], env);
        assert.deepEqual([await objects(), await snapshotFiles(tmp.path)], before, "changed");
        assert.ok(r.code === 0 || r.code === 1, r.stderr);
        return { code: r.code, json: JSON.parse(r.stdout) as JsonReport };
      };
      const ok = await run();
      assert.equal(ok.code, 0, JSON.stringify(ok.json.findings, null, 2));
      assert.equal(ok.json.checked, sealed.length);
      assert.equal(about(ok.json, sealed[0].startOffset).method, "head");
      assert.equal(about(ok.json, sealed[2].startOffset).method, "stored crc64nvme");
      const deep = await run("--deep");
      assert.equal(deep.code, 0);
      assert.equal(about(deep.json, sealed[0].startOffset).method, "read-back");

      const keys = (await listBounded(store, "iggy/")).map((o) => o.key);
      const keyOf = (s: { startOffset: bigint }) =>
        keys.find((k) => k.endsWith(`${String(s.startOffset).padStart(20, "0")}.log`))!;
      // A local segment's object rewritten with one byte flipped (and MinIO's checksum of it).
      const flipped = keyOf(sealed[2]);
      const head = await store.head(flipped);
      const bytes = (await store.get(flipped)).bytes.slice();
      bytes[Math.floor(bytes.length / 2)] ^= 0x01;
      await store.put(flipped, bytes, { metadata: head.metadata });
      await store.deleteMany([keyOf(sealed[1])]);
      const orphan = keyOf(sealed[0]).replace(/\d{20}\.log$/, `${"9".repeat(20)}.log`);
      await store.put(orphan, new Uint8Array([1]));

      const bad = await run();
      assert.equal(bad.code, 1);
      assert.equal(about(bad.json, sealed[2].startOffset).status, "checksum");
      assert.equal(about(bad.json, sealed[1].startOffset).status, "missing");
      assert.deepEqual(
        bad.json.findings.filter((x) => x.status === "orphan").map((x) => x.key),
        [orphan],
      );
      assert.ok((await listBounded(store, "iggy/")).some((o) => o.key === orphan));
    } finally {
      await tmp.cleanup();
      await minio.stop();
    }
  });
}

/** Every file under `root` with a hash of its bytes. */
async function snapshotFiles(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(root, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath, e.name);
    out[path] = createHash("sha256").update(await readFile(path)).digest("hex");
  }
  return out;
}
