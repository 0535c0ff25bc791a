// GCS token sources: the service-account JWT flow against a local token endpoint that checks
// the RS256 signature with the public key, the metadata server, caching and refresh at 90 % of
// the lifetime, one refresh for concurrent callers, and refusals that never show a secret.
import assert from "node:assert/strict";
import { FakeClock } from "../../_fake_clock.ts";
import { Buffer } from "node:buffer";
import { join } from "node:path";
import {
  GCS_SCOPE,
  importPkcs8Pem,
  loadServiceAccountKey,
  MetadataServerTokenSource,
  NoTokenSource,
  ServiceAccountTokenSource,
  StaticTokenSource,
  tokenSourceFromConfig,
} from "../../../providers/gcs/credentials.ts";
import type { FetchFn } from "../../../providers/http.ts";
import { StoreError } from "../../../providers/types.ts";
import { tempDir } from "../../_util.ts";
import { assertNoLeak } from "../_faults.ts";
import { readingClock } from "../../_fake_clock.ts";

const RSA = {
  name: "RSASSA-PKCS1-v1_5",
  modulusLength: 2048,
  publicExponent: new Uint8Array([1, 0, 1]),
  hash: "SHA-256",
};

async function keyPair(): Promise<{ pem: string; publicKey: CryptoKey }> {
  const pair = await crypto.subtle.generateKey(RSA, true, ["sign", "verify"]) as CryptoKeyPair;
  const der = new Uint8Array(await crypto.subtle.exportKey("pkcs8", pair.privateKey));
  const b64 = Buffer.from(der).toString("base64").replace(/(.{64})/g, "$1\n");
  return {
    pem: `-----BEGIN PRIVATE KEY-----\n${b64}\n-----END PRIVATE KEY-----\n`,
    publicKey: pair.publicKey,
  };
}

const keys = await keyPair();

/** A local OAuth token endpoint that accepts only assertions signed by `publicKey`. */
function tokenEndpoint(publicKey: CryptoKey, options: { expiresIn?: number } = {}) {
  const seen: Array<{ header: Record<string, unknown>; claims: Record<string, unknown> }> = [];
  let issued = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
    if (
      request.method !== "POST" ||
      request.headers.get("content-type") !== "application/x-www-form-urlencoded"
    ) {
      return Response.json({ error: "invalid_request" }, { status: 400 });
    }
    const form = new URLSearchParams(await request.text());
    if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") {
      return Response.json({ error: "unsupported_grant_type" }, { status: 400 });
    }
    const [h, c, s] = (form.get("assertion") ?? "").split(".");
    const valid = await crypto.subtle.verify(
      "RSASSA-PKCS1-v1_5",
      publicKey,
      Buffer.from(s ?? "", "base64url"),
      new TextEncoder().encode(`${h}.${c}`),
    );
    if (!valid) {
      return Response.json(
        { error: "invalid_grant", error_description: "Invalid JWT Signature." },
        { status: 400 },
      );
    }
    seen.push({
      header: JSON.parse(Buffer.from(h, "base64url").toString()),
      claims: JSON.parse(Buffer.from(c, "base64url").toString()),
    });
    return Response.json({
      access_token: `ya29.token-${++issued}`,
      expires_in: options.expiresIn ?? 3600,
      token_type: "Bearer",
    });
  });
  const url = `http://127.0.0.1:${server.addr.port}/token`;
  return { url, seen, close: () => server.shutdown() };
}

Deno.test("gcs credentials: a service-account key file becomes a verified RS256 assertion and a token", async () => {
  const endpoint = tokenEndpoint(keys.publicKey);
  const dir = await tempDir("tierd-gcs-key");
  try {
    const path = join(dir.path, "key.json");
    await Deno.writeTextFile(
      path,
      JSON.stringify({
        type: "service_account",
        project_id: "p",
        private_key_id: "kid-1",
        private_key: keys.pem,
        client_email: "tierd@p.iam.gserviceaccount.com",
        token_uri: endpoint.url,
      }),
    );
    const now = 1_700_000_000_000;
    const source = new ServiceAccountTokenSource(await loadServiceAccountKey(path), {
      clock: readingClock(() => now),
    });
    assert.equal(await source.token(), "ya29.token-1");
    assert.equal(source.describe, "service account tierd@p.iam.gserviceaccount.com");
    const [{ header, claims }] = endpoint.seen;
    assert.deepEqual(header, { alg: "RS256", typ: "JWT", kid: "kid-1" });
    assert.deepEqual(claims, {
      iss: "tierd@p.iam.gserviceaccount.com",
      scope: GCS_SCOPE,
      aud: endpoint.url,
      iat: now / 1000,
      exp: now / 1000 + 3600,
    });
    // The same config through tokenSourceFromConfig.
    const configured = await tokenSourceFromConfig({
      credentials_source: "service_account",
      service_account_key: path,
      token: "",
    });
    assert.equal(await configured.token(), "ya29.token-2");
  } finally {
    await endpoint.close();
    await dir.cleanup();
  }
});

