// Binds a fetch handler (the Hono app) to a TCP port, with the connection hygiene a service
// exposed to unauthenticated clients needs: a cap on open connections (kept well below the
// process's file limit), a deadline for a request's headers, an idle timeout between requests,
// and a listener that never takes the process down — at the fd limit new connections are
// refused while the worker and the reads in flight go on. Built on `node:http`, which Deno and
// Bun both provide, so the single binary and `deno run` behave the same. Response bodies are
// streamed with backpressure: a slow client holds a bounded window, not the whole answer.
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import { Readable } from "node:stream";
import { type Clock, systemClock } from "../base/clock.ts";
import { parseListen } from "../config/listen.ts";
import type { Logger } from "../log.ts";
import { openFileLimit } from "../runtime/limits.ts";
import { listenOn } from "../runtime/listen.ts";
import { MAX_TARGET_BYTES, routeTarget, TargetError } from "./target.ts";
import { checkedPair } from "../config/pem_file.ts";

/** Something that answers requests, such as a Hono app. */
export interface FetchHandler {
  fetch(request: Request): Response | Promise<Response>;
}

/** Options of {@link serve}. */
export interface ServeOptions {
  /** Interface to bind; tierd's default (`agent.listen`) is 127.0.0.1. */
  hostname: string;
  /** TCP port; 0 picks a free one. */
  port: number;
  /** Aborting it closes the server. */
  signal?: AbortSignal;
  /** Open connections at most; more wait in the kernel's backlog. @default from the fd limit */
  maxConnections?: number;
  /** A connection must send a whole request head within this. @default 10000 */
  headerTimeoutMs?: number;
  /** A kept-alive connection with no request for this long is closed. @default 30000 */
  idleTimeoutMs?: number;
  clock?: Clock;
  logger?: Logger;
  /** Serve HTTPS with the PEM certificate and key this loads (again on `reloadTls`). */
  tls?: () => Promise<{ cert: string; key: string }>;
}

/**
 * The bind address of `agent.listen` (`"127.0.0.1:7070"` by default; IPv6 in brackets).
 *
 * @throws {UnitError} when the text is not host:port
 */
export function listenOptions(listen: string): { hostname: string; port: number } {
  const { host, port } = parseListen(listen);
  return { hostname: host, port };
}

/** A listening server. */
export interface RunningServer {
  hostname: string;
  /** The bound port (the chosen one when 0 was asked). */
  port: number;
  /** Connections open now. */
  connections(): number;
  /** Stops accepting connections and resolves once the server is closed. */
  close(): Promise<void>;
  /**
   * With TLS: loads the certificate and key again and serves new connections with them (open
   * connections keep theirs).
   * @throws when they do not load; the certificate in use stays
   */
  reloadTls?(): Promise<void>;
}

/** File descriptors kept for the agent's own work (segments, journals, store connections). */
const FD_RESERVE = 256;
/** The connection cap when the fd limit is unknown or very high. */
const MAX_CONNECTIONS = 1024;

/** The connection cap for a process allowed `limit` open files. */
export function connectionCap(limit: number | undefined): number {
  if (limit === undefined || !Number.isFinite(limit)) return MAX_CONNECTIONS;
  // Half of what is left after the reserve: every connection may also open a segment file.
  return Math.max(16, Math.min(MAX_CONNECTIONS, Math.floor((limit - FD_RESERVE) / 2)));
}

interface Tracked {
  /** Cancels the timer that closes the connection (header read or idle). */
  cancel: () => void;
  busy: boolean;
}

/**
 * Serves `app` on `hostname:port`.
 *
 * @returns the running server, once it listens
 * @throws {Error} when the port cannot be bound
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const app = { fetch: () => new Response("ok") };
 * const server = await serve(app, { hostname: "127.0.0.1", port: 0 }); // 0: a free port
 * const res = await fetch(`http://127.0.0.1:${server.port}/`);
 * assert.equal(await res.text(), "ok");
 * await server.close();
 * ```
 */
