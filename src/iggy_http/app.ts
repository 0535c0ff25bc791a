// The Iggy-compatible listener (`[agent.iggy_http]`): speaks the broker's own HTTP API, so an
// unmodified Iggy SDK client pointed at it reads offsets the broker has evicted. Every request is
// forwarded to the broker (`[agent.broker] http_url`) unchanged and streamed both ways — login,
// produce, streams, consumer offsets, everything — except message polls, which poll.ts answers
// from tierd's read path when they start below the broker's first retained offset.
import { type Clock, systemClock } from "../base/clock.ts";
import type { FetchHandler } from "../http/serve.ts";
import { type Logger, silentLogger } from "../log.ts";
import type { TierdMetrics } from "../metrics/tierd.ts";
import type { ReadContext } from "../read/context.ts";
import { ContinuityReaders } from "../read/continuity.ts";
import { NameCache } from "../iggy_front/names.ts";
import { ClientCalls } from "./client_calls.ts";
import { errorResponse } from "./errors.ts";
import { servePoll } from "./poll.ts";
import { Upstream } from "./upstream.ts";

/** Options of {@link createIggyHttp}. */
export interface IggyHttpOptions {
  /** The read path (the agent's, with its cache and read budget). */
  read: ReadContext;
  /** PEM of the CA that signed an `https://` broker's certificate (`[agent.broker] tls_ca`). */
  brokerCa?: string;
  /** `[agent.broker] http_url`. */
  brokerUrl: string;
  /** How long a client token's probe answer is reused (`[agent.iggy_http] auth_cache_ttl`). */
  authCacheTtlMs: number;
  /** Where the listener's polls, forwards and errors are counted. */
  metrics?: TierdMetrics;
  logger?: Logger;
  clock?: Clock;
}

/** The listener's request handler. */
export interface IggyHttp extends FetchHandler {
  /** Closes pooled broker connections. */
  close(): void;
}

const POLL_PATH = /^\/streams\/([^/]+)\/topics\/([^/]+)\/messages\/?$/;

/**
 * Builds the handler; bind it with `serve()` (src/http/serve.ts).
 *
 * @throws {TypeError} when `brokerUrl` is not a URL
 * @example
 * ```ts ignore
 * const iggy = createIggyHttp({ read, brokerUrl: "http://127.0.0.1:3000", authCacheTtlMs: 1000 });
 * const server = await serve(iggy, { hostname: "127.0.0.1", port: 3001 });
 * ```
 */
export function createIggyHttp(o: IggyHttpOptions): IggyHttp {
  const upstream = new Upstream(o.brokerUrl, { ca: o.brokerCa });
  const calls = new ClientCalls(upstream, o.authCacheTtlMs, o.clock ?? systemClock);
  const logger = o.logger ?? silentLogger;
  const continuity = new ContinuityReaders();
  const names = new NameCache(o.authCacheTtlMs, o.clock ?? systemClock);

  const clock = o.clock ?? systemClock;
  const forward = async (req: Request): Promise<Response> => {
    o.metrics?.iggyForwarded.inc({ listener: "http", command: req.method });
    const url = new URL(req.url);
    try {
      const res = await upstream.send({
        method: req.method,
        path: url.pathname + url.search,
        headers: req.headers,
        body: req.body,
        signal: req.signal,
      });
      return new Response(res.body, {
        status: res.status,
        statusText: res.statusText,
        headers: res.headers,
      });
    } catch (err) {
      return errorResponse(err);
    }
  };

  return {
    async fetch(req: Request): Promise<Response> {
      const m = req.method === "GET" ? POLL_PATH.exec(new URL(req.url).pathname) : null;
      if (!m) return forward(req);
      const started = clock.monotonic();
      let source: "tierd" | "broker" = "broker";
      const res = await servePoll(
        {
          read: o.read,
          calls,
          continuity,
          logger,
          forward,
          names,
          answered: () => source = "tierd",
        },
        req,
        { stream: m[1], topic: m[2] },
      );
      if (o.metrics) {
        if (res.status >= 500) o.metrics.iggyErrors.inc({ listener: "http", kind: "read" });
        o.metrics.iggyPolls.inc({ listener: "http", source });
        o.metrics.iggyPollDuration.observe(
          { listener: "http", source },
          (clock.monotonic() - started) / 1000,
        );
      }
      return res;
    },
    close: () => upstream.close(),
  };
}