Deno.test("gcs credentials: refreshed in the background at 90 % of the lifetime, one fetch for concurrent callers", async () => {
  const endpoint = tokenEndpoint(keys.publicKey, { expiresIn: 1000 });
  const clock = new FakeClock(1_700_000_000_000);
  try {
    const source = new ServiceAccountTokenSource(
      { client_email: "a@b", private_key: keys.pem, token_uri: endpoint.url },
      { clock, refusalIntervalMs: 0 },
    );
    const first = await Promise.all([source.token(), source.token(), source.token()]);
    assert.deepEqual(first, ["ya29.token-1", "ya29.token-1", "ya29.token-1"]);
    assert.equal(endpoint.seen.length, 1, "concurrent callers share one fetch");
    clock.advance(899_000); // 89.9 % of 1000 s
    assert.equal(await source.token(), "ya29.token-1");
    clock.advance(2_000); // past 90 %: the background refresh runs
    await waitFor(() => endpoint.seen.length === 2);
    assert.equal(await source.token(), "ya29.token-2");
    // A refusal of a stale token does not drop the current one; of the current one it does.
    assert.equal(await source.refused("ya29.token-1"), true);
    assert.equal(await source.token(), "ya29.token-2");
    assert.equal(await source.refused("ya29.token-2"), true);
    assert.equal(await source.token(), "ya29.token-3");
    source.close();
  } finally {
    await endpoint.close();
  }
});

Deno.test("gcs credentials: a refused or unreachable token endpoint is a typed error without secrets", async () => {
  const other = await keyPair();
  const endpoint = tokenEndpoint(keys.publicKey);
  try {
    // Signed with another key: the endpoint says invalid_grant.
    const wrong = new ServiceAccountTokenSource({
      client_email: "a@b",
      private_key: other.pem,
      token_uri: endpoint.url,
    });
    const err = await wrong.token().catch((e) => e);
    assert.ok(err instanceof StoreError);
    assert.equal(err.kind, "Auth");
    assert.equal(err.detail.code, "invalid_grant");
    assert.match(err.message, /Invalid JWT Signature/);
    assertNoLeak(err, [[other.pem.slice(40, 100), "the private key"], ["eyJ", "an assertion"]], {
      depth: 8,
    });
  } finally {
    await endpoint.close();
  }
  const busy: FetchFn = () => Promise.resolve(Response.json({ error: "busy" }, { status: 503 }));
  const throttled = await new MetadataServerTokenSource({ fetch: busy }).token().catch((e) => e);
  assert.equal(throttled.kind, "Throttled");
  const down: FetchFn = () => Promise.reject(new TypeError("connection refused"));
  const transport = await new MetadataServerTokenSource({ fetch: down }).token().catch((e) => e);
  assert.equal(transport.kind, "Transport");
  const garbage: FetchFn = () => Promise.resolve(new Response("<html>"));
  assert.equal(
    (await new MetadataServerTokenSource({ fetch: garbage }).token().catch((e) => e)).kind,
    "Malformed",
  );
  const badKey = new ServiceAccountTokenSource({
    client_email: "a@b",
    private_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
  });
  const refused = await badKey.token().catch((e) => e);
  assert.equal(refused.kind, "Auth");
  assert.equal(refused.detail.code, "InvalidPrivateKey");
});

Deno.test("gcs credentials: the metadata server is asked with Metadata-Flavor: Google", async () => {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    const url = new URL(request.url);
    if (url.pathname !== "/computeMetadata/v1/instance/service-accounts/default/token") {
      return new Response("not found", { status: 404 });
    }
    if (request.headers.get("metadata-flavor") !== "Google") {
      return new Response("missing flavor", { status: 403 });
    }
    return Response.json({ access_token: "ya29.meta", expires_in: 3599, token_type: "Bearer" });
  });
  try {
    const source = new MetadataServerTokenSource({
      endpoint: `http://127.0.0.1:${server.addr.port}`,
    });
    assert.equal(await source.token(), "ya29.meta");
    assert.match(source.describe, /^metadata server http:\/\/127\.0\.0\.1:/);
  } finally {
    await server.shutdown();
  }
});

Deno.test("gcs credentials: static and none; config errors name the missing setting", async () => {
  assert.equal(await new NoTokenSource().token(), undefined);
  const fixed = new StaticTokenSource("ya29.static-secret");
  assert.equal(await fixed.token(), "ya29.static-secret");
  assert.ok(!Deno.inspect(fixed).includes("static-secret"));
  assert.equal(
    await (await tokenSourceFromConfig({
      credentials_source: "none",
      service_account_key: "",
      token: "",
    })).token(),
    undefined,
  );
  await assert.rejects(
    tokenSourceFromConfig({ credentials_source: "static", service_account_key: "", token: "" }),
    /needs a token/,
  );
  await assert.rejects(
    tokenSourceFromConfig({
      credentials_source: "service_account",
      service_account_key: "",
      token: "",
    }),
    /needs service_account_key/,
  );
  await assert.rejects(loadServiceAccountKey("/nonexistent/key.json"));
  await assert.rejects(
    importPkcs8Pem("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----"),
    TypeError,
  );
});

Deno.test("gcs credentials: a caller that gives up does not cancel the shared refresh", async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let calls = 0;
  const slow: FetchFn = async () => {
    calls++;
    await gate;
    return Response.json({ access_token: "ya29.shared", expires_in: 3600 });
  };
  const source = new MetadataServerTokenSource({ fetch: slow });
  const impatient = new AbortController();
  const first = source.token({ signal: impatient.signal });
  const second = source.token();
  impatient.abort(new DOMException("gave up", "AbortError"));
  await assert.rejects(
    first,
    (err: unknown) => err instanceof DOMException && err.name === "AbortError",
  );
  release();
  assert.equal(await second, "ya29.shared");
  assert.equal(calls, 1);
});

/** Polls `done` on real time (the token endpoint is a real server). */
async function waitFor(done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(done(), "timed out waiting");
}
