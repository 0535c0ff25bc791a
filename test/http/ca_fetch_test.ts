// A broker whose HTTPS certificate a private CA signed (`[agent.broker] tls_ca`): with the CA,
// tierd's broker calls (eviction's login, the Iggy listener's upstream) reach it; the runtime's
// own fetch, which does not know the CA, is refused.
import assert from "node:assert/strict";
import https from "node:https";
import { readFile } from "node:fs/promises";
import { fetchWithCa } from "../../src/http/ca_fetch.ts";
import { Upstream } from "../../src/iggy_http/upstream.ts";
import { caAndLeaf } from "../_tls.ts";
import { tempDir } from "../_util.ts";

Deno.test("a broker signed by a private CA is reached with tls_ca, and refused without", async () => {
  const tmp = await tempDir("tierd-ca-fetch");
  const pki = await caAndLeaf(tmp.path, "broker");
  const server = https.createServer({
    cert: await readFile(pki.cert, "utf8"),
    key: await readFile(pki.key, "utf8"),
  }, (req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ method: req.method, path: req.url, body }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
  try {
    const res = await fetchWithCa(pki.ca)(`${url}/users/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "u" }),
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), {
      method: "POST",
      path: "/users/login",
      body: '{"username":"u"}',
    });
    const upstream = new Upstream(url, { ca: await readFile(pki.ca, "utf8") });
    try {
      const got = await upstream.call({ method: "GET", path: "/stats", headers: new Headers() });
      assert.equal(got.status, 200);
    } finally {
      upstream.close();
    }
    await assert.rejects(fetch(`${url}/stats`), "the runtime's fetch does not know the CA");
  } finally {
    await new Promise((resolve) => server.close(resolve));
    await tmp.cleanup();
  }
});
