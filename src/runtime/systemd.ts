// sd_notify(3) for a `Type=notify` systemd unit (deploy/systemd/tierd.service): READY=1 once
// the agent is ready, STATUS= lines, WATCHDOG=1 pings at half of `WatchdogSec`, STOPPING=1 at
// shutdown. Messages are datagrams on the unix socket named by `$NOTIFY_SOCKET` (a path, or
// `@name` in the abstract namespace). Neither runtime has a unix datagram client in its stable
// API (Deno's `Deno.listenDatagram` needs `--unstable-net`; Bun and `node:dgram` have UDP only),
// so the datagram is sent with libc's socket(2)/sendto(2) through FFI — `Deno.dlopen`, or
// `bun:ffi` in the compiled binary — from tierd's own PID, which the default `NotifyAccess=main`
// accepts. Where libc cannot be loaded, `systemd-notify` is run instead (that needs
// `NotifyAccess=all`, as the unit sets). Without `$NOTIFY_SOCKET` nothing is sent.
import { spawn } from "node:child_process";
import type { EventEmitter } from "node:events";
import { type Clock, systemClock } from "../base/clock.ts";
import type { Logger } from "../log.ts";

/** The environment a notifier reads (`NOTIFY_SOCKET`, `WATCHDOG_USEC`, `WATCHDOG_PID`). */
export type NotifyEnv = Record<string, string | undefined>;

/** `$NOTIFY_SOCKET` is set but names no socket tierd can send to. */
export class NotifySocketError extends Error {
  override readonly name = "NotifySocketError";
  constructor(readonly socket: string, why: string) {
    super(`NOTIFY_SOCKET=${JSON.stringify(socket)}: ${why}`);
  }
}

/** Sends one datagram; resolves false when it could not be sent. */
export type DatagramSend = (message: Uint8Array) => Promise<boolean>;

/** How messages reach systemd: a datagram from this process, or `systemd-notify`. */
export interface NotifyTransport {
  readonly kind: "ffi" | "systemd-notify";
  send: DatagramSend;
  close(): void;
}

const AF_UNIX = 1;
const SOCK_DGRAM = 2;
const SOCK_CLOEXEC = 0o2000000;
const MSG_NOSIGNAL = 0x4000;
/** `sizeof(sockaddr_un.sun_path)` on Linux. */
const SUN_PATH = 108;

/**
 * The `sockaddr_un` for `socket`: family AF_UNIX (u16, little-endian), then the path with a
 * terminating NUL, or for `@name` a NUL and the name (abstract namespace, no terminator).
 * @throws {NotifySocketError} for a relative path, a vsock address or a path too long
 */
export function sockaddrUn(socket: string): Uint8Array {
  const abstract = socket.startsWith("@");
  if (!abstract && !socket.startsWith("/")) {
    throw new NotifySocketError(socket, "not an absolute path or @abstract name");
  }
  const name = new TextEncoder().encode(abstract ? socket.slice(1) : socket);
  const pathLength = name.length + 1; // the NUL before an abstract name, or after a path
  if (pathLength > SUN_PATH) throw new NotifySocketError(socket, "longer than sun_path");
  const out = new Uint8Array(2 + pathLength);
  new DataView(out.buffer).setUint16(0, AF_UNIX, true);
  out.set(name, abstract ? 3 : 2);
  return out;
}

interface LibcDatagram {
  socket(domain: number, type: number, protocol: number): number;
  sendto(fd: number, buf: Uint8Array, len: number, flags: number, addr: Uint8Array): number;
  close(fd: number): number;
}

const LIBC_NAMES = ["libc.so.6", "libc.so", "libc.musl-x86_64.so.1", "libc.musl-aarch64.so.1"];

interface DenoFfi {
  dlopen(
    path: string,
    symbols: Record<string, { parameters: string[]; result: string }>,
  ): { symbols: Record<string, (...args: unknown[]) => unknown>; close(): void };
}

/** libc's socket/sendto/close through `Deno.dlopen`. */
function denoLibc(deno: DenoFfi): LibcDatagram | undefined {
  for (const name of LIBC_NAMES) {
    try {
      const lib = deno.dlopen(name, {
        socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
        sendto: {
          parameters: ["i32", "buffer", "usize", "i32", "buffer", "u32"],
          result: "isize",
        },
        close: { parameters: ["i32"], result: "i32" },
      });
      const f = lib.symbols;
      return {
        socket: (d, t, p) => f.socket(d, t, p) as number,
        sendto: (fd, buf, len, flags, addr) =>
          Number(f.sendto(fd, buf, BigInt(len), flags, addr, addr.length) as bigint | number),
        close: (fd) => f.close(fd) as number,
      };
    } catch {
      // try the next name
    }
  }
  return undefined;
}

