// tierd's own listeners over TLS (`agent.tls_cert`, `tls_key`), under Deno and under Bun: a client
// that trusts the certificate reads through HTTPS; after the files are replaced, a reload serves
// new connections with the new certificate (a client trusting only the old one is refused), and a
// reload whose files do not load keeps the certificate in use.
import assert from "node:assert/strict";
import { copyFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { caAndLeaf } from "../_tls.ts";
import { tempDir } from "../_util.ts";
import { spawnBunEcho, startRouteEcho } from "./_route_echo.ts";

/** GET `path` over HTTPS trusting only `caPem`: the route echoed, or the error's name. */
async function getTrusting(port: number, caPem: string, path: string): Promise<string> {
  const client = Deno.createHttpClient({ caCerts: [caPem] });
  try {
    const res = await fetch(`https://127.0.0.1:${port}${path}`, { client });
    return (await res.json()).route;
  } catch (err) {
    return `refused: ${(err as Error).name}`;
  } finally {
    client.close();
  }
}

Deno.test("Deno: HTTPS with the configured certificate; a reload takes new files, a bad one keeps the old", async () => {
  const tmp = await tempDir("tierd-tls");
  try {
    const a = await caAndLeaf(tmp.path, "a");
    const b = await caAndLeaf(tmp.path, "b");
    const live = { cert: join(tmp.path, "live.pem"), key: join(tmp.path, "live.key") };
    await copyFile(a.cert, live.cert);
    await copyFile(a.key, live.key);
    const pemA = await Deno.readTextFile(a.ca);
    const pemB = await Deno.readTextFile(b.ca);
    const server = await startRouteEcho(live);
    try {
      assert.equal(await getTrusting(server.port, pemA, "/v1/status?x=1"), "/v1/status?x=1");
      assert.match(await getTrusting(server.port, pemB, "/healthz"), /^refused/);
      const plain = await fetch(`http://127.0.0.1:${server.port}/healthz`).then(
        (r) => `answered ${r.status}`,
        () => "refused",
      );
      assert.notEqual(plain, "answered 200", "plain HTTP is not served on a TLS listener");

      await copyFile(b.cert, live.cert);
      await copyFile(b.key, live.key);
      await server.reloadTls!();
      assert.equal(await getTrusting(server.port, pemB, "/healthz"), "/healthz");
      assert.match(await getTrusting(server.port, pemA, "/healthz"), /^refused/);

      await writeFile(live.key, "not a key");
      await assert.rejects(server.reloadTls!(), /not a PEM private key/);
      await copyFile(a.key, live.key); // a key that is not the certificate's
      await assert.rejects(server.reloadTls!(), /not the certificate's/);
      assert.equal(await getTrusting(server.port, pemB, "/healthz"), "/healthz", "b stays");
    } finally {
      await server.close();
    }
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("Bun (the binary's runtime): HTTPS with the configured certificate", async () => {
  const tmp = await tempDir("tierd-tls-bun");
  try {
    const a = await caAndLeaf(tmp.path, "a");
    const bun = await spawnBunEcho([a.cert, a.key]);
    try {
      const pem = await Deno.readTextFile(a.ca);
      assert.equal(await getTrusting(bun.port, pem, "/v1/status"), "/v1/status");
    } finally {
      await bun.stop();
    }
  } finally {
    await tmp.cleanup();
  }
});
