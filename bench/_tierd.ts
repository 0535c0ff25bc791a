// Runs the compiled tierd binary for one `run --once` pass over a segment set, with a fresh
// state directory and key prefix, and checks that the store then holds every sealed segment.
import { join } from "node:path";
import type { SegmentSet } from "./_segments.ts";
import { WORK_DIR } from "./_segments.ts";
import { runTimed, tierdBinary, type TimedRun } from "./_proc.ts";
import { type BenchStore, listPrefix } from "./_store.ts";

/** tierd settings under test; omitted keys keep tierd's defaults. */
export interface TierdSettings {
  /** e.g. `"16 MiB"` */
  part_size?: string;
  upload_concurrency?: number;
}

/** A finished tierd pass. */
export interface TierdRun extends TimedRun {
  /** The effective settings (`tierd config show`). */
  effective: Record<string, string>;
  /** Per-segment copy seconds from tierd's own log (its `segment copied` lines). */
  segmentSeconds: number[];
}

function configText(
  set: SegmentSet,
  store: BenchStore,
  dir: string,
  prefix: string,
  s: TierdSettings,
) {
  const lines = [
    "[agent]",
    `data_dir = ${JSON.stringify(set.dataDir)}`,
    `state_dir = ${JSON.stringify(join(dir, "state"))}`,
    'cluster_id = "bench"',
    'seal_quiescence = "0 s"',
    'format = "iggy-0.9"',
    'log_level = "info"',
    "",
    "[tiered_storage]",
    "enabled = true",
    'backend = "s3"',
    'segment_upload_timeout = "10 m"',
  ];
  if (s.part_size !== undefined) lines.push(`part_size = ${JSON.stringify(s.part_size)}`);
  if (s.upload_concurrency !== undefined) {
    lines.push(`upload_concurrency = ${s.upload_concurrency}`);
  }
  lines.push(
    "",
    "[tiered_storage.s3]",
    `bucket = ${JSON.stringify(store.bucket)}`,
    `region = ${JSON.stringify(store.region)}`,
    `endpoint = ${JSON.stringify(store.endpoint)}`,
    'url_style = "path"',
    `prefix = ${JSON.stringify(prefix)}`,
    "",
    "[tiered_storage.cache]",
    `path = ${JSON.stringify(join(dir, "state", "cache"))}`,
    "",
    "[[topic]]",
    `stream = ${set.stream}`,
    `topic = ${set.topic}`,
    "",
  );
  return lines.join("\n");
}

const EFFECTIVE_KEYS = ["part_size", "upload_concurrency", "upload_piece_size"];

/**
 * Runs `tierd run --once` over `set` into `prefix` and verifies the copy.
 * @param sampleMs sample the process's RSS this often (0: not at all)
 * @throws {Error} when tierd fails or the store does not hold exactly the sealed bytes
 */
export async function runTierd(
  set: SegmentSet,
  store: BenchStore,
  prefix: string,
  settings: TierdSettings,
  sampleMs = 0,
): Promise<TierdRun> {
  const bin = await tierdBinary();
  const dir = join(WORK_DIR, "runs", prefix.replaceAll("/", "_"));
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(join(dir, "state"), { recursive: true });
  const config = join(dir, "tierd.toml");
  await Deno.writeTextFile(config, configText(set, store, dir, prefix, settings));
  // Credentials go through the environment, as an operator would pass them.
  const env = { TIERD_S3_ACCESS_KEY: store.accessKey, TIERD_S3_SECRET_KEY: store.secretKey };
  try {
    const shown = await runTimed(bin, ["config", "show", "--config", config], { env });
    const effective: Record<string, string> = {};
    for (const key of EFFECTIVE_KEYS) {
      const m = new RegExp(`^${key} = (.+)$`, "m").exec(shown.stdout);
      if (m) effective[key] = m[1].replace(/^"|"$/g, "");
    }
    const run = await runTimed(bin, ["run", "--once", "--config", config], { env, sampleMs });
    if (run.code !== 0) {
      throw new Error(`tierd run --once exited ${run.code}: ${run.stderr.slice(-2000)}`);
    }
    await checkCopied(set, store, prefix, "tierd");
    const segmentSeconds = logLines(run.stderr)
      .filter((l) => Object.values(l).includes("segment copied") && typeof l.seconds === "number")
      .map((l) => l.seconds as number);
    return { ...run, effective, segmentSeconds };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** tierd's JSON log lines (other lines are skipped). */
export function logLines(stderr: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of stderr.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // not a log line
    }
  }
  return out;
}

/**
 * Checks that `prefix` holds one object per sealed `.log` and `.index` with their sizes.
 * @throws {Error} naming what is missing
 */
export async function checkCopied(
  set: SegmentSet,
  store: BenchStore,
  prefix: string,
  tool: string,
): Promise<void> {
  const { sizes } = await listPrefix(store.client, prefix + "/");
  const want = new Map<number, number>();
  for (const s of set.sealed) {
    want.set(s.size, (want.get(s.size) ?? 0) + 1);
    want.set(s.indexSize, (want.get(s.indexSize) ?? 0) + 1);
  }
  let segmentObjects = 0;
  let bytes = 0;
  for (const [key, size] of sizes) {
    if (!/\.(log|index)$/.test(key)) continue;
    segmentObjects++;
    bytes += size;
    const left = want.get(size) ?? 0;
    if (left > 0) want.set(size, left - 1);
  }
  const missing = [...want.values()].reduce((n, v) => n + v, 0);
  if (missing > 0 || bytes !== set.bytes || segmentObjects !== set.sealed.length * 2) {
    throw new Error(
      `${tool} left ${segmentObjects} segment objects (${bytes} bytes) under ${prefix}/, ` +
        `expected ${set.sealed.length * 2} (${set.bytes} bytes)`,
    );
  }
}
