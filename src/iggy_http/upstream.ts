// Requests to the broker's HTTP API on a client's behalf, streamed both ways: the client's body
// goes up as it arrives (a produce is never held in memory) and the broker's answer comes back
// byte for byte — `node:http`, unlike `fetch`, neither decodes content encodings nor buffers.
// Hop-by-hop headers are dropped and `Host` names the broker; everything else is passed as is,
// the client's `Authorization` included. tierd's own broker credentials are never used here.
import http from "node:http";
import https from "node:https";
import { Readable } from "node:stream";
import { IggyHttpError } from "./errors.ts";

/** Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
]);

/** Copies `headers` without the hop-by-hop ones (and those `Connection` names). */
export function endToEnd(headers: Headers): Headers {
  const named = new Set(
    (headers.get("connection") ?? "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean),
  );
  const out = new Headers();
  headers.forEach((value, name) => {
    if (!HOP_BY_HOP.has(name) && !named.has(name)) out.append(name, value);
  });
  return out;
}

/** One request to the broker. */
export interface UpstreamRequest {
  method: string;
  /** Path and query, e.g. `/streams/1/topics/1/messages?kind=first`. */
  path: string;
  headers: Headers;
  body?: ReadableStream<Uint8Array> | Uint8Array | null;
  signal?: AbortSignal;
}

/** The broker's answer, its body not yet read. */
export interface UpstreamResponse {
  status: number;
  statusText: string;
  /** End-to-end headers. */
  headers: Headers;
  body: ReadableStream<Uint8Array> | null;
}

/** A client of one broker base URL, with its own keep-alive connection pool. */
export class Upstream {
  readonly #base: URL;
  readonly #agent: http.Agent;
  readonly #lib: typeof http | typeof https;

  /**
   * @param baseUrl `[agent.broker] http_url`, e.g. `http://127.0.0.1:3000`
   * @param options.ca PEM of the CA that signed an `https://` broker's certificate
   * @throws {TypeError} when it is not a URL
   */
  constructor(baseUrl: string, options: { ca?: string } = {}) {
    this.#base = new URL(baseUrl);
    const secure = this.#base.protocol === "https:";
    this.#lib = secure ? https : http;
    this.#agent = secure
      ? new https.Agent({ keepAlive: true, maxSockets: 256, ca: options.ca })
      : new http.Agent({ keepAlive: true, maxSockets: 256 });
  }

  /** The broker's URL (no credentials in it). */
  get url(): string {
    return this.#base.origin;
  }

  /**
   * Sends `req` and resolves once the broker's status and headers are in.
   * @throws {IggyHttpError} 502 `broker_unreachable` when the broker cannot be reached
   */
  send(req: UpstreamRequest): Promise<UpstreamResponse> {
    const prefix = this.#base.pathname.replace(/\/+$/, "");
    const headers: Record<string, string[]> = {};
    endToEnd(req.headers).forEach((value, name) => (headers[name] ??= []).push(value));
    if (req.body instanceof Uint8Array) headers["content-length"] = [String(req.body.length)];
    return new Promise((resolve, reject) => {
      const unreachable = (err: Error) =>
        reject(
          new IggyHttpError(
            502,
            "broker_unreachable",
            `the broker at ${this.url} could not be reached: ${err.message}`,
          ),
        );
      const up = this.#lib.request({
        protocol: this.#base.protocol,
        hostname: this.#base.hostname.replace(/^\[|\]$/g, ""),
        port: this.#base.port || undefined,
        method: req.method,
        path: prefix + req.path,
        headers: { ...headers, host: this.#base.host },
        agent: this.#agent,
        signal: req.signal,
      }, (res) => {
        const out = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (value === undefined) continue;
          for (const v of Array.isArray(value) ? value : [value]) out.append(name, v);
        }
        const noBody = req.method === "HEAD" || res.statusCode === 204 || res.statusCode === 304;
        if (noBody) res.resume();
        resolve({
          status: res.statusCode ?? 502,
          statusText: res.statusMessage ?? "",
          headers: endToEnd(out),
          body: noBody ? null : Readable.toWeb(res) as ReadableStream<Uint8Array>,
        });
      });
      up.once("error", unreachable);
      const body = req.body;
      if (!body) up.end();
      else if (body instanceof Uint8Array) up.end(body);
      else {
        const source = Readable.fromWeb(body as import("node:stream/web").ReadableStream);
        source.once("error", (err) => up.destroy(err));
        source.pipe(up);
      }
    });
  }

  /**
   * Sends `req` and reads the whole answer (for the small calls tierd makes itself).
   * @throws {IggyHttpError} 502 when the broker cannot be reached or the answer breaks off
   */
  async call(
    req: UpstreamRequest,
  ): Promise<{ status: number; headers: Headers; body: Uint8Array<ArrayBuffer> }> {
    const res = await this.send(req);
    try {
      const body = res.body
        ? new Uint8Array(await new Response(res.body).arrayBuffer())
        : new Uint8Array();
      return { status: res.status, headers: res.headers, body };
    } catch (err) {
      throw new IggyHttpError(
        502,
        "broker_unreachable",
        `the broker at ${this.url} broke off its answer: ${(err as Error).message}`,
      );
    }
  }

  /** Closes idle pooled connections. */
  close(): void {
    this.#agent.destroy();
  }
}
