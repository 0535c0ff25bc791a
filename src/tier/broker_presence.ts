// Is a broker running beside the data directory? `evict_via = "auto"` without `[agent.broker]`
// unlinks segment files itself, which is only safe while the broker is stopped (a running
// broker keeps its sealed segments open and in its own index). Two signs, either enough:
//
// - its HTTP API answers `GET /ping` with `pong` at the address of its own config — Iggy writes
//   the config it runs with to `{data_dir}/runtime/current_config.toml` — or, without that file,
//   at Iggy's default `127.0.0.1:3000`;
// - on Linux, another process holds a file under the data directory open (every link in
//   `/proc/*/fd`; Iggy keeps its segments, its log and its metadata open while it runs).
//   Processes this user may not inspect are skipped and counted.
//
// A scan costs one readlink per open file on the machine, so answers are kept briefly: a
// "running" one for 5 s (it only delays eviction), a "stopped" one for 1 s (it lets files go).
import { readdir, readFile, readlink, realpath } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { parse as parseToml } from "smol-toml";
import { type Clock, systemClock } from "../../providers/clock.ts";

/** Iggy's default HTTP address, when its runtime config is not found. */
export const IGGY_DEFAULT_HTTP = "127.0.0.1:3000";

/** What one check found. */
export interface BrokerSighting {
  running: boolean;
  /** What showed it running, or what was checked when it did not. */
  evidence: string;
}

/** Answers whether a broker is running beside the data directory (cached briefly). */
export interface BrokerWatch {
  check(): Promise<BrokerSighting>;
}

type Fetch = (input: string, init: RequestInit) => Promise<Response>;

/** Options of {@link BrokerPresence}. */
export interface BrokerPresenceOptions {
  /** The broker's data directory (`agent.data_dir`). */
  dataDir: string;
  /** @default systemClock */
  clock?: Clock;
  /** How long a "running" answer is kept, ms. @default 5000 */
  runningTtlMs?: number;
  /** How long a "stopped" answer is kept, ms. @default 1000 */
  stoppedTtlMs?: number;
  /** How long `/ping` may take, ms. @default 1000 */
  httpTimeoutMs?: number;
  /** @default fetch */
  fetch?: Fetch;
  /** Where the process table is; a missing one skips the scan. @default "/proc" */
  procRoot?: string;
  /** This process, never counted as the broker. @default process.pid */
  selfPid?: number;
}

/** Looks for a running broker through its HTTP API and the files it holds open. */
export class BrokerPresence implements BrokerWatch {
  readonly #o: Required<Omit<BrokerPresenceOptions, "clock" | "fetch">>;
  readonly #clock: Clock;
  readonly #fetch: Fetch;
  #cached?: { at: number; sighting: BrokerSighting };
  #inFlight?: Promise<BrokerSighting>;

