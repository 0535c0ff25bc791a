// The route comes from the request line alone, under Deno and under Bun (the runtime of the
// single binary): a Host header naming another path, an absolute-form target naming another
// host, dot segments (raw or percent-encoded), backslashes and fragments never reach a route other
// than the one the request line names — routed by path, or refused with 400 — and the oddities an
// attacker sends get an answer, never a reset or a hang: 414 for a long target (inside and past
// the parser's limit), 405 for TRACE, 400 for a GET with a body and for asterisk-form.
import assert from "node:assert/strict";
import fc from "fast-check";
import { spawnBunEcho, startRouteEcho } from "./_route_echo.ts";
import { routeTarget, TargetError } from "../../src/http/target.ts";

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends `head` (and `body`) as raw bytes and reads the answer until the server closes or it is whole. */
async function raw(port: number, head: string, body = ""): Promise<RawAnswer> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const writing = conn.write(new TextEncoder().encode(head + body)).catch(() => 0);
    let text = "";
    const buf = new Uint8Array(65536);
    const deadline = setTimeout(() => conn.close(), 10_000);
    try {
      for (;;) {
        const n = await conn.read(buf).catch(() => null);
        if (n === null) break;
        text += new TextDecoder().decode(buf.subarray(0, n));
        const end = text.indexOf("\r\n\r\n");
        if (end < 0) continue;
        const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end));
        if (length && text.length >= end + 4 + Number(length[1])) break;
      }
    } finally {
      clearTimeout(deadline);
    }
    await writing;
    const end = text.indexOf("\r\n\r\n");
    assert.ok(
      end > 0,
      `an answer to ${JSON.stringify(head.slice(0, 80))}: got ${JSON.stringify(text)}`,
    );
    const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const i = l.indexOf(":");
      headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
    }
    let answer = text.slice(end + 4);
    if (/chunked/i.test(headers["transfer-encoding"] ?? "")) answer = dechunk(answer);
    return { status: Number(statusLine.split(" ")[1]), headers, body: answer };
  } finally {
    try {
      conn.close();
    } catch {
      // closed by the deadline
    }
  }
}

