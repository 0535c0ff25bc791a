// Runs a program end to end (process start to exit) with its wall time, output and peak RSS,
// builds the tierd binary the benchmarks measure, runs it as an agent until stopped, and finds
// the Bun that builds it.
import { join } from "node:path";
import { BENCH_DIR } from "./_results.ts";
import { progress } from "./_stats.ts";

/** How a run went. */
export interface TimedRun {
  code: number;
  /** Wall seconds from spawn to exit. */
  seconds: number;
  stdout: string;
  stderr: string;
  /** Peak resident set (VmHWM) in KiB, when sampled. */
  peakRssKiB?: number;
  /** VmRSS samples, KiB, one per interval, when sampled. */
  rssSamplesKiB?: number[];
  /** CPU seconds of the process (user, system) from /proc/<pid>/stat, last sample. */
  cpuSeconds?: { user: number; system: number };
}

/** Options of {@link runTimed}. */
export interface RunOptions {
  env?: Record<string, string>;
  /** Replace the environment instead of extending it. @default false */
  clearEnv?: boolean;
  cwd?: string;
  /** Sample /proc/<pid>/status every this many ms (0 = not at all). @default 0 */
  sampleMs?: number;
}

/**
 * A process's peak (VmHWM) and current (VmRSS) resident set in KiB, from /proc/<pid>/status;
 * undefined when it is gone.
 */
export async function readStatus(
  pid: number,
): Promise<{ hwm?: number; rss?: number } | undefined> {
  try {
    const text = await Deno.readTextFile(`/proc/${pid}/status`);
    const kib = (name: string) => {
      const m = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(text);
      return m ? Number(m[1]) : undefined;
    };
    return { hwm: kib("VmHWM"), rss: kib("VmRSS") };
  } catch {
    return undefined;
  }
}

const CLOCK_TICKS = 100; // USER_HZ on Linux

/**
 * CPU seconds (user, system) a process has used so far, and its minor page faults, from
 * /proc/<pid>/stat.
 */
