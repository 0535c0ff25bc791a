// A remote copy damaged after its upload — one byte flipped (same size, metadata intact),
// truncated, or deleted — never costs the local segment: eviction proves the copy's bytes (the
// store's checksum against the local file's; a read-back where the store keeps none or where its
// checksum differs, for a stored checksum proves a copy but never condemns one), finds it damaged, keeps the local files and journals the segment DANGLING; the cleanup deletes what
// is left, the copy phase uploads it again, and the next eviction lets it go. Against the fs
// store and a real MinIO (skipped loudly without one, failed in CI), through the phase rig.
import assert from "node:assert/strict";
import { access, readFile, stat, truncate, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { FsStore } from "../../providers/fs/store.ts";
import { S3Store } from "../../providers/s3/store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { getSegment } from "../../src/state/segment_state.ts";
import { UnlinkEvictor } from "../../src/tier/evictor.ts";
import { describeProblem } from "../../src/tier/problem.ts";
import { cleanupPhase } from "../../src/tier/phases/cleanup.ts";
import { copyPhase } from "../../src/tier/phases/copy.ts";
import { evictPhase } from "../../src/tier/phases/evict.ts";
import { advanceFloor } from "../../src/tier/phases/floor.ts";
import { findMinio, type MinioServer, startMinio } from "../fixtures/minio.ts";
import { tempDir } from "../_util.ts";
import { type PhaseRig, phaseRig } from "./_phase_rig.ts";
import { announceSkip } from "../fixtures/_server.ts";

/** Damages the `.log` object at `key` behind tierd's back; `says` is how eviction tells. */
interface Damage {
  damage(key: string): Promise<void>;
  says: RegExp;
}

/** A store under test and the ways to damage an object in it. */
interface Backend {
  store: ObjectStore;
  damages: Record<string, Damage>;
}

/** What the eviction's error says, per way of finding out. */
const BY_READ_BACK = /its bytes hash to xxh3-128 [0-9a-f]{32}, the segment's are/;
const BY_SIZE = /object is \d+ bytes, segment is \d+/;
const MISSING = /no object|NoSuchKey|404|not ?found/i;

const exists = (path: string) => access(path).then(() => true, () => false);

/** The eviction phase with a local retention that wants every sealed segment gone. */
async function evictAll(r: PhaseRig) {
  return await evictPhase(r.ctx, r.ledger, {
    dir: r.dir,
    segments: await r.local(),
    format: r.format,
    topic: { ...r.topic, local_retention_size: 0 },
    evictor: new UnlinkEvictor(),
  });
}

/** Copies every sealed segment, advances the floor, damages segment 0's copy, then evicts. */
async function damagedThenRecopied(r: PhaseRig, damage: Damage, what: string): Promise<void> {
  const copied = await copyPhase(r.ctx, r.ledger, {
    segments: await r.local(),
    format: r.format,
    reportedGaps: new Set(),
  });
  assert.deepEqual(copied.problems, [], what);
  await advanceFloor(r.ctx, r.ledger);
  const [seg] = r.segments;
  const keys = r.ledger.keys(seg.startOffset);
  const local = new Uint8Array(await readFile(seg.logPath));
  await damage.damage(keys.log);

  // Eviction wants every sealed segment gone (local retention 0) but finds segment 0's copy
  // damaged: it stops there, so nothing goes.
  const first = await evictAll(r);
  assert.equal(first.evicted, 0, `${what}: nothing evicted`);
  assert.ok(await exists(seg.logPath), `${what}: the local segment stays`);
  const words = first.problems.map(describeProblem);
  assert.equal(first.problems.length, 1, `${what}: ${words}`);
  assert.deepEqual([first.problems[0].kind, first.problems[0].segment], ["evict", seg.startOffset]);
  assert.match(words[0], damage.says, what);
  const rec = getSegment(r.ledger.state, 0n, seg.startOffset)!;
  assert.equal(rec.state, "DANGLING", what);
  assert.match(rec.danglingReason ?? "", /^eviction: remote copy damaged/, what);
  assert.equal(
    r.logged("not evicting: the remote copy is damaged or gone; it will be copied again").length,
    1,
  );

  // The next pass: cleanup removes what is left, the copy phase uploads the segment again.
  const cleaned = await cleanupPhase(r.ctx, r.ledger, {
    segments: await r.local(),
    format: r.format,
  });
  assert.deepEqual([cleaned.cleaned, cleaned.adopted, cleaned.problems], [1, 0, []], what);
  const again = await copyPhase(r.ctx, r.ledger, {
    segments: await r.local(),
    format: r.format,
    reportedGaps: new Set(),
  });
  assert.deepEqual([again.copied, again.problems], [1, []], `${what}: copied again`);
  const store = r.ctx.store.within(r.ctx.store.deadline(10_000));
  assert.deepEqual((await store.get(keys.log)).bytes, local, `${what}: the store has its bytes`);

  // Now the copy is proven, and the segment may go.
  const second = await evictAll(r);
  assert.deepEqual(second.problems, [], what);
  assert.ok(second.evicted >= 1, `${what}: evicted once its copy is whole`);
  assert.equal(getSegment(r.ledger.state, 0n, seg.startOffset)?.evicted, true, what);
  assert.equal(await exists(seg.logPath), false, what);
}

/** Runs every damage of `backend` on a fresh rig (fresh incarnation, fresh keys) each. */
async function eachDamage(t: Deno.TestContext, open: () => Promise<Backend>): Promise<void> {
  const backend = await open();
  for (const [what, damage] of Object.entries(backend.damages)) {
    await t.step(what, async () => {
      const r = await phaseRig({ wrap: () => backend.store });
      try {
        await damagedThenRecopied(r, damage, what);
      } finally {
        await r.cleanup();
      }
    });
  }
}

Deno.test("damaged copy, fs store: flipped, truncated or deleted, the segment stays and is copied again", async (t) => {
  const dir = await tempDir("tierd-damaged-fs");
  try {
    const root = join(dir.path, "bucket");
    const store = new FsStore({ root });
    const file = (key: string) => join(root, "objects", ...key.split("/"));
    const flip = async (key: string) => {
      const bytes = await readFile(file(key));
      bytes[Math.floor(bytes.length / 2)] ^= 0x01;
      await writeFile(file(key), bytes);
    };
    await eachDamage(t, () =>
      Promise.resolve({
        store,
        damages: {
          // Same size, same mtime: the object still opens; only re-hashing its file can tell.
          "one byte flipped, mtime kept": {
            async damage(key) {
              const { mtime, atime } = await stat(file(key));
              await flip(key);
              await utimes(file(key), atime, mtime);
            },
            says: BY_READ_BACK,
          },
          // Another mtime: the metadata no longer describes the file, so it is no object.
          "one byte flipped": { damage: flip, says: MISSING },
          "truncated": { damage: (key) => truncate(file(key), 100), says: MISSING },
          "deleted": { damage: async (key) => void await store.deleteMany([key]), says: MISSING },
        },
      }));
  } finally {
    await dir.cleanup();
  }
});

const found = await findMinio();
if ("reason" in found) {
  if (Deno.env.get("CI") === "true") throw new Error(`MinIO is required in CI: ${found.reason}`);
  announceSkip(`damaged copies on MinIO: ${found.reason}`);
  Deno.test({ name: `damaged copy, MinIO (skipped: ${found.reason})`, ignore: true, fn() {} });
} else {
  Deno.test("damaged copy, MinIO: flipped, truncated or deleted, the segment stays and is copied again", async (t) => {
    let minio: MinioServer | undefined;
    try {
      minio = (await startMinio())!;
      const s3 = (checksum: "crc64nvme" | "none") =>
        new S3Store({
          endpoint: minio!.endpoint,
          region: minio!.region,
          bucket: minio!.bucket,
          credentials: { accessKeyId: minio!.accessKey, secretAccessKey: minio!.secretKey },
          urlStyle: "path",
          checksum,
        });
      const store = s3("crc64nvme");
      /** Rewrites the object with `change`d bytes and its metadata, as `writer` sends it. */
      const rewrite =
        (writer: S3Store, change: (b: Uint8Array) => Uint8Array) => async (key: string) => {
          const head = await store.head(key);
          const { bytes } = await store.get(key);
          await writer.put(key, change(bytes), { metadata: head.metadata });
        };
      const flipped = (b: Uint8Array) => {
        const out = b.slice();
        out[Math.floor(out.length / 2)] ^= 0x01;
        return out;
      };
      await eachDamage(t, () =>
        Promise.resolve({
          store,
          damages: {
            // Rewritten with its CRC-64/NVME: MinIO keeps the flipped bytes' checksum, which
            // differs from the local file's; the read-back it leads to tells.
            "one byte flipped (the store's checksum differs, read back)": {
              damage: rewrite(store, flipped),
              says: BY_READ_BACK,
            },
            // Rewritten without one: MinIO keeps no checksum, so the copy is read back.
            "one byte flipped, no checksum kept (read back)": {
              damage: rewrite(s3("none"), flipped),
              says: BY_READ_BACK,
            },
            "truncated": {
              damage: rewrite(store, (b) => b.subarray(0, b.length - 100)),
              says: BY_SIZE,
            },
            "deleted": { damage: async (key) => void await store.deleteMany([key]), says: MISSING },
          },
        }));
    } finally {
      await minio?.stop();
    }
  });
}
