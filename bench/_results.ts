// The benchmark record: `bench/results/latest.json` (every figure with its target, whether it was
// met, how it was measured, on which machine and when) and `bench/RESULTS.md`, regenerated from
// the JSON. Benchmarks call `recordResult` and `writeResults`; keys written by other benchmarks
// are kept, so each figure stays as its own last run left it.
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { MiB, smokeSegmentSize } from "./_stats.ts";

/** The `bench/` directory. */
export const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
/** `bench/results/latest.json`. */
export const RESULTS_JSON = join(BENCH_DIR, "results", "latest.json");
/** `bench/RESULTS.md`. */
export const RESULTS_MD = join(BENCH_DIR, "RESULTS.md");

/** Where a figure was measured. */
export interface MachineInfo {
  cpu: string;
  cores: number;
  memory_gib: number;
  os: string;
  kernel: string;
  deno: string;
  /** The tierd commit measured, `+dirty` when the work tree had changes. */
  commit: string;
}

/** Free-form details of one figure; `method`, `peers`, `settings` and `notes` are rendered. */
export interface ResultDetails {
  /** How the figure was measured, one paragraph. */
  method?: string;
  /** Each peer with its version and settings. */
  peers?: Record<string, unknown>;
  /** tierd's own settings. */
  settings?: Record<string, unknown>;
  /** Anything a reader should know (bottlenecks, caveats). */
  notes?: string;
  /** Why the figure was not measured (its value is then null). */
  not_measured?: string;
  /** Set when the run used smoke sizes (`TIERD_BENCH_SEGMENT_MIB`): not a real figure. */
  smoke?: string;
  [key: string]: unknown;
}

/** One figure in `latest.json`. */
export interface BenchResult {
  /** The figure; null when it could not be measured (`details.not_measured` says why). */
  value: number | null;
  /**
   * e.g. `"≥ 1.0 (stretch 2.0)"` or `"≤ 256"`; the first comparison decides `met`. {@link NO_GOAL}
   * for a figure recorded to be read, not judged.
   */
  target: string;
  /** Whether the target is met; null for a figure without a goal ({@link NO_GOAL}). */
  met: boolean | null;
  details: ResultDetails;
  /** ISO time of the run that measured it. */
  date: string;
  machine: MachineInfo;
}

/** The whole file. `machine` and `date` are those of the last write. */
export interface ResultsFile {
  machine: MachineInfo;
  date: string;
  results: Record<string, BenchResult>;
}

/** The target of a figure that has no goal: it is recorded and rendered, never met or missed. */
export const NO_GOAL = "none (no goal set)";

const pending = new Map<string, Omit<BenchResult, "machine">>();
let machineInfo: Promise<MachineInfo> | undefined;

/**
 * Whether `value` meets `target`: the first `≥ X` / `>= X` / `≤ X` / `<= X` in it; null when the
 * target is {@link NO_GOAL}.
 * @throws {Error} when the target names no comparison
 */
export function meetsTarget(value: number, target: string): boolean | null {
  if (target === NO_GOAL) return null;
  const m = /(≥|>=|≤|<=)\s*(-?[\d.]+)/.exec(target);
  if (!m) throw new Error(`target ${JSON.stringify(target)} has no ≥ or ≤ comparison`);
  const bound = Number(m[2]);
  return m[1] === "≥" || m[1] === ">=" ? value >= bound : value <= bound;
}

/**
 * Records one figure for the next {@link writeResults}.
 * @param key the `latest.json` key, e.g. `sign_ratio_vs_aws4fetch`
 * @param target e.g. `"≥ 1.0 (stretch 2.0)"`, or {@link NO_GOAL}
 */
export function recordResult(
  key: string,
  value: number,
  target: string,
  details: ResultDetails = {},
): void {
  pending.set(key, {
    value,
    target,
    met: meetsTarget(value, target),
    details: smokeMarked(details),
    date: new Date().toISOString(),
  });
}