/** A chunked body's data. */
function dechunk(text: string): string {
  let out = "";
  for (let at = 0;;) {
    const eol = text.indexOf("\r\n", at);
    const size = parseInt(text.slice(at, eol), 16);
    if (!(size > 0)) return out;
    out += text.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}

/** The route the echo server was reached by, or the refusal's code. */
function routeOf(a: RawAnswer): string {
  // The runtime's HTTP parser refused the request before tierd saw it.
  if (a.status === 400 && a.body === "") return "400 refused by the parser";
  let json;
  try {
    json = JSON.parse(a.body);
  } catch {
    assert.fail(`not JSON: ${a.status} ${JSON.stringify(a.headers)} ${JSON.stringify(a.body)}`);
  }
  return a.status === 200 ? json.route : `${a.status} ${json.error}`;
}

/** Every case, against a server on `port`. */
async function requestLineCases(port: number): Promise<void> {
  const get = (target: string, host = "tierd.example", extra = "") =>
    raw(port, `GET ${target} HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n${extra}\r\n`)
      .then(routeOf);

  // Host never changes the route.
  for (
    const host of [
      "x/v1/streams/1/topics/1/partitions/0/records?offset=0&max_bytes=100&format=json#",
      "x/v1/admin/pass#",
      "x/users/1?",
      "evil.example",
      "",
    ]
  ) {
    // Routed by the path, or refused as a whole by the runtime's parser (Bun checks Host).
    const routed = await get("/healthz", host);
    if (routed !== "400 refused by the parser") assert.equal(routed, "/healthz", `Host: ${host}`);
  }
  assert.equal(
    await raw(
      port,
      `POST /healthz HTTP/1.1\r\nhost: x/v1/admin/pass#\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`,
    )
      .then(routeOf),
    "/healthz",
  );

  // Absolute-form: its path and query route; its authority chooses nothing.
  assert.equal(await get("http://evil.example/v1/status?x=1"), "/v1/status?x=1");
  assert.equal(await get("http://evil.example"), "/");
  assert.equal(await get("http://evil.example?offset=1"), "/?offset=1");
  assert.equal(await get("HTTPS://evil.example:443/streams"), "/streams");
  assert.equal(await get("http://x/healthz/%2e%2e/v1/status"), "400 bad_target");

  // Anything a URL parser would turn into another route is refused.
  for (
    const target of [
      "//evil.example/streams",
      "/healthz/../v1/status",
      "/healthz/%2e%2e/v1/status",
      "/healthz/%2E%2e/v1/status",
      "/healthz/.%2E/v1/status",
      "/healthz/./x",
      "/healthz/%2e",
      "/v1\\status",
      "*",
    ]
  ) {
    // Refused by tierd, or before it by the runtime's parser (Bun refuses `*` itself).
    assert.match(await get(target), /^400 (bad_target|refused by the parser)$/, target);
  }
  // Encoded bytes that are not dot segments route as they are (the handler decides).
  assert.equal(await get("/v1/streams/my%2Fstream"), "/v1/streams/my%2Fstream");
  assert.equal(await get("/healthz/%2e%2ex"), "/healthz/%2e%2ex");

  // A long target: 414, from tierd inside the parser's limit and from the parser's refusal past it.
  const long = (n: number) => `/v1/status?pad=${"a".repeat(n)}`;
  for (const n of [9_000, 60_000, 1 << 20]) {
    const a = await raw(port, `GET ${long(n)} HTTP/1.1\r\nhost: x\r\n\r\n`);
    assert.equal(a.status, 414, `a ${n}-byte target`);
  }
  // A long header is not a long URI.
  const bigHeader = await raw(
    port,
    `GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: ${"b".repeat(70_000)}\r\n\r\n`,
  );
  assert.equal(bigHeader.status, 431);

  // TRACE is not served; a GET with a body is refused (and the connection closed), not left hanging.
  const trace = await raw(port, `TRACE / HTTP/1.1\r\nhost: x\r\n\r\n`);
  assert.equal(trace.status, 405);
  assert.match(trace.headers.allow, /GET/);
  const withBody = await raw(
    port,
    `GET /healthz HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\n`,
    "hello",
  );
  assert.equal(withBody.status, 400);
  assert.equal(JSON.parse(withBody.body).error, "body_not_allowed");
  assert.equal(withBody.headers.connection, "close");
  assert.equal(await get("/healthz", "x", "content-length: 0\r\n"), "/healthz");
}

Deno.test("Deno: the route is the request line's, never Host's; odd targets get an answer", async () => {
  const server = await startRouteEcho();
  try {
    await requestLineCases(server.port);
  } finally {
    await server.close();
  }
});

Deno.test("Bun (the binary's runtime): the same", async () => {
  const bun = await spawnBunEcho();
  try {
    await requestLineCases(bun.port);
  } finally {
    await bun.stop();
  }
});

Deno.test("routeTarget: whatever it returns is a plain path a URL parser keeps as it is", () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({
          unit: fc.constantFrom("/", ".", "%", "2", "e", "E", "a", "?", "\\", "#", ":"),
        }),
        fc.webUrl().map((u) => u.replace(/^https?:\/\/[^/?#]*/, "")),
        fc.webUrl(),
      ),
      (target) => {
        let routed: string;
        try {
          routed = routeTarget(target);
        } catch (err) {
          assert.ok(err instanceof TargetError, String(err));
          return;
        }
        const url = new URL(`http://tierd.invalid${routed}`);
        assert.equal(url.host, "tierd.invalid", target);
        // (An empty query, `?` alone, is no query.)
        const expected = routed.indexOf("?") === routed.length - 1 ? routed.slice(0, -1) : routed;
        assert.equal(url.pathname + url.search, expected, `${target} is rewritten by URL parsing`);
      },
    ),
    { numRuns: 2000 },
  );
});
