// `upload_ratio_vs_rclone`, `upload_ratio_vs_awscli` and `upload_ratio_vs_curl_put`: MB/s copying
// the same sealed segments to the same store, each tool timed end to end (process start to exit):
// the compiled tierd binary (`run --once`, fresh state and prefix) ÷ `rclone copy` ÷
// `aws s3 cp --recursive` ÷ plain `curl --aws-sigv4 -T` PUTs of the files one after another (the
// machine's own sequential upload rate to that store). A peer program that is not installed
// leaves its figure "not measured", with the reason; the others are still measured.
import { basename, join } from "node:path";
import { recordNotMeasured, recordResult } from "./_results.ts";
import { ensureSegments, type SegmentSet, warmPageCache, WORK_DIR } from "./_segments.ts";
import {
  exitedChildrenCpu,
  machineCpu,
  readCpu,
  runTimed,
  type TimedRun,
  versionOf,
  waitForQuiet,
} from "./_proc.ts";
import { benchSegmentSize, median, MiB, progress, round } from "./_stats.ts";
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

/** How often tool processes are sampled (CPU seconds). */
const SAMPLE_MS = 100;

/** Segment size of the layouts (256 MiB; TIERD_BENCH_SEGMENT_MIB in a smoke run). */
const SEGMENT = benchSegmentSize(256 * MiB);
/** Segment layouts; the first is the headline. */
const LAYOUTS = [
  { name: `1p-4x${SEGMENT / MiB}MiB`, partitions: 1, sealedPerPartition: 4, segmentSize: SEGMENT },
  { name: `4p-1x${SEGMENT / MiB}MiB`, partitions: 4, sealedPerPartition: 1, segmentSize: SEGMENT },
];

interface Peer {
  name: string;
  version: string;
  settings: Record<string, string>;
  run(set: SegmentSet, prefix: string): Promise<TimedRun>;
}

/** A peer program that is not there: its figure is recorded as not measured, saying why. */
interface MissingPeer {
  name: string;
  missing: string;
}

