// The runtime adapter serves the app on a real port and closes cleanly.
import assert from "node:assert/strict";
import { Hono } from "hono";
import { listenOptions, serve } from "../../src/http/serve.ts";

Deno.test("serve binds a port, answers, and closes", async () => {
  const app = new Hono();
  app.get("/healthz", (c) => c.text("ok"));
  const server = await serve(app, { hostname: "127.0.0.1", port: 0 });
  try {
    assert.ok(server.port > 0);
    const res = await fetch(`http://127.0.0.1:${server.port}/healthz`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "ok");
  } finally {
    await server.close();
  }
  await assert.rejects(fetch(`http://127.0.0.1:${server.port}/healthz`));
});

Deno.test("an aborted signal closes the server", async () => {
  const app = new Hono();
  const stop = new AbortController();
  const server = await serve(app, { hostname: "127.0.0.1", port: 0, signal: stop.signal });
  stop.abort();
  await server.close(); // resolves once closed; closing twice is fine
});

Deno.test("agent.listen gives the bind address; the default is loopback", () => {
  assert.deepEqual(listenOptions("127.0.0.1:7070"), { hostname: "127.0.0.1", port: 7070 });
  assert.deepEqual(listenOptions("[::1]:0"), { hostname: "::1", port: 0 });
  assert.throws(() => listenOptions("7070"));
});