  constructor(options: BrokerPresenceOptions) {
    this.#o = {
      dataDir: options.dataDir,
      runningTtlMs: options.runningTtlMs ?? 5_000,
      stoppedTtlMs: options.stoppedTtlMs ?? 1_000,
      httpTimeoutMs: options.httpTimeoutMs ?? 1_000,
      procRoot: options.procRoot ?? "/proc",
      selfPid: options.selfPid ?? process.pid,
    };
    this.#clock = options.clock ?? systemClock;
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
  }

  /** The answer of a check at most a few seconds old; concurrent callers share one check. */
  check(): Promise<BrokerSighting> {
    const cached = this.#cached;
    if (cached) {
      const ttl = cached.sighting.running ? this.#o.runningTtlMs : this.#o.stoppedTtlMs;
      if (this.#clock.now() - cached.at < ttl) return Promise.resolve(cached.sighting);
    }
    this.#inFlight ??= this.#look().then((sighting) => {
      this.#cached = { at: this.#clock.now(), sighting };
      return sighting;
    }).finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  /** Forgets the cached answer: the next check looks again. */
  forget(): void {
    this.#cached = undefined;
  }

  async #look(): Promise<BrokerSighting> {
    const url = await brokerHttpUrl(this.#o.dataDir);
    if (await this.#pongs(url)) {
      return { running: true, evidence: `its HTTP API answers at ${url}` };
    }
    const scan = await scanOpenFiles(this.#o.dataDir, this.#o.procRoot, this.#o.selfPid);
    if (scan.holder) return { running: true, evidence: scan.holder };
    const unseen = scan.unreadable > 0
      ? `; ${scan.unreadable} processes could not be inspected`
      : scan.scanned
      ? ""
      : `; no ${this.#o.procRoot} to scan`;
    return {
      running: false,
      evidence: `nothing answers ${url}/ping and no process holds a file under ` +
        `${this.#o.dataDir} open${unseen}`,
    };
  }

  /** True when `GET {url}/ping` answers `pong` within the timeout. */
  async #pongs(url: string): Promise<boolean> {
    const abort = new AbortController();
    const cancel = this.#clock.setTimer(this.#o.httpTimeoutMs, () => abort.abort(), {
      unref: true,
    });
    try {
      const res = await this.#fetch(`${url}/ping`, { signal: abort.signal });
      const text = await res.text();
      return res.ok && text.trim() === "pong";
    } catch {
      return false; // refused, timed out, not HTTP: nothing that answers like Iggy
    } finally {
      cancel();
    }
  }
}

/**
 * The broker's HTTP API as its runtime config names it (`[http] address`; a wildcard host is
 * asked on loopback), else Iggy's default.
 */
export async function brokerHttpUrl(dataDir: string): Promise<string> {
  let address = IGGY_DEFAULT_HTTP;
  try {
    const text = await readFile(join(dataDir, "runtime", "current_config.toml"), "utf8");
    const http = (parseToml(text) as { http?: { address?: unknown } }).http;
    if (typeof http?.address === "string" && http.address !== "") address = http.address;
  } catch {
    // no runtime config (or not TOML): the default address
  }
  const wildcard = /^(?:0\.0\.0\.0|\[::\]):(\d+)$/.exec(address);
  if (wildcard) address = `127.0.0.1:${wildcard[1]}`;
  return `http://${address}`;
}

/** What a scan of the process table found. */
export interface OpenFileScan {
  /** "process N (name) holds PATH open", for the first holder found. */
  holder?: string;
  /** Processes whose open files could not be listed (another user's, without privileges). */
  unreadable: number;
  /** False when there is no process table to scan (not Linux). */
  scanned: boolean;
}

/**
 * Finds a process other than `selfPid` holding a file under `dir` open, from the links in
 * `{procRoot}/*\/fd`.
 */
export async function scanOpenFiles(
  dir: string,
  procRoot = "/proc",
  selfPid = process.pid,
): Promise<OpenFileScan> {
  let root: string;
  try {
    root = await realpath(dir);
  } catch {
    root = dir;
  }
  const inside = root.endsWith(sep) ? root : root + sep;
  let pids: string[];
  try {
    pids = (await readdir(procRoot)).filter((n) => /^\d+$/.test(n) && Number(n) !== selfPid);
  } catch {
    return { unreadable: 0, scanned: false };
  }
  let unreadable = 0;
  for (const pid of pids) {
    const fdDir = join(procRoot, pid, "fd");
    let fds: string[];
    try {
      fds = await readdir(fdDir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EACCES" || code === "EPERM") unreadable++;
      continue; // gone since the listing, or not ours to see
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = await readlink(join(fdDir, fd));
      } catch {
        continue;
      }
      if (target !== root && !target.startsWith(inside)) continue;
      const name = await readFile(join(procRoot, pid, "comm"), "utf8")
        .then((t) => t.trim(), () => "?");
      return {
        holder: `process ${pid} (${name}) holds ${relative(root, target) || "."} open`,
        unreadable,
        scanned: true,
      };
    }
  }
  return { unreadable, scanned: true };
}