interface BunFfi {
  dlopen(
    path: string,
    symbols: Record<string, { args: string[]; returns: string }>,
  ): { symbols: Record<string, (...args: unknown[]) => unknown> };
}

/** libc's socket/sendto/close through `bun:ffi`. */
async function bunLibc(): Promise<LibcDatagram | undefined> {
  const specifier = "bun:ffi";
  const ffi = await import(specifier) as BunFfi;
  for (const name of LIBC_NAMES) {
    try {
      const f = ffi.dlopen(name, {
        socket: { args: ["i32", "i32", "i32"], returns: "i32" },
        sendto: { args: ["i32", "ptr", "u64", "i32", "ptr", "u32"], returns: "i64" },
        close: { args: ["i32"], returns: "i32" },
      }).symbols;
      return {
        socket: (d, t, p) => f.socket(d, t, p) as number,
        sendto: (fd, buf, len, flags, addr) =>
          Number(f.sendto(fd, buf, len, flags, addr, addr.length) as bigint | number),
        close: (fd) => f.close(fd) as number,
      };
    } catch {
      // try the next name
    }
  }
  return undefined;
}

/** libc through whichever runtime runs tierd, or undefined when it cannot be loaded. */
async function loadLibc(): Promise<LibcDatagram | undefined> {
  const g = globalThis as { Deno?: DenoFfi; Bun?: unknown };
  try {
    if (g.Bun) return await bunLibc();
    if (typeof g.Deno?.dlopen === "function") return denoLibc(g.Deno);
  } catch {
    // no FFI (a Deno without --allow-ffi): the caller falls back
  }
  return undefined;
}

/** A datagram transport over libc, one socket for the life of the process. */
async function ffiTransport(socket: string): Promise<NotifyTransport | undefined> {
  const addr = sockaddrUn(socket);
  const libc = await loadLibc();
  if (!libc) return undefined;
  const fd = libc.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return undefined;
  let open = true;
  return {
    kind: "ffi",
    send: (message) =>
      Promise.resolve(open && libc.sendto(fd, message, message.length, MSG_NOSIGNAL, addr) >= 0),
    close() {
      if (open) libc.close(fd);
      open = false;
    },
  };
}

/** `systemd-notify` as a child, once per message (needs `NotifyAccess=all`). */
function spawnTransport(command: string, env: NotifyEnv): NotifyTransport {
  return {
    kind: "systemd-notify",
    send: (message) =>
      new Promise<boolean>((resolve) => {
        const lines = new TextDecoder().decode(message).split("\n").filter((l) => l !== "");
        const child = spawn(command, lines, {
          stdio: "ignore",
          env: { ...process.env, ...env } as Record<string, string>,
        });
        const events = child as unknown as EventEmitter;
        events.on("error", () => resolve(false));
        events.on("exit", (code: number | null) => resolve(code === 0));
      }),
    close() {},
  };
}

/** Options of {@link openNotifier}. */
export interface NotifierOptions {
  /** @default process.env */
  env?: NotifyEnv;
  logger?: Logger;
  /** @default systemClock */
  clock?: Clock;
  /** @default "ffi", falling back to "systemd-notify" */
  transport?: "ffi" | "systemd-notify";
  /** The fallback's command. @default "systemd-notify" */
  systemdNotify?: string;
  /** This process' id, for `WATCHDOG_PID`. @default process.pid */
  pid?: number;
}

/** Talks to systemd for a `Type=notify` unit. */
export class SystemdNotifier {
  readonly transport: NotifyTransport;
  /** Half of `WATCHDOG_USEC` in ms, when systemd expects watchdog pings from this process. */
  readonly watchdogMs?: number;
  readonly #clock: Clock;
  readonly #logger?: Logger;
  #cancelWatchdog?: () => void;
  #warned = false;

  constructor(
    transport: NotifyTransport,
    o: { watchdogMs?: number; clock: Clock; logger?: Logger },
  ) {
    this.transport = transport;
    this.watchdogMs = o.watchdogMs;
    this.#clock = o.clock;
    this.#logger = o.logger;
  }

