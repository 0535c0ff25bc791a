// `verify_*`: what proving a copy's bytes before eviction costs (src/tier/verify_content.ts),
// for one sealed segment of SEGMENT_MIB, per way of proving it:
//   - `stored`: the store keeps a CRC-64/NVME (S3 on the local MinIO, uploaded by tierd's own
//     multipart path): one HEAD with `x-amz-checksum-mode` (the HEAD eviction sent anyway), then
//     one read of the local file computing XXH3-128 and CRC-64/NVME together;
//   - `read_back`: the store keeps none (the same MinIO, uploaded without checksums): the local
//     file's XXH3-128, then ranged GETs of 8 MiB, hashed;
//   - `fs`: the fs store re-hashing its own file, then the local read;
//   - the baseline: what eviction did before, the local XXH3-128 alone (HEADs not counted).
// Each is timed end to end (median of ROUNDS, page cache warm) and reported as MB/s of segment
// verified, with the extra requests and bytes it costs per segment and per GiB.
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { FsStore } from "../providers/fs/store.ts";
import { S3Store } from "../providers/s3/store.ts";
import type { ObjectStore } from "../providers/types.ts";
import { uploadFile } from "../providers/upload.ts";
import { seededUint32 } from "../src/base/rng.ts";
import { initHashes } from "../src/hash.ts";
import { hashFile } from "../src/tier/file_hash.ts";
import { type ContentProof, verifyContent } from "../src/tier/verify_content.ts";
import { BENCH_DIR, recordResult } from "./_results.ts";
import { median, MiB, progress, round } from "./_stats.ts";
import { openBenchStore } from "./_store.ts";

const SEGMENT_MIB = 256;
const PART = 16 * MiB;

/** Options of {@link runVerifyBench}. */
export interface VerifyBenchOptions {
  rounds: number;
}

/** A random file of `size` bytes (seeded, so every run hashes the same bytes). */
async function segmentFile(path: string, size: number): Promise<void> {
  const next = seededUint32(405);
  const bytes = new Uint8Array(size);
  const words = new Uint32Array(bytes.buffer);
  for (let i = 0; i < words.length; i++) words[i] = next();
  await writeFile(path, bytes);
}

/** Times `run` ROUNDS times; the median seconds and the last proof. */
async function timed(
  rounds: number,
  run: () => Promise<ContentProof | undefined>,
): Promise<{ seconds: number; proof?: ContentProof }> {
  const samples: number[] = [];
  let proof: ContentProof | undefined;
  await run(); // warm the page cache and the connections
  for (let i = 0; i < rounds; i++) {
    const t = performance.now();
    proof = await run();
    samples.push((performance.now() - t) / 1000);
  }
  return { seconds: median(samples), proof };
}

