// A `fetch` for a broker whose HTTPS certificate a private CA signed (`[agent.broker] tls_ca`):
// Deno's and Bun's own `fetch` take no CA option they share, so this one goes through
// `node:https`, which both provide, with the CA file read at the first request.
import { readFile } from "node:fs/promises";
import http from "node:http";
import https from "node:https";
import { Readable } from "node:stream";

/** A `fetch` trusting the CA in the PEM file at `caPath` (plain `http:` URLs go as they are). */
export function fetchWithCa(
  caPath: string,
): (input: string, init: RequestInit) => Promise<Response> {
  let agent: Promise<https.Agent> | undefined;
  return async (input, init) => {
    agent ??= readFile(caPath, "utf8").then((ca) =>
      new https.Agent({ keepAlive: true, maxSockets: 64, ca })
    );
    const url = new URL(input);
    const secure = url.protocol === "https:";
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((v, k) => (headers[k] = v));
    const body = typeof init.body === "string"
      ? new TextEncoder().encode(init.body)
      : init.body instanceof Uint8Array
      ? init.body
      : undefined;
    if (body) headers["content-length"] = String(body.length);
    const lib = secure ? https : http;
    const options = {
      method: init.method ?? "GET",
      headers,
      agent: secure ? await agent : undefined,
    };
    return await new Promise<Response>((resolve, reject) => {
      const req = lib.request(url, { ...options, signal: init.signal ?? undefined }, (res) => {
        const out = new Headers();
        for (const [k, v] of Object.entries(res.headers)) {
          for (const one of Array.isArray(v) ? v : v === undefined ? [] : [v]) out.append(k, one);
        }
        const empty = res.statusCode === 204 || res.statusCode === 304;
        if (empty) res.resume();
        resolve(
          new Response(empty ? null : Readable.toWeb(res) as ReadableStream<Uint8Array>, {
            status: res.statusCode ?? 502,
            headers: out,
          }),
        );
      });
      req.once("error", reject);
      req.end(body);
    });
  };
}
