// `upload_ratio_vs_rclone` and `upload_ratio_vs_awscli`: MB/s copying the same sealed segments to
// the same store, each tool timed end to end (process start to exit): the compiled tierd binary
// (`run --once`, fresh state and prefix) ÷ `rclone copy` ÷ `aws s3 cp --recursive`.
import { join } from "node:path";
import { recordResult } from "./_results.ts";
import { ensureSegments, type SegmentSet, warmPageCache, WORK_DIR } from "./_segments.ts";
import { machineCpu, readCpu, runTimed, type TimedRun, versionOf, waitForQuiet } from "./_proc.ts";
import { median, MiB, progress, round } from "./_stats.ts";
import { type BenchStore, emptyPrefix, openBenchStore } from "./_store.ts";
import { checkCopied, runTierd, type TierdSettings } from "./_tierd.ts";

/** Options of {@link runUploadBench}. */
export interface UploadBenchOptions {
  /** Timed runs per tool and layout; the median counts. @default 3 */
  rounds?: number;
}

/** The tierd configurations tried; the headline uses the fastest. */
export const TIERD_VARIANTS: Record<string, TierdSettings> = {
  "tierd defaults": {},
  "tierd part_size 16 MiB, upload_concurrency 4": { part_size: "16 MiB", upload_concurrency: 4 },
};

/** Segment layouts; the first is the headline. */
/** How often tool processes are sampled (CPU seconds). */
const SAMPLE_MS = 100;

const LAYOUTS = [
  { name: "1p-4x256MiB", partitions: 1, sealedPerPartition: 4, segmentSize: 256 * MiB },
  { name: "4p-1x256MiB", partitions: 4, sealedPerPartition: 1, segmentSize: 256 * MiB },
];

interface Peer {
  name: string;
  version: string;
  settings: Record<string, string>;
  run(set: SegmentSet, prefix: string): Promise<TimedRun>;
}

