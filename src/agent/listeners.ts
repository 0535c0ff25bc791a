// What the agent's listeners are built with: the options every HTTP listener shares, the records
// route's guard, the TLS pair (read again on SIGHUP), the broker's CA, and the URL a listener
// answers on.
import type { Clock } from "../base/clock.ts";
import { readPemFile } from "../config/pem_file.ts";
import type { Config } from "../config/schema.ts";
import { iggyReadGuard, type ReadGuard, tokenReadGuard } from "../http/read_auth.ts";
import { listenOptions, type RunningServer, type ServeOptions } from "../http/serve.ts";
import type { Logger } from "../log.ts";
import { Upstream } from "../iggy_http/upstream.ts";

/**
 * The options of an HTTP listener of the agent on `listen`: the config's header and idle
 * timeouts, with what this listener adds (its signal, connection cap, TLS).
 */
export function httpListenerOptions(
  config: Config,
  listen: string,
  o: { clock: Clock; logger: Logger } & Pick<ServeOptions, "signal" | "maxConnections" | "tls">,
): ServeOptions {
  return {
    ...listenOptions(listen),
    headerTimeoutMs: config.agent.http_header_timeout,
    idleTimeoutMs: config.agent.http_idle_timeout,
    ...o,
  };
}

/** The records route's guard for `agent.read_auth` (none for `none`), and what it holds. */
export function readGuardFor(
  config: Config,
  clock: Clock,
  ca: string | undefined,
): { guard?: ReadGuard; close(): void } {
  switch (config.agent.read_auth) {
    case "token":
      return { guard: tokenReadGuard(config.agent.read_token), close: () => {} };
    case "iggy": {
      const upstream = new Upstream(config.agent.broker.http_url, { ca });
      return {
        guard: iggyReadGuard(upstream, config.agent.iggy_http.auth_cache_ttl, clock),
        close: () => upstream.close(),
      };
    }
    case "none":
      return { close: () => {} };
  }
}

/** `agent.tls_cert` and `tls_key` as the listeners load them (again on SIGHUP), if set. */
export function listenerTls(
  config: Config,
): (() => Promise<{ cert: string; key: string }>) | undefined {
  const { tls_cert, tls_key } = config.agent;
  if (tls_cert === "") return undefined;
  return async () => ({
    cert: await readPemFile(tls_cert, "agent.tls_cert"),
    key: await readPemFile(tls_key, "agent.tls_key"),
  });
}

/** The PEM of `[agent.broker] tls_ca`, if set. */
export function brokerCa(config: Config): Promise<string | undefined> {
  const path = config.agent.broker.tls_ca;
  return path === "" ? Promise.resolve(undefined) : readPemFile(path, "agent.broker.tls_ca");
}

/** The URL a listener answers on, for the start log. */
export function serverUrl(server: RunningServer): string {
  const host = server.hostname.includes(":") ? `[${server.hostname}]` : server.hostname;
  return `${server.reloadTls ? "https" : "http"}://${host}:${server.port}/`;
}