export async function serve(app: FetchHandler, options: ServeOptions): Promise<RunningServer> {
  const clock = options.clock ?? systemClock;
  const headerTimeoutMs = options.headerTimeoutMs ?? 10_000;
  const idleTimeoutMs = options.idleTimeoutMs ?? 30_000;
  const tracked = new Map<Socket, Tracked>();
  const closeAfter = (socket: Socket, ms: number): () => void =>
    clock.setTimer(ms, () => socket.destroy(), { unref: true });

  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const t = tracked.get(req.socket);
    if (t) {
      t.cancel();
      t.busy = true;
    }
    void answer(app, req, res, options.logger).finally(() => {
      const now = tracked.get(req.socket);
      if (!now) return;
      now.busy = false;
      now.cancel = closeAfter(req.socket, idleTimeoutMs);
    });
  };
  let lastAcceptError = -Infinity;
  /** A server for `handler`: HTTPS with the certificate `options.tls` loads now, else HTTP. */
  const create = async (): Promise<http.Server> => {
    const server = options.tls
      ? https.createServer({
        ...checkedPair(await options.tls()),
        handshakeTimeout: headerTimeoutMs,
      }, handler)
      : http.createServer(handler);
    server.maxConnections = options.maxConnections ?? connectionCap(openFileLimit());
    // Until its request head has arrived, a connection has `headerTimeoutMs` (with TLS, counted
    // from the handshake's end; the handshake has as long).
    server.on(options.tls ? "secureConnection" : "connection", (socket: Socket) => {
      tracked.set(socket, { cancel: closeAfter(socket, headerTimeoutMs), busy: false });
      socket.once("close", () => {
        tracked.get(socket)?.cancel();
        tracked.delete(socket);
      });
    });
    server.on("error", (err: NodeJS.ErrnoException) => {
      // EMFILE/ENFILE on accept: refuse for now, never exit; say so at most once a minute.
      const now = clock.monotonic();
      if (now - lastAcceptError > 60_000) {
        lastAcceptError = now;
        options.logger?.error("http server cannot accept connections; refusing new ones", { err });
      }
    });
    server.on("clientError", (err: NodeJS.ErrnoException & { rawPacket?: Uint8Array }, socket) => {
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      socket.end(
        `HTTP/1.1 ${clientErrorStatus(err)}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`,
      );
      // Keep reading what the client is still sending (a long URL), so that closing does not
      // reset the connection before the client has read the answer.
      socket.resume();
      clock.setTimer(2_000, () => socket.destroy(), { unref: true });
    });
    return server;
  };
  let server = await create();
  await listenOn(server, options.hostname, options.port, { clock });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  /** Servers still open: the listening one, and replaced ones finishing their connections. */
  const open = new Set<http.Server>([server]);
  let closing: Promise<void> | undefined;
  const running: RunningServer = {
    hostname: options.hostname,
    port,
    connections: () => tracked.size,
    close: () =>
      closing ??= Promise.all([...open].map((s) =>
        new Promise<void>((resolve) => {
          s.close(() => resolve());
          // Idle connections would hold close() open; busy ones finish their answer first.
          for (const [socket, t] of tracked) if (!t.busy) socket.destroy();
        })
      )).then(() => {}),
  };
  if (options.tls) {
    running.reloadTls = async () => {
      if (closing) return;
      const next = await create(); // a certificate that does not load keeps the one in use
      const old = server;
      // New connections get the new certificate; those open keep theirs until they end.
      old.close(() => open.delete(old));
      await listenOn(next, options.hostname, port, { attempts: 50, clock });
      open.add(next);
      server = next;
    };
  }
  if (options.signal?.aborted) void running.close();
  options.signal?.addEventListener("abort", () => void running.close(), { once: true });
  return running;
}