  /** Sends `fields` (`{ READY: "1", STATUS: "…" }`) as one message; false if it did not go. */
  async notify(fields: Record<string, string>): Promise<boolean> {
    const text = Object.entries(fields).map(([k, v]) => `${k}=${v.replace(/\n/g, " ")}`)
      .join("\n") + "\n";
    const ok = await this.transport.send(new TextEncoder().encode(text));
    if (!ok && !this.#warned) {
      this.#warned = true;
      this.#logger?.warn("sd_notify: message not delivered", {
        transport: this.transport.kind,
        fields: Object.keys(fields),
      });
    }
    return ok;
  }

  /** READY=1 with a status line. */
  ready(status: string): Promise<boolean> {
    return this.notify({ READY: "1", STATUS: status });
  }

  /** A status line (`systemctl status` shows it). */
  status(status: string): Promise<boolean> {
    return this.notify({ STATUS: status });
  }

  /** STOPPING=1, and no more watchdog pings. */
  stopping(status = "stopping"): Promise<boolean> {
    this.stopWatchdog();
    return this.notify({ STOPPING: "1", STATUS: status });
  }

  /**
   * Pings WATCHDOG=1 every {@link watchdogMs} while the event loop runs (a wedged process
   * stops pinging and systemd restarts it); nothing when systemd asked for no watchdog.
   * @param alive checked before each ping; a false answer skips it
   */
  startWatchdog(alive: () => boolean = () => true): void {
    const every = this.watchdogMs;
    if (every === undefined || this.#cancelWatchdog) return;
    const tick = () => {
      if (alive()) void this.notify({ WATCHDOG: "1" });
      this.#cancelWatchdog = this.#clock.setTimer(every, tick, { unref: true });
    };
    tick();
  }

  stopWatchdog(): void {
    this.#cancelWatchdog?.();
    this.#cancelWatchdog = undefined;
  }

  /** Stops the watchdog and closes the socket. */
  close(): void {
    this.stopWatchdog();
    this.transport.close();
  }
}

/**
 * Half of `WATCHDOG_USEC` in ms, when it is set and `WATCHDOG_PID` (if set) is `pid`.
 * @throws {never}
 */
export function watchdogInterval(env: NotifyEnv, pid: number): number | undefined {
  const usec = Number(env.WATCHDOG_USEC ?? "");
  if (!Number.isFinite(usec) || usec <= 0) return undefined;
  if (
    env.WATCHDOG_PID !== undefined && env.WATCHDOG_PID !== "" && Number(env.WATCHDOG_PID) !== pid
  ) {
    return undefined;
  }
  return Math.max(1, Math.floor(usec / 2000));
}

/**
 * The notifier for `$NOTIFY_SOCKET`, or undefined when tierd does not run under a
 * `Type=notify` unit (no `NOTIFY_SOCKET`).
 * @throws {NotifySocketError} when `NOTIFY_SOCKET` names no usable socket
 */
export async function openNotifier(o: NotifierOptions = {}): Promise<SystemdNotifier | undefined> {
  const env = o.env ?? process.env;
  const socket = env.NOTIFY_SOCKET;
  if (socket === undefined || socket === "") return undefined;
  sockaddrUn(socket); // refuse an unusable address up front, whatever the transport
  const clock = o.clock ?? systemClock;
  let transport = o.transport === "systemd-notify" ? undefined : await ffiTransport(socket);
  if (!transport) {
    if (o.transport === undefined) {
      o.logger?.warn("sd_notify: libc could not be loaded; using systemd-notify", { socket });
    }
    transport = spawnTransport(o.systemdNotify ?? "systemd-notify", { NOTIFY_SOCKET: socket });
  }
  return new SystemdNotifier(transport, {
    watchdogMs: watchdogInterval(env, o.pid ?? process.pid),
    clock,
    logger: o.logger,
  });
}

/**
 * {@link openNotifier} for `tierd run`: a `NOTIFY_SOCKET` tierd cannot use is logged, not fatal
 * (systemd then times the start out, which says more than a crash loop).
 */
export async function systemdNotifier(
  logger: Logger,
  o: Omit<NotifierOptions, "logger"> = {},
): Promise<SystemdNotifier | undefined> {
  try {
    const n = await openNotifier({ ...o, logger });
    if (n) {
      logger.info("sd_notify: notifying systemd", {
        transport: n.transport.kind,
        watchdog_ms: n.watchdogMs,
      });
    }
    return n;
  } catch (err) {
    logger.error("sd_notify: cannot notify systemd", { err });
    return undefined;
  }
}
