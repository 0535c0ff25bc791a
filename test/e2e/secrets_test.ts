// Secrets under failure, tried as an attacker would: the agent's S3 credentials come from the
// container credentials endpoint (temporary key id, secret, session token, and the endpoint's
// own authorization token), the store is a hostile proxy that passes the boot probe and then
// answers every write with a 403 echoing the Authorization header and the session token (one
// cut mid-secret by the 120-character snippet). Every output path — log lines and stderr of
// `tierd probe`, `tierd run` and `tierd run --once`, `tierd config show`, the API's error bodies,
// the admin pass report, `/metrics`, the status page — is grepped for every secret.
import assert from "node:assert/strict";
import { join } from "node:path";
import { generatePartition } from "../../src/format/generate.ts";
import { freePort } from "../fixtures/_server.ts";
import { ROOT, spawnTierd } from "../fixtures/_agent.ts";
import { startContainerEndpoint } from "../fixtures/identity.ts";
import { tempDir } from "../_util.ts";

const KEY_ID = "ASIATIERDLEAK" + crypto.randomUUID().replace(/-/g, "").slice(0, 8).toUpperCase();
const SECRET = "leak-secret-" + crypto.randomUUID();
const SESSION = "leak-session-" + crypto.randomUUID() + crypto.randomUUID();
const AUTH_TOKEN = "leak-ecs-auth-" + crypto.randomUUID();
const API_TOKEN = "leak-api-token-" + crypto.randomUUID();

function hostileS3(): { url: string; close(): Promise<void> } {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    await req.arrayBuffer();
    const url = new URL(req.url);
    if (req.method === "GET" && url.searchParams.get("list-type") === "2") {
      return new Response(
        `<?xml version="1.0"?><ListBucketResult><Name>b</Name><IsTruncated>false</IsTruncated></ListBucketResult>`,
      );
    }
    // Echo what an attacker-controlled proxy saw, with the session token cut by the snippet.
    const echo = `${req.headers.get("authorization")} token=${
      req.headers.get("x-amz-security-token")
    }`;
    const pad = "x".repeat(Math.max(0, 100 - KEY_ID.length));
    return new Response(
      `<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>denied ${echo}</Message></Error>` +
        (req.method === "PUT" ? "" : ""),
      { status: 403, headers: { "x-amz-request-id": `${pad}${SESSION}` } },
    );
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() };
}

function malformedS3(): { url: string; close(): Promise<void> } {
  // A 200 LIST whose body is not XML and quotes the key id and secret right where it is cut.
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    await req.arrayBuffer();
    return new Response(`${"y".repeat(110)}${KEY_ID}${SECRET} not xml`, { status: 200 });
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() };
}

function assertClean(where: string, text: string): void {
  for (
    const [name, secret] of [
      ["access key id", KEY_ID],
      ["secret", SECRET],
      ["session token", SESSION],
      ["container auth token", AUTH_TOKEN],
      ["api token", API_TOKEN],
    ]
  ) {
    assert.ok(!text.includes(secret), `${where} shows the ${name}`);
    // No prefix of 8 characters or more either (a cut secret).
    assert.ok(!text.includes(secret.slice(0, 12)), `${where} shows the start of the ${name}`);
  }
}

Deno.test("secrets: no output path shows a credential, a token or a key id under failure", async () => {
  const tmp = await tempDir("tierd-secrets-");
  const ecs = startContainerEndpoint({
    authToken: AUTH_TOKEN,
    credentials: () => ({
      accessKeyId: KEY_ID,
      secretAccessKey: SECRET,
      sessionToken: SESSION,
      expiresAt: Date.now() + 3_600_000,
    }),
  });
  const s3 = hostileS3();
  const bad = malformedS3();
  try {
    await generatePartition({
      format: "iggy-0.9",
      dataDir: join(tmp.path, "broker"),
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 2000,
      segmentSize: 64 * 1024,
      seed: 3,
    });
    await Deno.writeTextFile(join(tmp.path, "auth-token"), AUTH_TOKEN);
    const port = freePort();
    const config = (endpoint: string) => `
[agent]
data_dir = "${tmp.path}/broker"
state_dir = "${tmp.path}/state"
listen = "127.0.0.1:${port}"
seal_quiescence = "0 s"
api_token = "${API_TOKEN}"
[tiered_storage]
enabled = true
backend = "s3"
segment_upload_timeout = "5 s"
upload_loop_backoff_max = "200 ms"
[tiered_storage.s3]
bucket = "bkt"
region = "us-east-1"
endpoint = "${endpoint}"
url_style = "path"
credentials_source = "container"
[[topic]]
stream = 0
topic = 0
`;
    const file = join(tmp.path, "tierd.toml");
    const env = {
      AWS_CONTAINER_CREDENTIALS_FULL_URI: `${ecs.url}/creds`,
      AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: join(tmp.path, "auth-token"),
    };
    const run = async (args: string[]) => {
      const p = spawnTierd(args, env);
      await p.status;
      return p.output();
    };

    await Deno.writeTextFile(file, config(bad.url));
    const probe = await run(["probe", "--config", file]);
    assert.match(probe, /probe failed/);
    assertClean("tierd probe against a malformed answer", probe);

    await Deno.writeTextFile(file, config(s3.url));
    const probeOk = await run(["probe", "--config", file]);
    assert.match(probeOk, /credentials: container/);
    assertClean("tierd probe", probeOk);
    const once = await run(["run", "--once", "--config", file]);
    assert.match(once, /AccessDenied/);
    assertClean("tierd run --once", once);
    const show = await run(["config", "show", "--config", file]);
    assertClean("tierd config show", show);

    const agent = spawnTierd(["run", "--config", file], env);
    try {
      await agent.waitFor((l) => l.msg === "http api listening", 30_000);
      const base = `http://127.0.0.1:${port}`;
      const admin = await fetch(`${base}/v1/admin/pass`, {
        method: "POST",
        headers: { authorization: `Bearer ${API_TOKEN}` },
      });
      const report = await admin.text();
      assert.equal(admin.status, 200, report);
      assert.match(report, /AccessDenied/, "the report carries the store's refusal");
      assertClean("the admin pass report", report);
      for (
        const path of [
          "/metrics",
          "/",
          "/v1/partitions",
          "/v1/streams/0/topics/0/partitions/0/records?offset=999999999",
        ]
      ) {
        const response = await fetch(base + path);
        assertClean(path, await response.text());
      }
      const metrics = await (await fetch(`${base}/metrics`)).text();
      assert.match(metrics, /tierd_credentials_expiry_seconds\{source="container"\} \d+/);
    } finally {
      agent.kill("SIGTERM");
      await agent.status;
    }
    assertClean("the agent's log lines and stderr", agent.output());
    assert.ok(ROOT);
  } finally {
    await s3.close();
    await bad.close();
    await ecs.close();
    await tmp.cleanup();
  }
});