/**
 * Records that a figure could not be measured in this run (a peer program is missing, say):
 * its value is null, it does not meet its target, and `reason` is shown instead.
 * @param target the figure's target, as {@link recordResult} would have it
 */
export function recordNotMeasured(
  key: string,
  target: string,
  reason: string,
  details: ResultDetails = {},
): void {
  meetsTarget(0, target); // the same check of the target as a measured figure gets
  const notes = `not measured: ${reason}` + (details.notes ? `. ${details.notes}` : "");
  pending.set(key, {
    value: null,
    target,
    met: target === NO_GOAL ? null : false,
    details: smokeMarked({ ...details, not_measured: reason, notes }),
    date: new Date().toISOString(),
  });
}

/** Marks the details of a smoke run (small sizes), so its figures are not taken as real ones. */
function smokeMarked(details: ResultDetails): ResultDetails {
  const size = smokeSegmentSize();
  if (size === undefined) return details;
  const smoke = `TIERD_BENCH_SEGMENT_MIB=${size / MiB}: smoke sizes, not a real figure`;
  return { ...details, smoke, notes: `SMOKE (${smoke}). ${details.notes ?? ""}`.trim() };
}

/** Describes this machine (once per process). */
export function describeMachine(): Promise<MachineInfo> {
  return machineInfo ??= (async () => {
    let cpu = "unknown";
    try {
      const text = await Deno.readTextFile("/proc/cpuinfo");
      cpu = /^model name\s*:\s*(.+)$/m.exec(text)?.[1]?.trim() ?? cpu;
    } catch {
      // not Linux
    }
    const memory = Deno.systemMemoryInfo().total / 2 ** 30;
    return {
      cpu,
      cores: navigator.hardwareConcurrency,
      memory_gib: Math.round(memory * 10) / 10,
      os: `${Deno.build.os} ${Deno.build.arch}`,
      kernel: Deno.osRelease(),
      deno: Deno.version.deno,
      commit: await gitCommit(),
    };
  })();
}

async function gitCommit(): Promise<string> {
  const git = async (...args: string[]) => {
    const out = await new Deno.Command("git", { args, cwd: BENCH_DIR, stderr: "null" }).output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : undefined;
  };
  try {
    const head = await git("rev-parse", "--short=12", "HEAD");
    if (!head) return "unknown";
    const dirty = await git("status", "--porcelain", "--untracked-files=no");
    return dirty ? `${head}+dirty` : head;
  } catch {
    return "unknown";
  }
}