async function onPath(name: string): Promise<string | undefined> {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      const path = join(dir, name);
      if ((await Deno.stat(path)).isFile) return path;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** rclone with a remote configured from the environment, otherwise its defaults. */
async function rclonePeer(store: BenchStore): Promise<Peer> {
  const bin = Deno.env.get("TIERD_BENCH_RCLONE") || await onPath("rclone");
  if (!bin) throw new Error("rclone not found (apt-get install rclone, or TIERD_BENCH_RCLONE)");
  const version = await versionOf(bin, ["version"]) ?? "unknown";
  const flags = await runTimed(bin, ["help", "flags"]);
  const settings: Record<string, string> = {};
  for (
    const flag of [
      "transfers",
      "checkers",
      "s3-chunk-size",
      "s3-upload-cutoff",
      "s3-upload-concurrency",
      "buffer-size",
    ]
  ) {
    const m = new RegExp(`--${flag} \\S+.*\\(default ([^)]+)\\)`).exec(flags.stdout);
    settings[flag] = m ? m[1] : "?";
  }
  settings["s3-disable-checksum"] =
    "false (rclone reads each file once for its MD5 before a multipart upload)";
  settings.provider = store.describe.startsWith("local MinIO") ? "Minio" : "Other";
  // rclone's S3 SDK refuses AWS_CA_BUNDLE with its own HTTP transport ("unable to load custom
  // CA bundle"), so it runs without it; rclone uses the system roots (or --ca-cert) instead.
  const inherited = Deno.env.toObject();
  delete inherited.AWS_CA_BUNDLE;
  const env = {
    ...inherited,
    RCLONE_CONFIG: join(WORK_DIR, "no-rclone.conf"), // no user config file
    RCLONE_CONFIG_BENCH_TYPE: "s3",
    RCLONE_CONFIG_BENCH_PROVIDER: settings.provider,
    RCLONE_CONFIG_BENCH_ENDPOINT: store.endpoint,
    RCLONE_CONFIG_BENCH_ACCESS_KEY_ID: store.accessKey,
    RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY: store.secretKey,
    RCLONE_CONFIG_BENCH_REGION: store.region,
  };
  return {
    name: "rclone",
    version,
    settings,
    run: (set, prefix) =>
      runTimed(bin, ["copy", set.sealedDir, `bench:${store.bucket}/${prefix}`], {
        env,
        clearEnv: true,
        sampleMs: SAMPLE_MS,
      }),
  };
}

/** The AWS CLI (Debian's /usr/bin/aws first), credentials from the environment, its defaults. */
async function awsPeer(store: BenchStore): Promise<Peer> {
  const debian = "/usr/bin/aws";
  const bin = Deno.env.get("TIERD_BENCH_AWS") ||
    (await Deno.stat(debian).then(() => debian, () => undefined)) || await onPath("aws");
  if (!bin) throw new Error("aws not found (apt-get install awscli, or TIERD_BENCH_AWS)");
  const version = await versionOf(bin, ["--version"]) ?? "unknown";
  const settings: Record<string, string> = { flags: "--only-show-errors (no progress output)" };
  // The transfer defaults, read from the installation itself where it is a Python script.
  const shebang = (await Deno.readTextFile(bin).catch(() => "")).split("\n")[0];
  const python = shebang.startsWith("#!") ? shebang.slice(2).trim().split(" ")[0] : "";
  const read = python
    ? await runTimed(python, [
      "-c",
      "import json; from awscli.customizations.s3.transferconfig import DEFAULTS; " +
      "print(json.dumps(DEFAULTS))",
    ])
    : undefined;
  try {
    const d = JSON.parse(read?.stdout ?? "");
    settings.multipart_threshold = `${d.multipart_threshold / MiB} MiB`;
    settings.multipart_chunksize = `${d.multipart_chunksize / MiB} MiB`;
    settings.max_concurrent_requests = String(d.max_concurrent_requests);
    settings.preferred_transfer_client = String(d.preferred_transfer_client);
  } catch {
    settings.defaults = "multipart_threshold 8 MiB, multipart_chunksize 8 MiB, " +
      "max_concurrent_requests 10 (documented defaults)";
  }
  const none = join(WORK_DIR, "no-aws-config");
  const env = {
    AWS_ACCESS_KEY_ID: store.accessKey,
    AWS_SECRET_ACCESS_KEY: store.secretKey,
    AWS_DEFAULT_REGION: store.region,
    AWS_CONFIG_FILE: none,
    AWS_SHARED_CREDENTIALS_FILE: none,
    AWS_EC2_METADATA_DISABLED: "true",
    AWS_PAGER: "",
  };
  return {
    name: "awscli",
    version,
    settings,
    run: (set, prefix) =>
      runTimed(bin, [
        "s3",
        "cp",
        "--recursive",
        "--only-show-errors",
        "--endpoint-url",
        store.endpoint,
        set.sealedDir,
        `s3://${store.bucket}/${prefix}/`,
      ], { env, sampleMs: SAMPLE_MS }),
  };
}

async function syncDisks(): Promise<void> {
  await new Deno.Command("sync").output().catch(() => {});
}

/** One tool's run: wall seconds, MB/s and where the CPU went. */
interface Sample {
  seconds: number;
  mbps: number;
  /** Machine CPU busy over the run, percent of all cores. */
  machineCpuPercent: number;
  /** The tool process's own CPU seconds (user + system), sampled every 100 ms. */
  toolCpuSeconds?: number;
  /** The local MinIO's CPU seconds over the run. */
  serverCpuSeconds?: number;
  /** Busy CPU seconds of everything else on the machine over the run (other work, kernel). */
  otherCpuSeconds?: number;
  /** Busy percent of the machine in the second before the run (see waitForQuiet). */
  busyBeforePercent: number;
  /** tierd only: seconds inside segment copies (its log), the rest is boot, hashing, discovery. */
  copySeconds?: number;
}

type Runner = (set: SegmentSet, prefix: string) => Promise<TimedRun & { copySeconds?: number }>;

/**
 * Runs the upload benchmark and records `upload_ratio_vs_rclone` and `upload_ratio_vs_awscli`.
 * @returns the headline ratio vs rclone
 */
export async function runUploadBench(options: UploadBenchOptions = {}): Promise<number> {
  const rounds = options.rounds ?? 3;
  const store = await openBenchStore();
  try {
    progress("upload", `store: ${store.describe}`);
    const rclone = await rclonePeer(store);
    const aws = await awsPeer(store);
    progress("upload", `peers: ${rclone.version}; ${aws.version}`);

    const runners: Record<string, Runner> = {
      rclone: rclone.run,
      awscli: aws.run,
    };
    const tierdSettings: Record<string, Record<string, string>> = {};
    for (const [name, settings] of Object.entries(TIERD_VARIANTS)) {
      runners[name] = async (set, prefix) => {
        const run = await runTierd(set, store, prefix, settings, SAMPLE_MS);
        tierdSettings[name] = run.effective;
        return { ...run, copySeconds: run.segmentSeconds.reduce((a, b) => a + b, 0) };
      };
    }
    const tools = Object.keys(runners);

    const byLayout: Record<string, Record<string, Sample[]>> = {};
    for (const layout of LAYOUTS) {
      const set = await ensureSegments(layout);
      const samples: Record<string, Sample[]> = Object.fromEntries(tools.map((t) => [t, []]));
      byLayout[layout.name] = samples;
      progress(
        "upload",
        `${layout.name}: ${set.sealed.length} sealed segments, ${(set.bytes / 1e6).toFixed(0)} MB`,
      );
      for (let r = 0; r < rounds; r++) {
        for (let j = 0; j < tools.length; j++) {
          const tool = tools[(r + j) % tools.length]; // rotate: no tool always goes first
          const prefix = `bench-upload/${Date.now().toString(36)}-${tool.replace(/\W+/g, "-")}`;
          await warmPageCache(set);
          await syncDisks();
          const busyBefore = await waitForQuiet(10_000);
          const serverCpu = () =>
            store.serverPid ? readCpu(store.serverPid) : Promise.resolve(undefined);
          const [before, serverBefore] = [await machineCpu(), await serverCpu()];
          const run = await runners[tool](set, prefix);
          const [after, serverAfter] = [await machineCpu(), await serverCpu()];
          if (run.code !== 0) {
            throw new Error(`${tool} exited ${run.code}: ${run.stderr.slice(-2000)}`);
          }
          if (!tool.startsWith("tierd")) await checkCopied(set, store, prefix, tool);
          await emptyPrefix(store.client, prefix + "/");
          const busy = after.busy - before.busy;
          const sample: Sample = {
            seconds: round(run.seconds),
            mbps: round(set.bytes / 1e6 / run.seconds, 1),
            machineCpuPercent: round(100 * busy / Math.max(0.01, after.total - before.total), 0),
            busyBeforePercent: round(busyBefore, 0),
          };
          const toolCpu = run.cpuSeconds ? run.cpuSeconds.user + run.cpuSeconds.system : 0;
          if (run.cpuSeconds) sample.toolCpuSeconds = round(toolCpu, 2);
          if (serverBefore && serverAfter) {
            const server = serverAfter.user + serverAfter.system - serverBefore.user -
              serverBefore.system;
            sample.serverCpuSeconds = round(server, 2);
            sample.otherCpuSeconds = round(Math.max(0, busy - server - toolCpu), 2);
          }
          if (run.copySeconds !== undefined) sample.copySeconds = round(run.copySeconds, 2);
          samples[tool].push(sample);
          progress(
            "upload",
            `${layout.name} round ${r + 1}/${rounds} ${tool}: ${sample.seconds.toFixed(2)} s, ` +
              `${sample.mbps} MB/s; CPU s: tool ${sample.toolCpuSeconds ?? "?"}, MinIO ` +
              `${sample.serverCpuSeconds ?? "?"}, other ${sample.otherCpuSeconds ?? "?"} ` +
              `(machine ${sample.machineCpuPercent}% busy; ${sample.busyBeforePercent}% before)` +
              (sample.copySeconds !== undefined
                ? `; in segment copies ${sample.copySeconds} s`
                : ""),
          );
        }
      }
    }

    const summary = Object.fromEntries(
      Object.entries(byLayout).map(([layout, samples]) => [
        layout,
        Object.fromEntries(
          Object.entries(samples).map(([tool, s]) => [tool, {
            median_mb_per_s: round(median(s.map((x) => x.mbps)), 1),
            median_seconds: round(median(s.map((x) => x.seconds)), 2),
            median_tool_cpu_seconds: round(median(s.map((x) => x.toolCpuSeconds ?? NaN)), 2),
            median_server_cpu_seconds: round(median(s.map((x) => x.serverCpuSeconds ?? NaN)), 2),
            median_other_cpu_seconds: round(median(s.map((x) => x.otherCpuSeconds ?? NaN)), 2),
            runs: s,
          }]),
        ),
      ]),
    );
    const headlineLayout = LAYOUTS[0].name;
    const med = (layout: string, tool: string) => summary[layout][tool].median_mb_per_s;
    const variants = Object.keys(TIERD_VARIANTS);
    const best = variants.reduce((a, b) => med(headlineLayout, b) > med(headlineLayout, a) ? b : a);
    const ratios = Object.fromEntries(
      Object.keys(summary).map((layout) => [
        layout,
        Object.fromEntries(variants.map((v) => [v, {
          vs_rclone: round(med(layout, v) / med(layout, "rclone"), 3),
          vs_awscli: round(med(layout, v) / med(layout, "awscli"), 3),
        }])),
      ]),
    );
    const vsRclone = med(headlineLayout, best) / med(headlineLayout, "rclone");
    const vsAws = med(headlineLayout, best) / med(headlineLayout, "awscli");
    const bytes = (await ensureSegments(LAYOUTS[0])).bytes;
    progress(
      "upload",
      `${headlineLayout}: best tierd "${best}" ${med(headlineLayout, best)} MB/s; rclone ` +
        `${med(headlineLayout, "rclone")} MB/s; awscli ${med(headlineLayout, "awscli")} MB/s → ` +
        `÷ rclone ${vsRclone.toFixed(2)}, ÷ awscli ${vsAws.toFixed(2)}`,
    );

    const stat = (tool: string, field: "median_tool_cpu_seconds" | "median_other_cpu_seconds") =>
      summary[headlineLayout][tool][field];
    const cpuNote = (peer: string) =>
      `Median CPU seconds per run: tierd ${stat(best, "median_tool_cpu_seconds")}, ${peer} ` +
      `${stat(peer, "median_tool_cpu_seconds")}; other processes on the machine used a median ` +
      `${stat(best, "median_other_cpu_seconds")} / ${
        stat(peer, "median_other_cpu_seconds")
      } CPU s during those runs.`;
    const method =
      `Each tool copies the same sealed Iggy 0.9 segments (.log and .index; ${rounds} runs ` +
      `per tool and layout, order rotated each round) from the same warm page cache (every file ` +
      `read once and \`sync\` run before each run) to ${store.describe}; a run is timed from ` +
      `process start to exit and checked by listing the prefix (every .log and .index, exact ` +
      `sizes); objects are deleted between runs. MB/s = .log+.index bytes ÷ 10^6 ÷ wall seconds; ` +
      `the value is median(tierd, the fastest of the configurations tried) ÷ median(peer) on ` +
      `the headline layout ${headlineLayout} (one partition, ${
        (bytes / 1e6).toFixed(0)
      } MB in 4 segments of 256 MiB; tierd copies one segment of a partition at a time, oldest ` +
      `first). The layout 4p-1x256MiB (four partitions, one 256 MiB segment each) is reported in ` +
      `the details. tierd is the Bun-compiled binary running \`tierd run --once\` with a fresh ` +
      `state directory and key prefix: store probe, discovery, an XXH3-128 pass over each .log, ` +
      `the upload (multipart above part_size), the .index PUT, HEAD verification and journal ` +
      `fsyncs all count. The machine's CPUs are shared by MinIO and the uploader.`;
    const peers = {
      rclone: {
        version: rclone.version,
        command: "rclone copy SRC bench:BUCKET/PREFIX",
        ...rclone.settings,
      },
      awscli: {
        version: aws.version,
        command: "aws s3 cp --recursive SRC s3://BUCKET/PREFIX/",
        ...aws.settings,
      },
      store: store.describe,
    };
    const settings = Object.fromEntries(
      variants.map((v) => [v, tierdSettings[v] ?? TIERD_VARIANTS[v]]),
    );
    const shared = {
      method,
      settings,
      headline_layout: headlineLayout,
      headline_tierd_config: best,
      ratios,
      layouts: summary,
    };
    recordResult("upload_ratio_vs_rclone", round(vsRclone, 3), "≥ 1.0 (stretch 1.3)", {
      ...shared,
      peers: { rclone: peers.rclone, store: peers.store },
      notes: `${best}: ${med(headlineLayout, best)} MB/s vs rclone ` +
        `${med(headlineLayout, "rclone")} MB/s (${headlineLayout}); tierd defaults ` +
        `${med(headlineLayout, "tierd defaults")} MB/s. ${cpuNote("rclone")}`,
    });
    recordResult("upload_ratio_vs_awscli", round(vsAws, 3), "≥ 1.0", {
      ...shared,
      peers: { awscli: peers.awscli, store: peers.store },
      notes: `${best}: ${med(headlineLayout, best)} MB/s vs aws s3 cp ` +
        `${med(headlineLayout, "awscli")} MB/s (${headlineLayout}). ${cpuNote("awscli")}`,
    });
    return vsRclone;
  } finally {
    await store.stop();
  }
}
