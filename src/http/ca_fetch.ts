// A `fetch` for a broker whose HTTPS certificate a private CA signed (`[agent.broker] tls_ca`):
// Deno's and Bun's own `fetch` take no CA option they share, so this one sends through the
// broker connection pool the Iggy listener uses (`Upstream`, over `node:https`, which both
// runtimes provide), with the CA file read at the first request.
import { readFile } from "node:fs/promises";
import { Upstream } from "../iggy_http/upstream.ts";

/**
 * A `fetch` to one broker (the origin of the first URL it is given) trusting the CA in the PEM
 * file at `caPath`.
 */
export function fetchWithCa(
  caPath: string,
): (input: string, init: RequestInit) => Promise<Response> {
  let upstream: Promise<Upstream> | undefined;
  return async (input, init) => {
    const url = new URL(input);
    upstream ??= readFile(caPath, "utf8").then((ca) => new Upstream(url.origin, { ca }));
    const body = typeof init.body === "string"
      ? new TextEncoder().encode(init.body)
      : init.body instanceof Uint8Array
      ? init.body
      : undefined;
    const res = await (await upstream).send({
      method: init.method ?? "GET",
      path: url.pathname + url.search,
      headers: new Headers(init.headers),
      body,
      signal: init.signal ?? undefined,
    });
    return new Response(res.body, {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  };
}