/**
 * The status line for a request the HTTP parser refused: a request head over the parser's limit
 * is 414 when its request line alone did not end within it (a long URL), else 431; anything else
 * is 400.
 */
export function clientErrorStatus(err: { code?: string; rawPacket?: Uint8Array }): string {
  if (err.code !== "HPE_HEADER_OVERFLOW") return "400 Bad Request";
  const raw = err.rawPacket;
  const lineEnd = raw ? raw.indexOf(0x0a) : -1;
  return lineEnd < 0 || lineEnd > MAX_TARGET_BYTES
    ? "414 URI Too Long"
    : "431 Request Header Fields Too Large";
}

/** Methods tierd serves (the Iggy listener forwards each of them); others get 405. */
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/**
 * Why a request is answered before it reaches the app, if it is: a target that cannot be routed
 * (src/http/target.ts), a method tierd does not serve, or a GET or HEAD with a body.
 */
function refuse(
  req: http.IncomingMessage,
): { status: number; code: string; message: string; headers?: Record<string, string> } | undefined {
  const method = req.method ?? "GET";
  if (!METHODS.has(method)) {
    return {
      status: 405,
      code: "method_not_allowed",
      message: `${method} is not served here`,
      headers: { allow: [...METHODS].join(", ") },
    };
  }
  try {
    routeTarget(req.url ?? "/");
  } catch (err) {
    if (err instanceof TargetError) return err;
    throw err;
  }
  const length = req.headers["content-length"];
  const chunked = req.headers["transfer-encoding"] !== undefined;
  if ((method === "GET" || method === "HEAD") && (chunked || (length && length !== "0"))) {
    return {
      status: 400,
      code: "body_not_allowed",
      message: `a ${method} request carries no body here`,
    };
  }
  return undefined;
}

/** Turns one node request into a fetch `Request`, runs the app, and streams its answer back. */
async function answer(
  app: FetchHandler,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  logger: Logger | undefined,
): Promise<void> {
  const refusal = refuse(req);
  if (refusal) {
    // The connection closes after the answer: an unread body must not be taken for a request.
    res.writeHead(refusal.status, {
      "content-type": "application/json",
      connection: "close",
      ...refusal.headers,
    });
    res.end(JSON.stringify({ error: refusal.code, message: refusal.message }));
    return;
  }
  const controller = new AbortController();
  res.once("close", () => controller.abort());
  let response: Response;
  try {
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
    }
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    // The route is the request line's alone: the URL's authority is a constant, never Host.
    const request = new Request(`http://tierd.invalid${routeTarget(req.url ?? "/")}`, {
      method: req.method,
      headers,
      body: hasBody ? Readable.toWeb(req) as ReadableStream<Uint8Array> : undefined,
      signal: controller.signal,
      ...(hasBody ? { duplex: "half" } : {}),
    } as RequestInit);
    response = await app.fetch(request);
  } catch (err) {
    logger?.error("http request failed before an answer", { err });
    if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
    res.end("internal error");
    return;
  }
  const outHeaders: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name === "set-cookie") return;
    outHeaders[name] = value;
  });
  const cookies = response.headers.getSetCookie?.() ?? [];
  if (cookies.length > 0) outHeaders["set-cookie"] = cookies;
  res.writeHead(response.status, response.statusText, outHeaders);
  if (!response.body || req.method === "HEAD") {
    await response.body?.cancel().catch(() => {});
    res.end();
    return;
  }
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (res.destroyed) break;
      // Backpressure: wait for the socket to drain before reading more of the body.
      if (!res.write(value)) {
        await new Promise<void>((resolve) => {
          const go = () => {
            res.off("drain", go);
            res.off("close", go);
            resolve();
          };
          res.once("drain", go);
          res.once("close", go);
        });
      }
    }
    res.end();
  } catch (err) {
    logger?.debug("http response body failed mid-stream", { err });
    res.destroy();
  } finally {
    await reader.cancel().catch(() => {});
  }
}