function isMissing(p: Peer | MissingPeer): p is MissingPeer {
  return "missing" in p;
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
async function rclonePeer(store: BenchStore): Promise<Peer | MissingPeer> {
  const bin = Deno.env.get("TIERD_BENCH_RCLONE") || await onPath("rclone");
  if (!bin) {
    return {
      name: "rclone",
      missing: "rclone not found on PATH (apt-get install rclone, or TIERD_BENCH_RCLONE)",
    };
  }
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
async function awsPeer(store: BenchStore): Promise<Peer | MissingPeer> {
  const debian = "/usr/bin/aws";
  const bin = Deno.env.get("TIERD_BENCH_AWS") ||
    (await Deno.stat(debian).then(() => debian, () => undefined)) || await onPath("aws");
  if (!bin) {
    return {
      name: "awscli",
      missing: "aws not found on PATH (apt-get install awscli, or TIERD_BENCH_AWS)",
    };
  }
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

/**
 * curl signing its own requests (`--aws-sigv4`, curl 7.75 or later): one plain PUT per sealed
 * file, one process after another — no multipart, no parallelism, no checksum — so its rate is
 * what one stream of this machine puts into this store.
 */
async function curlPeer(store: BenchStore): Promise<Peer | MissingPeer> {
  const bin = Deno.env.get("TIERD_BENCH_CURL") || await onPath("curl");
  if (!bin) {
    return {
      name: "curl",
      missing: "curl not found on PATH (apt-get install curl, or TIERD_BENCH_CURL)",
    };
  }
  const version = await versionOf(bin, ["--version"]) ?? "unknown";
  const help = await runTimed(bin, ["--help", "all"]);
  if (!help.stdout.includes("--aws-sigv4")) {
    return { name: "curl", missing: `${version} has no --aws-sigv4 (curl 7.75 or later has)` };
  }
  const sigv4 = `aws:amz:${store.region}:s3`;
  // curl before 8.x signs an upload without x-amz-content-sha256, which S3 itself refuses
  // (MinIO accepts it); naming UNSIGNED-PAYLOAD, as later curl does for s3, works with both.
  const payload = "x-amz-content-sha256: UNSIGNED-PAYLOAD";
  const settings = {
    command: `curl -sS --fail-with-body -o /dev/null --aws-sigv4 "${sigv4}" --user KEY:SECRET ` +
      `-H "${payload}" -T FILE ENDPOINT/BUCKET/PREFIX/PARTITION/FILE`,
    requests: "one curl process (one connection, one PUT) per sealed .log and .index, in turn",
    "x-amz-content-sha256": "UNSIGNED-PAYLOAD (curl ≥ 8 sends it for s3 by itself)",
  };
  const base = store.endpoint.replace(/\/+$/, "");
  return {
    name: "curl",
    version,
    settings,
    run: async (set, prefix) => {
      const started = performance.now();
      // Each curl lives a fraction of a second, too short to sample: its CPU is counted as it
      // exits instead (this process runs no other child meanwhile).
      const cpuBefore = await exitedChildrenCpu();
      const cpuSoFar = async () => {
        const now = await exitedChildrenCpu();
        return { user: now.user - cpuBefore.user, system: now.system - cpuBefore.system };
      };
      let last: TimedRun | undefined;
      for (const s of set.sealed) {
        for (const path of [s.logPath, s.indexPath]) {
          const url = `${base}/${store.bucket}/${prefix}/${s.partition}/${basename(path)}`;
          last = await runTimed(bin, [
            "-sS",
            "--fail-with-body",
            "-o",
            "/dev/null",
            "--aws-sigv4",
            sigv4,
            "--user",
            `${store.accessKey}:${store.secretKey}`,
            "-H",
            payload,
            "-T",
            path,
            url,
          ]);
          if (last.code !== 0) {
            return { ...last, stderr: `PUT ${url}: ${last.stderr}`, cpuSeconds: await cpuSoFar() };
          }
        }
      }
      const seconds = (performance.now() - started) / 1000;
      return {
        code: 0,
        seconds,
        stdout: "",
        stderr: last?.stderr ?? "",
        cpuSeconds: await cpuSoFar(),
      };
    },
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

/** A figure of this benchmark: tierd (one of its configurations) ÷ one peer. */
interface Figure {
  key: string;
  peer: string;
  target: string;
  /** The tierd configuration compared: `"best"` = the fastest one on the headline layout. */
  tierd: "best" | keyof typeof TIERD_VARIANTS;
  /** How the peer was run, for the details. */
  command: string;
  /** The peer in the notes. */
  label: string;
}

const FIGURES: Figure[] = [
  {
    key: "upload_ratio_vs_rclone",
    peer: "rclone",
    target: "≥ 1.0 (stretch 1.3)",
    tierd: "best",
    command: "rclone copy SRC bench:BUCKET/PREFIX",
    label: "rclone",
  },
  {
    key: "upload_ratio_vs_awscli",
    peer: "awscli",
    target: "≥ 1.0",
    tierd: "best",
    command: "aws s3 cp --recursive SRC s3://BUCKET/PREFIX/",
    label: "aws s3 cp",
  },
  {
    key: "upload_ratio_vs_curl_put",
    peer: "curl",
    target: "≥ 0.8",
    tierd: "tierd defaults",
    command: "curl --aws-sigv4 -T FILE URL, one file after another",
    label: "sequential curl PUTs",
  },
];

/**
 * Runs the upload benchmark and records `upload_ratio_vs_rclone`, `upload_ratio_vs_awscli` and
 * `upload_ratio_vs_curl_put` (each "not measured" when its peer program is missing).
 * @returns the headline ratio vs rclone (NaN when rclone is missing)
 */
export async function runUploadBench(options: UploadBenchOptions = {}): Promise<number> {
  const rounds = options.rounds ?? 3;
  const store = await openBenchStore();
  try {
    progress("upload", `store: ${store.describe}`);
    const all = [await rclonePeer(store), await awsPeer(store), await curlPeer(store)];
    const peers = new Map<string, Peer>();
    const missing = new Map<string, string>();
    for (const p of all) {
      if (isMissing(p)) missing.set(p.name, p.missing);
      else peers.set(p.name, p);
    }
    progress(
      "upload",
      `peers: ${[...peers.values()].map((p) => p.version).join("; ")}` +
        [...missing.values()].map((why) => `; NOT MEASURED: ${why}`).join(""),
    );

    const runners: Record<string, Runner> = {};
    for (const [name, peer] of peers) runners[name] = peer.run;
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
    const tierdOf = (f: Figure) => f.tierd === "best" ? best : f.tierd;
    const ratioOf = (f: Figure, layout = headlineLayout) =>
      med(layout, tierdOf(f)) / med(layout, f.peer);
    const ratios = Object.fromEntries(
      Object.keys(summary).map((layout) => [
        layout,
        Object.fromEntries(variants.map((v) => [
          v,
          Object.fromEntries(
            [...peers.keys()].map((peer) => [
              `vs_${peer}`,
              round(med(layout, v) / med(layout, peer), 3),
            ]),
          ),
        ])),
      ]),
    );
    const bytes = (await ensureSegments(LAYOUTS[0])).bytes;
    const mbps = (tool: string) => `${med(headlineLayout, tool)} MB/s`;
    progress(
      "upload",
      `${headlineLayout}: best tierd "${best}" ${mbps(best)}, tierd defaults ` +
        `${mbps("tierd defaults")}; ` +
        FIGURES.map((f) =>
          peers.has(f.peer)
            ? `${f.peer} ${mbps(f.peer)} (${tierdOf(f)} ÷ ${f.peer} ${ratioOf(f).toFixed(2)})`
            : `${f.peer} not measured`
        ).join("; "),
    );

    const stat = (tool: string, field: "median_tool_cpu_seconds" | "median_other_cpu_seconds") =>
      summary[headlineLayout][tool][field];
    const cpuNote = (tierd: string, peer: string) =>
      `Median CPU seconds per run: tierd ${stat(tierd, "median_tool_cpu_seconds")}, ${peer} ` +
      `${stat(peer, "median_tool_cpu_seconds")}; other processes on the machine used a median ` +
      `${stat(tierd, "median_other_cpu_seconds")} / ${
        stat(peer, "median_other_cpu_seconds")
      } CPU s during those runs.`;
    const compared = (f: Figure) =>
      f.tierd === "best"
        ? "median(tierd, the fastest of the configurations tried) ÷ median(peer)"
        : `median(tierd, configuration "${f.tierd}") ÷ median(peer)`;
    const method = (f: Figure) =>
      `Each tool copies the same sealed Iggy 0.9 segments (.log and .index; ${rounds} runs ` +
      `per tool and layout, order rotated each round) from the same warm page cache (every file ` +
      `read once and \`sync\` run before each run) to ${store.describe}; a run is timed from ` +
      `process start to exit and checked by listing the prefix (every .log and .index, exact ` +
      `sizes); objects are deleted between runs. MB/s = .log+.index bytes ÷ 10^6 ÷ wall seconds; ` +
      `the value is ${compared(f)} on the headline layout ${headlineLayout} (one partition, ${
        (bytes / 1e6).toFixed(0)
      } MB in 4 segments of ${SEGMENT / MiB} MiB; tierd copies one segment of a partition at a ` +
      `time, oldest first). The layout ${LAYOUTS[1].name} (four partitions, one ` +
      `${SEGMENT / MiB} MiB segment each) is reported in the details. tierd is the ` +
      `Bun-compiled binary running \`tierd run --once\` with a fresh ` +
      `state directory and key prefix: store probe, discovery, an XXH3-128 pass over each .log, ` +
      `the upload (multipart above part_size), the .index PUT, HEAD verification and journal ` +
      `fsyncs all count. curl, the machine's own limit, runs one \`curl --aws-sigv4\` process ` +
      `per sealed file (a single PUT each: no multipart, no parallelism, no checksum, no ` +
      `verification), one after another, timed from the first start to the last exit. The ` +
      `machine's CPUs are shared by MinIO and the uploader.`;
    const peerDetails = (name: string) => {
      const p = peers.get(name);
      const command = FIGURES.find((f) => f.peer === name)?.command;
      return p
        ? { version: p.version, command, ...p.settings }
        : { not_measured: missing.get(name) ?? "not run" };
    };
    const settings = Object.fromEntries(
      variants.map((v) => [v, tierdSettings[v] ?? TIERD_VARIANTS[v]]),
    );
    for (const f of FIGURES) {
      const tierd = tierdOf(f);
      const details = {
        method: method(f),
        settings,
        headline_layout: headlineLayout,
        headline_tierd_config: tierd,
        ratios,
        layouts: summary,
        peers: { [f.peer]: peerDetails(f.peer), store: store.describe },
      };
      const why = missing.get(f.peer);
      if (why) {
        recordNotMeasured(f.key, f.target, why, {
          ...details,
          notes: `${tierd}: ${mbps(tierd)} (${headlineLayout}); ${f.peer} was not run`,
        });
        continue;
      }
      const other = tierd === "tierd defaults"
        ? (best === tierd ? "" : `; fastest tierd configuration "${best}" ${mbps(best)}`)
        : `; tierd defaults ${mbps("tierd defaults")}`;
      recordResult(f.key, round(ratioOf(f), 3), f.target, {
        ...details,
        notes: `${tierd}: ${mbps(tierd)} vs ${f.label} ${mbps(f.peer)} (${headlineLayout})` +
          `${other}. ${cpuNote(tierd, f.peer)}`,
      });
    }
    const rclone = FIGURES[0];
    return peers.has(rclone.peer) ? ratioOf(rclone) : NaN;
  } finally {
    await store.stop();
  }
}