/** Runs the benchmark and records `verify_*` figures. */
export async function runVerifyBench(o: VerifyBenchOptions): Promise<void> {
  await initHashes();
  const work = join(BENCH_DIR, ".work", "verify");
  await mkdir(work, { recursive: true });
  const path = join(work, "00000000000000000000.log");
  const size = SEGMENT_MIB * MiB;
  progress("verify", `writing a ${SEGMENT_MIB} MiB segment`);
  await segmentFile(path, size);
  const checksum = await hashFile(path);
  const local = { path, size, checksum };
  const store = await openBenchStore();
  const fsRoot = join(work, "fs-store");
  try {
    const s3 = (checksum: "crc64nvme" | "none") =>
      new S3Store({
        endpoint: store.endpoint,
        region: store.region,
        bucket: store.bucket,
        credentials: { accessKeyId: store.accessKey, secretAccessKey: store.secretKey },
        urlStyle: "path",
        checksum,
      });
    const run = `verify-${Date.now().toString(36)}`;
    const upload = async (target: ObjectStore, key: string) => {
      await uploadFile(target, key, path, { partSize: PART, concurrency: 4 });
    };
    const withSums = s3("crc64nvme");
    const without = s3("none");
    const fs = new FsStore({ root: fsRoot });
    progress("verify", "uploading the copies (MinIO with and without CRC-64/NVME, fs)");
    await upload(withSums, `${run}/stored.log`);
    await upload(without, `${run}/plain.log`);
    await upload(fs, `${run}/fs.log`);
    const prove = (target: ObjectStore, key: string) => async () =>
      await verifyContent(target, await target.head(key, { checksums: true }), local);

    progress("verify", "timing");
    const baseline = await timed(o.rounds, async () => {
      await hashFile(path, size);
      return undefined;
    });
    const stored = await timed(o.rounds, prove(withSums, `${run}/stored.log`));
    const readBack = await timed(o.rounds, prove(without, `${run}/plain.log`));
    const fsProof = await timed(o.rounds, prove(fs, `${run}/fs.log`));
    if (stored.proof?.method !== "stored" || readBack.proof?.method !== "read-back") {
      throw new Error(`unexpected proofs: ${stored.proof?.method}, ${readBack.proof?.method}`);
    }
    const mbs = (seconds: number) => round(size / 1e6 / seconds, 1);
    const perGiB = (n: number) => round(n * (1024 / SEGMENT_MIB), 1);
    const common = {
      settings: { segment_mib: SEGMENT_MIB, part_mib: PART / MiB, read_back_chunk_mib: 8 },
      store: store.describe,
      rounds: o.rounds,
    };
    const baselineMbs = mbs(baseline.seconds);
    recordResult("verify_stored_checksum_mb_s", mbs(stored.seconds), "≥ 100", {
      method:
        `One ${SEGMENT_MIB} MiB segment uploaded by tierd's multipart path to ${store.describe} ` +
        `with CRC-64/NVME (full-object); timed: HEAD with x-amz-checksum-mode: ENABLED, then one ` +
        `read of the local file computing XXH3-128 and CRC-64/NVME, compared. Median of ${o.rounds}, warm page cache.`,
      ...common,
      extra_requests_per_segment: 0,
      extra_bytes_per_segment: 0,
      notes:
        `Before: the local XXH3-128 alone ran at ${baselineMbs} MB/s; the CRC-64/NVME in the ` +
        `same read is the whole extra cost (no request, no byte: the HEAD was sent anyway).`,
    });
    recordResult("verify_read_back_mb_s", mbs(readBack.seconds), "≥ 50", {
      method: `The same segment uploaded without checksums (S3Store checksum: "none"), so the ` +
        `store keeps none; timed: HEAD, the local file's XXH3-128, then ranged GETs of 8 MiB ` +
        `hashed with XXH3-128, compared. No bandwidth limit. Median of ${o.rounds}.`,
      ...common,
      extra_requests_per_segment: readBack.proof.requests,
      extra_requests_per_gib: perGiB(readBack.proof.requests),
      extra_bytes_per_segment: readBack.proof.bytesRead,
      extra_bytes_per_gib: 2 ** 30,
    });
    recordResult("verify_fs_rehash_mb_s", mbs(fsProof.seconds), "≥ 100", {
      method: `The same segment in an fs store on the same disk; timed: HEAD with checksums ` +
        `(the store re-hashes its file with CRC-64/NVME), then the local read. Median of ${o.rounds}.`,
      ...common,
      extra_requests_per_segment: 0,
      extra_bytes_per_segment: size,
      notes: "the extra bytes are the store's own read of its file",
    });
    progress(
      "verify",
      `baseline ${baselineMbs} MB/s; stored ${mbs(stored.seconds)}; read-back ${
        mbs(readBack.seconds)
      } (${readBack.proof.requests} GETs); fs ${mbs(fsProof.seconds)}`,
    );
    await store.client.deleteMany([`${run}/stored.log`, `${run}/plain.log`]).catch(() => {});
  } finally {
    await store.stop();
    await rm(work, { recursive: true, force: true });
  }
}