export async function readCpu(
  pid: number,
): Promise<{ user: number; system: number; minorFaults: number } | undefined> {
  try {
    const text = await Deno.readTextFile(`/proc/${pid}/stat`);
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return {
      user: Number(fields[11]) / CLOCK_TICKS,
      system: Number(fields[12]) / CLOCK_TICKS,
      // Page faults served without I/O: for the agent, mostly first touches of new memory.
      minorFaults: Number(fields[7]),
    };
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds (user, system) used so far by this process's children that have exited and been
 * waited for (cutime and cstime of /proc/self/stat): exact, however short-lived they were.
 */
export async function exitedChildrenCpu(): Promise<{ user: number; system: number }> {
  const text = await Deno.readTextFile("/proc/self/stat");
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { user: Number(fields[13]) / CLOCK_TICKS, system: Number(fields[14]) / CLOCK_TICKS };
}

/** Runs `command` to completion, timing it from spawn to exit. */
export async function runTimed(
  command: string,
  args: string[],
  options: RunOptions = {},
): Promise<TimedRun> {
  const started = performance.now();
  const child = new Deno.Command(command, {
    args,
    env: options.env,
    clearEnv: options.clearEnv,
    cwd: options.cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  let peak: number | undefined;
  let samples: number[] | undefined;
  let cpu: { user: number; system: number } | undefined;
  let done = false;
  const sampling = (async () => {
    if (!options.sampleMs) return;
    samples = [];
    while (!done) {
      const status = await readStatus(child.pid);
      if (status?.hwm !== undefined) peak = Math.max(peak ?? 0, status.hwm);
      if (status?.rss !== undefined) {
        samples.push(status.rss);
        peak = Math.max(peak ?? 0, status.rss);
      }
      cpu = await readCpu(child.pid) ?? cpu;
      await new Promise((resolve) => setTimeout(resolve, options.sampleMs));
    }
  })();
  const out = await output;
  const seconds = (performance.now() - started) / 1000;
  done = true;
  await sampling;
  const decoder = new TextDecoder();
  return {
    code: out.code,
    seconds,
    stdout: decoder.decode(out.stdout),
    stderr: decoder.decode(out.stderr),
    peakRssKiB: peak,
    rssSamplesKiB: samples,
    cpuSeconds: cpu,
  };
}

/** Busy and total CPU seconds of the whole machine so far (all cores), from /proc/stat. */
export async function machineCpu(): Promise<{ busy: number; total: number }> {
  const line = (await Deno.readTextFile("/proc/stat")).split("\n")[0];
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = v[3] + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: (total - idle) / CLOCK_TICKS, total: total / CLOCK_TICKS };
}

/**
 * Waits (at most `maxWaitMs`) until the machine is quiet: other processes use less than
 * `busyPercent` of all cores over one second. Other work on a shared machine skews timings.
 * @returns the busy percent last seen
 */
export async function waitForQuiet(maxWaitMs = 60_000, busyPercent = 25): Promise<number> {
  const deadline = Date.now() + maxWaitMs;
  for (;;) {
    const a = await machineCpu();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const b = await machineCpu();
    const busy = 100 * (b.busy - a.busy) / Math.max(0.01, b.total - a.total);
    if (busy < busyPercent || Date.now() > deadline) return busy;
  }
}

/** The first line of `command args` output, or undefined when it cannot run. */
export async function versionOf(command: string, args: string[]): Promise<string | undefined> {
  try {
    const out = await new Deno.Command(command, { args, stdin: "null" }).output();
    const text = new TextDecoder().decode(out.stdout).trim() ||
      new TextDecoder().decode(out.stderr).trim();
    return out.success ? text.split("\n")[0] : undefined;
  } catch {
    return undefined;
  }
}

let built: Promise<string> | undefined;

/**
 * The tierd binary to measure: `TIERD_BENCH_BIN`, else a fresh `bun build --compile` of this
 * work tree into bench/.work/tierd (about two seconds), so the figures describe the code here.
 * @throws {Error} when the build fails
 */
export function tierdBinary(): Promise<string> {
  return built ??= (async () => {
    const given = Deno.env.get("TIERD_BENCH_BIN");
    if (given) return given;
    const out = join(BENCH_DIR, ".work", "tierd");
    await Deno.mkdir(join(BENCH_DIR, ".work"), { recursive: true });
    progress("build", `compiling ${out} with scripts/compile.ts (Bun)…`);
    const run = await runTimed(Deno.execPath(), ["run", "-A", "scripts/compile.ts", out], {
      cwd: join(BENCH_DIR, ".."),
    });
    if (run.code !== 0) {
      throw new Error(`scripts/compile.ts failed (exit ${run.code}): ${run.stderr.slice(-2000)}`);
    }
    return out;
  })();
}

let bun: Promise<string> | undefined;

/**
 * The Bun executable the shipped binary is built with (`npx -y bun@1`, as scripts/compile.ts
 * runs it), by its own path, so a program run with it is one process whose CPU can be read.
 * @throws {Error} when Bun cannot be run
 */
export function bunExecutable(): Promise<string> {
  return bun ??= (async () => {
    const run = await runTimed("npx", ["-y", "bun@1", "-e", "console.log(process.execPath)"]);
    const path = run.stdout.trim().split("\n").at(-1) ?? "";
    if (run.code !== 0 || !path) {
      throw new Error(`npx -y bun@1 failed (exit ${run.code}): ${run.stderr.slice(-2000)}`);
    }
    return path;
  })();
}

/** A compiled `tierd run` started by {@link startTierdRun}. */
export interface TierdRun {
  pid: number;
  /** The last 16 KB it logged. */
  logTail(): string;
  /** SIGTERM and wait (SIGKILL after 20 s). */
  stop(): Promise<void>;
}

/**
 * Starts the compiled tierd (`run --config`) and waits until `ready()` answers true, polling
 * every `o.pollMs` (100 ms by default).
 * @param o.name names it in errors
 * @param o.env its environment's additions (secrets)
 * @throws {Error} with its log when it exits first or is not ready within `o.timeoutMs`
 */
export async function startTierdRun(o: {
  config: string;
  name: string;
  env: Record<string, string>;
  ready: () => Promise<boolean>;
  timeoutMs: number;
  pollMs?: number;
}): Promise<TierdRun> {
  const child = new Deno.Command(await tierdBinary(), {
    args: ["run", "--config", o.config],
    env: o.env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let tail = "";
  const logging = (async () => {
    for await (const text of child.stderr.pipeThrough(new TextDecoderStream())) {
      tail = (tail + text).slice(-16_000);
    }
  })().catch(() => {});
  let exited: Deno.CommandStatus | undefined;
  child.status.then((s) => (exited = s));
  const deadline = Date.now() + o.timeoutMs;
  for (;;) {
    if (exited) {
      throw new Error(`tierd run (${o.name}) exited ${exited.code} before ready: ${tail}`);
    }
    if (await o.ready()) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`tierd run (${o.name}) not ready after ${o.timeoutMs / 1000} s: ${tail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, o.pollMs ?? 100));
  }
  return {
    pid: child.pid,
    logTail: () => tail,
    stop: async () => {
      if (!exited) {
        try {
          child.kill("SIGTERM");
        } catch { /* gone */ }
      }
      const timer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch { /* gone */ }
      }, 20_000);
      await child.status;
      clearTimeout(timer);
      await logging;
    },
  };
}