/** Reads `latest.json`; an absent or unreadable file is an empty record. */
export async function readResults(): Promise<ResultsFile | undefined> {
  try {
    return JSON.parse(await Deno.readTextFile(RESULTS_JSON)) as ResultsFile;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw new Error(`${RESULTS_JSON} is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * Merges the recorded figures into `latest.json` (keeping other keys) and regenerates
 * `RESULTS.md`.
 * @returns the merged file
 */
export async function writeResults(): Promise<ResultsFile> {
  const machine = await describeMachine();
  const previous = await readResults();
  const results: Record<string, BenchResult> = { ...previous?.results };
  for (const [key, result] of pending) results[key] = { ...result, machine };
  pending.clear();
  const file: ResultsFile = { machine, date: new Date().toISOString(), results };
  await Deno.mkdir(dirname(RESULTS_JSON), { recursive: true });
  await Deno.writeTextFile(RESULTS_JSON, JSON.stringify(file, null, 2) + "\n");
  await Deno.writeTextFile(RESULTS_MD, renderMarkdown(file));
  await formatMarkdown(RESULTS_MD);
  return file;
}

/** Runs `deno fmt` on the generated page so the repo's fmt check stays clean. */
async function formatMarkdown(path: string): Promise<void> {
  try {
    await new Deno.Command(Deno.execPath(), {
      args: ["fmt", "--quiet", path],
      stdout: "null",
      stderr: "null",
    }).output();
  } catch {
    // Formatting is cosmetic; the content is already written.
  }
}

/** The headline figures first, in this order; others follow alphabetically. */
const ORDER = [
  "sign_ratio_vs_aws4fetch",
  "upload_ratio_vs_rclone",
  "upload_ratio_vs_awscli",
  "upload_ratio_vs_curl_put",
  "upload_peak_rss_mib",
  "cold_ttfb_ratio_vs_direct_get",
  "warm_ratio_vs_local",
  "readahead_scan_ratio",
  "cold_scan_ratio_vs_direct_get",
  "cold_scan_ratio_vs_direct_get_16x",
  "cold_scan_cpu_seconds_per_gib",
  "read_peak_rss_mib_24x64mib",
  "iggy_json_poll_peak_rss_mib_24",
  "boot_seconds_100k_segments",
  "boot_seconds_100k_segments_after_crash",
  "rss_bytes_per_segment",
];

function orderedKeys(results: Record<string, BenchResult>): string[] {
  const rank = (k: string) => {
    const i = ORDER.indexOf(k);
    return i < 0 ? ORDER.length : i;
  };
  return Object.keys(results).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

function formatValue(value: number | null): string {
  if (value === null) return "not measured";
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  return abs >= 100 ? value.toFixed(0) : abs >= 10 ? value.toFixed(1) : value.toFixed(2);
}

function cell(text: string): string {
  return text.replace(/\|/g, "\\|").replace(/\s*\n\s*/g, " ");
}

function describe(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (value && typeof value === "object") {
    return Object.entries(value).map(([k, v]) => `${k}: ${describe(v)}`).join("; ");
  }
  return String(value);
}

function machineLine(m: MachineInfo): string {
  return `${m.cpu}, ${m.cores} cores, ${m.memory_gib} GiB RAM, ${m.os} (kernel ${m.kernel}), ` +
    `Deno ${m.deno}, tierd ${m.commit}`;
}

function metCell(r: BenchResult): string {
  if (r.value === null) return "not measured";
  if (r.met === null) return "n/a";
  return r.met ? "yes" : "**no**";
}

/** The `RESULTS.md` page for a results file: a table of every figure, then each one's method. */
export function renderMarkdown(file: ResultsFile): string {
  const keys = orderedKeys(file.results);
  const lines: string[] = [
    "# Benchmark results",
    "",
    "Generated from `bench/results/latest.json` by `deno task bench`; do not edit by hand. Ratios compare",
    "tierd with a peer measured in the same run on the same machine.",
    "",
    `Last written ${file.date} on: ${machineLine(file.machine)}.`,
    "",
    "| figure | value | target | met | measured | notes |",
    "| --- | --- | --- | --- | --- | --- |",
  ];
  for (const key of keys) {
    const r = file.results[key];
    const note = r.details.notes ?? "";
    lines.push(
      `| \`${key}\` | ${formatValue(r.value)} | ${cell(r.target)} | ${metCell(r)} | ` +
        `${r.date.slice(0, 10)} | ${cell(note)} |`,
    );
  }
  for (const key of keys) {
    const r = file.results[key];
    const d = r.details;
    lines.push("", `## \`${key}\``, "");
    lines.push(
      r.value === null
        ? `Not measured (${d.not_measured ?? "no reason given"}); target ${r.target}.`
        : r.met === null
        ? `Value ${formatValue(r.value)}; no goal is set for this figure.`
        : `Value ${formatValue(r.value)}, target ${r.target}: ${r.met ? "met" : "not met"}.`,
    );
    lines.push(`${r.value === null ? "Run" : "Measured"} ${r.date} on ${machineLine(r.machine)}.`);
    if (d.method) lines.push("", `Method: ${d.method}`);
    if (d.settings) {
      lines.push("", "tierd settings:", "");
      for (const [name, v] of Object.entries(d.settings)) lines.push(`- ${name}: ${describe(v)}`);
    }
    if (d.peers) {
      lines.push("", "Peers:", "");
      for (const [name, v] of Object.entries(d.peers)) lines.push(`- ${name}: ${describe(v)}`);
    }
    if (d.notes) lines.push("", `Notes: ${d.notes}`);
  }
  return lines.join("\n") + "\n";
}
