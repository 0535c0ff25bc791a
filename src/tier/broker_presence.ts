// Is a broker running beside the data directory? `evict_via = "auto"` without `[agent.broker]`
// unlinks segment files itself, which is only safe while the broker is stopped (a running
// broker keeps its sealed segments open and in its own index). Two signs, either enough:
//
// - its HTTP API answers `GET /ping` with `pong` at the address of its own config — Iggy 0.8 and
//   0.9 write the config they run with to `{data_dir}/runtime/current_config.toml`; without that
//   file no broker has run on this directory, and Iggy's default `127.0.0.1:3000` (some other
//   broker's, on a shared host) is asked only where there is no process table to scan;
// - on Linux, another process holds a file under the data directory open for writing (every
//   link in `/proc/*/fd`, its mode from `/proc/*/fdinfo`): Iggy 0.8 and 0.9 hold their active
//   segment, their log and 0.9 its metadata journal open write-only or read-write while they run.
//   A reader — a backup agent, `du`, a log shipper, `tail` — is not a broker and holds nothing
//   up. Processes this user may not inspect are skipped and counted.
//
// A scan costs one readlink per open file on the machine, so answers are kept briefly: a
// "running" one for 5 s (it only delays eviction), a "stopped" one for 1 s (it lets files go).
import { readdir, readFile, readlink, realpath } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { parse as parseToml } from "smol-toml";
import { type Clock, systemClock } from "../base/clock.ts";

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
    const configured = await brokerHttpUrlFromConfig(this.#o.dataDir);
    if (configured && await this.#pongs(configured)) {
      return { running: true, evidence: `its HTTP API answers at ${configured}` };
    }
    const scan = await scanOpenFiles(this.#o.dataDir, this.#o.procRoot, this.#o.selfPid);
    if (scan.holder) return { running: true, evidence: scan.holder };
    // Without a process table the default address is the only other sign there is.
    const url = configured ?? `http://${IGGY_DEFAULT_HTTP}`;
    if (!configured && !scan.scanned && await this.#pongs(url)) {
      return { running: true, evidence: `an Iggy HTTP API answers at ${url}` };
    }
    const unseen = scan.unreadable > 0
      ? `; ${scan.unreadable} processes could not be inspected`
      : scan.scanned
      ? ""
      : `; no ${this.#o.procRoot} to scan`;
    const readers = scan.readers > 0
      ? ` (${scan.readers} file(s) there are open read-only: readers, not a broker)`
      : "";
    const asked = configured || !scan.scanned
      ? `nothing answers ${url}/ping`
      : "no broker has run here (no runtime/current_config.toml)";
    return {
      running: false,
      evidence: `${asked} and no process holds a file under ${this.#o.dataDir} open for ` +
        `writing${readers}${unseen}`,
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

/** What {@link BrokerPresence} looks at for `dataDir`, in words (the start's log line). */
export async function presenceChecks(dataDir: string): Promise<string> {
  const configured = await brokerHttpUrlFromConfig(dataDir);
  return configured
    ? `${configured}/ping and files held open for writing`
    : `files held open for writing (http://${IGGY_DEFAULT_HTTP}/ping where there is no process ` +
      "table to scan)";
}

/**
 * The broker's HTTP API as its runtime config names it (`[http] address`; a wildcard host is
 * asked on loopback); undefined without one.
 */
async function brokerHttpUrlFromConfig(dataDir: string): Promise<string | undefined> {
  let address: string;
  try {
    const text = await readFile(join(dataDir, "runtime", "current_config.toml"), "utf8");
    const http = (parseToml(text) as { http?: { address?: unknown } }).http;
    if (typeof http?.address !== "string" || http.address === "") return undefined;
    address = http.address;
  } catch {
    return undefined; // no runtime config (or not TOML)
  }
  const wildcard = /^(?:0\.0\.0\.0|\[::\]):(\d+)$/.exec(address);
  if (wildcard) address = `127.0.0.1:${wildcard[1]}`;
  return `http://${address}`;
}

/** What a scan of the process table found. */
export interface OpenFileScan {
  /** "process N (name) holds PATH open for writing", for the first writer found. */
  holder?: string;
  /** Files under the directory other processes hold open read-only (not a broker's sign). */
  readers: number;
  /** Processes whose open files could not be listed (another user's, without privileges). */
  unreadable: number;
  /** False when there is no process table to scan (not Linux). */
  scanned: boolean;
}

/**
 * Finds a process other than `selfPid` holding a file under `dir` open for writing, from the
 * links in `{procRoot}/*\/fd` and their modes in `{procRoot}/*\/fdinfo` (a mode that cannot be
 * read counts as writing: the scan errs on the side of "running").
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
    return { unreadable: 0, scanned: false, readers: 0 };
  }
  let unreadable = 0;
  let readers = 0;
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
      if (!(await openForWriting(join(procRoot, pid, "fdinfo", fd)))) {
        readers++;
        continue;
      }
      const name = await readFile(join(procRoot, pid, "comm"), "utf8")
        .then((t) => t.trim(), () => "?");
      return {
        holder: `process ${pid} (${name}) holds ${relative(root, target) || "."} open for writing`,
        unreadable,
        scanned: true,
        readers,
      };
    }
  }
  return { unreadable, scanned: true, readers };
}

/** O_WRONLY | O_RDWR: the access mode bits of an fd's `flags` (octal in fdinfo). */
const WRITE_MODES = 0o3;

/** True unless `fdinfo` says the fd is open read-only. */
async function openForWriting(fdinfo: string): Promise<boolean> {
  const text = await readFile(fdinfo, "utf8").catch(() => undefined);
  const flags = text && /^flags:\s*([0-7]+)$/m.exec(text)?.[1];
  if (!flags) return true; // unknown: count it
  return (parseInt(flags, 8) & WRITE_MODES) !== 0;
}
