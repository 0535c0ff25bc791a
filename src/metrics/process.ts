// The standard `process_*` metrics every Prometheus client library exports (CPU seconds,
// resident and virtual memory, open and maximum file descriptors, start time), read from
// `/proc/self` on Linux at each scrape, as client_golang's process collector does. Where there
// is no `/proc/self/stat` (macOS, a locked-down sandbox) they are not registered at all rather
// than shown as 0.
import { readdirSync, readFileSync } from "node:fs";
import process from "node:process";
import type { Registry } from "./registry.ts";

/** The kernel's USER_HZ: `/proc` reports CPU times in 1/100 s on every Linux architecture. */
const USER_HZ = 100;
/** Bytes per page for `/proc/self/stat`'s RSS; 4 KiB on x86-64 and arm64 Linux. */
const PAGE_SIZE = 4096;

/** One reading of the process' figures; undefined fields could not be read. */
export interface ProcessSample {
  cpuSeconds?: number;
  residentBytes?: number;
  virtualBytes?: number;
  openFds?: number;
  maxFds?: number;
  /** Seconds since the Unix epoch. */
  startTimeSeconds?: number;
}

/** Where the figures are read from (tests point it at a fake `/proc`). */
export interface ProcSource {
  /** A file's text, or undefined when it cannot be read. */
  read(path: string): string | undefined;
  /** How many entries a directory has, or undefined when it cannot be listed. */
  count(path: string): number | undefined;
}

/** `/proc` of this machine. */
export const procfs: ProcSource = {
  read(path) {
    try {
      return readFileSync(path, "utf8");
    } catch {
      return undefined;
    }
  },
  count(path) {
    try {
      return readdirSync(path).length;
    } catch {
      return undefined;
    }
  },
};

/**
 * Reads the process' figures from `/proc/self/stat`, `/proc/self/fd`, `/proc/self/limits` and
 * `/proc/stat` (boot time, for the start time).
 *
 * @param proc where to read @default procfs
 */
export function sampleProcess(proc: ProcSource = procfs): ProcessSample {
  const out: ProcessSample = {};
  const stat = proc.read("/proc/self/stat");
  if (stat !== undefined) {
    // The command name (field 2) is in parentheses and may hold spaces: fields after it count
    // from the last ')'. Field 3 (state) is then index 0.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).trim().split(/\s+/);
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    const startTicks = Number(fields[19]);
    const vsize = Number(fields[20]);
    const rssPages = Number(fields[21]);
    if (Number.isFinite(utime) && Number.isFinite(stime)) {
      out.cpuSeconds = (utime + stime) / USER_HZ;
    }
    if (Number.isFinite(vsize)) out.virtualBytes = vsize;
    if (Number.isFinite(rssPages)) out.residentBytes = rssPages * PAGE_SIZE;
    const boot = /^btime\s+(\d+)$/m.exec(proc.read("/proc/stat") ?? "");
    if (boot && Number.isFinite(startTicks)) {
      out.startTimeSeconds = Number(boot[1]) + startTicks / USER_HZ;
    }
  }
  const fds = proc.count("/proc/self/fd");
  if (fds !== undefined) out.openFds = fds;
  const limit = /^Max open files\s+(\d+|unlimited)\s/m.exec(proc.read("/proc/self/limits") ?? "");
  if (limit && limit[1] !== "unlimited") out.maxFds = Number(limit[1]);
  return out;
}

/**
 * Registers `process_cpu_seconds_total`, `process_resident_memory_bytes`,
 * `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds` and
 * `process_start_time_seconds` in `registry`, refreshed at every render; nothing when
 * `/proc/self/stat` cannot be read.
 *
 * @param proc where to read @default procfs
 * @returns whether the metrics were registered
 * @throws {RangeError} when `registry` already holds one of the names
 */
export function registerProcessMetrics(registry: Registry, proc: ProcSource = procfs): boolean {
  if (proc.read("/proc/self/stat") === undefined) return false;
  const cpu = registry.counter(
    "process_cpu_seconds_total",
    "Total user and system CPU time spent in seconds.",
  );
  const rss = registry.gauge("process_resident_memory_bytes", "Resident memory size in bytes.");
  const vsize = registry.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.");
  const open = registry.gauge("process_open_fds", "Number of open file descriptors.");
  const max = registry.gauge("process_max_fds", "Maximum number of open file descriptors.");
  const start = registry.gauge(
    "process_start_time_seconds",
    "Start time of the process since unix epoch in seconds.",
  );
  let cpuSeen = 0;
  registry.onCollect(() => {
    const s = sampleProcess(proc);
    const set = (g: typeof rss, v: number | undefined) => {
      g.reset();
      if (v !== undefined) g.set(undefined, v);
    };
    set(rss, s.residentBytes);
    set(vsize, s.virtualBytes);
    set(open, s.openFds);
    set(max, s.maxFds);
    set(start, s.startTimeSeconds);
    cpu.reset();
    if (s.cpuSeconds !== undefined) {
      // Never backwards, even if a reading were lower than the one before.
      cpuSeen = Math.max(cpuSeen, s.cpuSeconds);
      cpu.inc(undefined, cpuSeen);
    }
  });
  return true;
}

/** What the runtime says of its JavaScript heap (`process.memoryUsage()`). */
export interface HeapUsage {
  /** Bytes held by live objects and garbage not yet collected. */
  heapUsed: number;
  /** Bytes the runtime has reserved for the heap. */
  heapTotal: number;
}

/**
 * Registers `tierd_heap_used_bytes` and `tierd_heap_total_bytes`, read at every render: what
 * the JavaScript heap holds and what the runtime reserved for it. The resident size grows with
 * the reservation, which a runtime enlarges in steps under a high allocation rate and gives back
 * late; a heap whose used bytes keep rising after collections is what a leak looks like.
 *
 * @param usage where to read @default process.memoryUsage
 */
export function registerHeapMetrics(
  registry: Registry,
  usage: () => HeapUsage = () => process.memoryUsage(),
): void {
  const used = registry.gauge(
    "tierd_heap_used_bytes",
    "JavaScript heap bytes in use (live objects and uncollected garbage).",
  );
  const total = registry.gauge(
    "tierd_heap_total_bytes",
    "JavaScript heap bytes the runtime has reserved.",
  );
  registry.onCollect(() => {
    const u = usage();
    used.reset();
    used.set(undefined, u.heapUsed);
    total.reset();
    total.set(undefined, u.heapTotal);
  });
}
