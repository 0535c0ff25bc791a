// Sealed Iggy segments for the upload benchmarks, generated once under bench/.work/segments and
// reused while their description matches. Each set also gets a `sealed/` tree of hard links to
// exactly the sealed `.log` and `.index` files, which the peers (rclone, aws) copy: the same
// bytes tierd copies, without the active segment.
import { join } from "node:path";
import { type GeneratedSegment, generatePartition } from "../src/format/generate.ts";
import { BENCH_DIR } from "./_results.ts";
import { MiB, progress } from "./_stats.ts";

/** What to generate. */
export interface SegmentSetSpec {
  /** Directory name under bench/.work/segments. */
  name: string;
  partitions: number;
  sealedPerPartition: number;
  segmentSize: number;
  /** @default 4096 */
  payloadSize?: number;
}

/** One sealed segment on disk. */
export interface SealedSegment {
  partition: number;
  logPath: string;
  indexPath: string;
  size: number;
  indexSize: number;
}

/** A generated set, ready to copy. */
export interface SegmentSet {
  spec: SegmentSetSpec;
  /** The broker data directory (`tierd`'s `agent.data_dir`). */
  dataDir: string;
  /** Hard links to the sealed files only, one folder per partition (the peers' source). */
  sealedDir: string;
  sealed: SealedSegment[];
  /** `.log` plus `.index` bytes of the sealed segments. */
  bytes: number;
  /** Stream and topic ids of every partition. */
  stream: number;
  topic: number;
}

/** bench/.work: generated data, binaries and run directories; git-ignored. */
export const WORK_DIR = join(BENCH_DIR, ".work");
const FORMAT = "iggy-0.9" as const;
const STREAM = 1;
const TOPIC = 1;

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

async function reuse(root: string, spec: SegmentSetSpec): Promise<SegmentSet | undefined> {
  let saved: SegmentSet;
  try {
    saved = JSON.parse(await Deno.readTextFile(join(root, "ready.json")));
  } catch {
    return undefined;
  }
  if (JSON.stringify(saved.spec) !== JSON.stringify(spec)) return undefined;
  for (const s of saved.sealed) {
    try {
      if ((await Deno.stat(s.logPath)).size !== s.size) return undefined;
      if ((await Deno.stat(s.indexPath)).size !== s.indexSize) return undefined;
    } catch {
      return undefined;
    }
  }
  return saved;
}

/**
 * Returns the segment set of `spec`, generating it (about 20 s per GiB) unless an identical one
 * is already on disk.
 * @throws {Error} when the generator does not produce exactly the sealed segments asked for
 */
export async function ensureSegments(spec: SegmentSetSpec): Promise<SegmentSet> {
  const root = join(WORK_DIR, "segments", spec.name);
  const found = await reuse(root, spec);
  if (found) {
    progress("segments", `reusing ${spec.name} (${(found.bytes / MiB).toFixed(0)} MiB sealed)`);
    return found;
  }
  if (await exists(root)) await Deno.remove(root, { recursive: true });
  const dataDir = join(root, "broker");
  const sealedDir = join(root, "sealed");
  const payloadSize = spec.payloadSize ?? 4096;
  // Counting only payload bytes over-estimates the messages a segment holds, so the surplus
  // (a few percent: headers) lands in the active segment, which is not copied.
  const messages = Math.ceil(spec.sealedPerPartition * spec.segmentSize / payloadSize) + 64;
  const sealed: SealedSegment[] = [];
  for (let p = 0; p < spec.partitions; p++) {
    const started = performance.now();
    progress(
      "segments",
      `generating ${spec.name} partition ${p}: ${spec.sealedPerPartition} × ` +
        `${(spec.segmentSize / MiB).toFixed(0)} MiB (${FORMAT}, ${payloadSize}-byte payloads)…`,
    );
    const written: GeneratedSegment[] = await generatePartition({
      format: FORMAT,
      dataDir,
      stream: STREAM,
      topic: TOPIC,
      partition: p,
      messages,
      segmentSize: spec.segmentSize,
      payloadSize,
      seed: 1 + p,
    });
    const partSealed = written.slice(0, -1);
    if (partSealed.length !== spec.sealedPerPartition) {
      throw new Error(
        `generator wrote ${partSealed.length} sealed segments in partition ${p}, ` +
          `expected ${spec.sealedPerPartition}`,
      );
    }
    await Deno.mkdir(join(sealedDir, String(p)), { recursive: true });
    for (const s of partSealed) {
      for (const path of [s.logPath, s.indexPath]) {
        await Deno.link(path, join(sealedDir, String(p), path.slice(path.lastIndexOf("/") + 1)));
      }
      sealed.push({
        partition: p,
        logPath: s.logPath,
        indexPath: s.indexPath,
        size: s.size,
        indexSize: s.indexSize,
      });
    }
    progress(
      "segments",
      `partition ${p} done in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  }
  const bytes = sealed.reduce((n, s) => n + s.size + s.indexSize, 0);
  const set: SegmentSet = { spec, dataDir, sealedDir, sealed, bytes, stream: STREAM, topic: TOPIC };
  await Deno.writeTextFile(join(root, "ready.json"), JSON.stringify(set, null, 2));
  return set;
}

/** Reads every sealed file once, so each tool starts with the same (warm) page cache. */
export async function warmPageCache(set: SegmentSet): Promise<void> {
  const buf = new Uint8Array(8 * MiB);
  for (const s of set.sealed) {
    for (const path of [s.logPath, s.indexPath]) {
      const file = await Deno.open(path);
      try {
        while ((await file.read(buf)) !== null) {
          // reading is the point
        }
      } finally {
        file.close();
      }
    }
  }
}
