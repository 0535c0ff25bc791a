// The runtime adapter: binds a fetch handler (the Hono app) to a TCP port with `Deno.serve`
// or `Bun.serve`, whichever runtime runs tierd. The only file that touches runtime globals.
import { parseListen } from "../config/listen.ts";

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
  /** Stops accepting connections and resolves once the server is closed. */
  close(): Promise<void>;
}

interface DenoServer {
  addr: { port: number };
  shutdown(): Promise<void>;
  finished: Promise<void>;
}

interface DenoRuntime {
  serve(
    options: { hostname: string; port: number; onListen?: () => void },
    handler: (request: Request) => Response | Promise<Response>,
  ): DenoServer;
}

interface BunServer {
  port: number;
  stop(closeActiveConnections?: boolean): void | Promise<void>;
}

interface BunRuntime {
  serve(options: {
    hostname: string;
    port: number;
    fetch: (request: Request) => Response | Promise<Response>;
  }): BunServer;
}

/**
 * Serves `app` on `hostname:port`.
 *
 * @returns the running server, once it listens
 * @throws {Error} when neither Deno nor Bun is the runtime, or the port cannot be bound
 * @example
 * ```ts
 * const server = await serve(app, { hostname: "127.0.0.1", port: 7070 });
 * await server.close();
 * ```
 */
export function serve(app: FetchHandler, options: ServeOptions): Promise<RunningServer> {
  const runtime = globalThis as { Deno?: DenoRuntime; Bun?: BunRuntime };
  const handler = (request: Request) => app.fetch(request);
  let server: RunningServer;
  if (runtime.Deno?.serve) {
    const s = runtime.Deno.serve(
      { hostname: options.hostname, port: options.port, onListen: () => {} },
      handler,
    );
    let closing: Promise<void> | undefined;
    server = {
      hostname: options.hostname,
      port: s.addr.port,
      close: () => closing ??= s.shutdown().then(() => s.finished),
    };
  } else if (runtime.Bun?.serve) {
    const s = runtime.Bun.serve({ hostname: options.hostname, port: options.port, fetch: handler });
    let closing: Promise<void> | undefined;
    server = {
      hostname: options.hostname,
      port: s.port,
      close: () => closing ??= Promise.resolve(s.stop(true)).then(() => {}),
    };
  } else {
    return Promise.reject(new Error("tierd's HTTP server needs Deno or Bun"));
  }
  if (options.signal?.aborted) void server.close();
  options.signal?.addEventListener("abort", () => void server.close(), { once: true });
  return Promise.resolve(server);
}
