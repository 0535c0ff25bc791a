// A tap between tierd and the real Iggy server's HTTP API: passes every request through
// unchanged and records what tierd asked (login, DeleteSegments), with which token and what the
// server answered, so the suite can see tierd log in again after a restart changed the JWT.

/** One request tierd made through the tap. */
export interface BrokerCall {
  method: string;
  /** Path and query, e.g. `/streams/0/topics/0/partitions/1?segments_count=2`. */
  path: string;
  /** The bearer token sent, if any. */
  token?: string;
  /** The server's status; undefined when it could not be reached (the tap answered 502). */
  status?: number;
  /** For a login: the token the server issued. */
  issued?: string;
}

/** A running tap. */
export interface BrokerTap {
  /** `http://127.0.0.1:PORT`: tierd's `agent.broker.http_url`. */
  readonly url: string;
  /** Every call so far, in order of their answers. */
  readonly calls: BrokerCall[];
  close(): Promise<void>;
}

/** Starts a tap on a free loopback port in front of `target` (the server's HTTP API). */
export function startBrokerTap(target: string): BrokerTap {
  const calls: BrokerCall[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const path = url.pathname + url.search;
    const auth = req.headers.get("authorization");
    const call: BrokerCall = {
      method: req.method,
      path,
      token: auth?.startsWith("Bearer ") ? auth.slice(7) : undefined,
    };
    const body = req.method === "GET" || req.method === "HEAD"
      ? undefined
      : new Uint8Array(await req.arrayBuffer());
    let answer: Response;
    try {
      answer = await fetch(target + path, { method: req.method, headers: req.headers, body });
    } catch {
      calls.push(call);
      return new Response("tap: the broker is unreachable", { status: 502 });
    }
    const bytes = new Uint8Array(await answer.arrayBuffer());
    call.status = answer.status;
    if (path === "/users/login" && answer.ok) {
      try {
        call.issued = JSON.parse(new TextDecoder().decode(bytes)).access_token?.token;
      } catch {
        // not JSON: left unrecorded
      }
    }
    calls.push(call);
    // fetch decoded the body already: its length and encoding headers no longer apply.
    const headers = new Headers(answer.headers);
    headers.delete("content-length");
    headers.delete("content-encoding");
    const nullBody = answer.status === 204 || answer.status === 304;
    return new Response(nullBody ? null : bytes, { status: answer.status, headers });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    calls,
    close: () => server.shutdown(),
  };
}
