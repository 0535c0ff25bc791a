// Each credential source against a loopback fixture of its documented protocol (IMDSv2, ECS/EKS,
// Entra ID workload identity and client secret, Azure managed identity, the GCE metadata server,
// Google STS for external accounts), the chains' order and skip reasons, and the Refresher's
// jittered retry and rate-limited refusal refresh.
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  type AwsCredentialSettings,
  awsCredentialSupplier,
} from "../../../providers/aws/credentials/chain.ts";
import { azureAuth } from "../../../providers/azure/credentials/chain.ts";
import { Refresher } from "../../../providers/credentials/refresher.ts";
import { CredentialError, envFrom } from "../../../providers/credentials/types.ts";
import { tokenSourceFromConfig } from "../../../providers/gcs/credentials.ts";
import { S3Store } from "../../../providers/s3/store.ts";
import { FakeClock } from "../../_fake_clock.ts";
import { systemClock } from "../../../src/base/clock.ts";
import { tempDir } from "../../_util.ts";
import {
  startAad,
  startContainerEndpoint,
  startGoogleIdentity,
  startImds,
} from "../../fixtures/identity.ts";

const fetchFn = (input: string, init: RequestInit) => fetch(input, init);
const creds = (n: number) => ({
  accessKeyId: `ASIAFIXTURE${n}`,
  secretAccessKey: `fixture-secret-${n}-${crypto.randomUUID()}`,
  sessionToken: `fixture-token-${n}-${crypto.randomUUID()}`,
  expiresAt: Date.now() + 3_600_000,
});

function aws(source: AwsCredentialSettings["source"], extra: Partial<AwsCredentialSettings> = {}) {
  return {
    source,
    accessKeyId: "",
    secretAccessKey: "",
    sessionToken: "",
    profile: "",
    sts: { endpoint: "http://127.0.0.1:9", region: "us-east-1" },
    imdsEndpoint: "",
    webIdentityTokenFile: "",
    webIdentityRoleArn: "",
    assumeRoleArn: "",
    assumeRoleSessionName: "",
    assumeRoleExternalId: "",
    durationSeconds: 3600,
    ...extra,
  };
}

Deno.test("imds: IMDSv2 token PUT with its TTL, the role, its credentials; a hop limit of 1 is named", async () => {
  let current = creds(1);
  let hops = 2;
  const imds = startImds({ credentials: () => current, hopLimit: () => hops });
  try {
    const supplier = awsCredentialSupplier(aws("imds", { imdsEndpoint: imds.url }), {
      env: envFrom({}),
      fetch: fetchFn,
      clock: new FakeClock(Date.now()),
    });
    assert.ok(supplier !== "none");
    assert.equal((await supplier.get()).accessKeyId, "ASIAFIXTURE1");
    const put = imds.requests.find((r) => r.method === "PUT")!;
    assert.equal(put.headers.get("x-aws-ec2-metadata-token-ttl-seconds"), "21600");
    const gets = imds.requests.filter((r) => r.method === "GET");
    assert.ok(gets.every((r) => imds.tokens.includes(r.headers.get("x-aws-ec2-metadata-token")!)));
    // A refusal refreshes once, with the cached session token.
    current = creds(2);
    assert.equal(await supplier.refused(await supplier.get()), true);
    assert.equal((await supplier.get()).accessKeyId, "ASIAFIXTURE2");
    assert.equal(imds.requests.filter((r) => r.method === "PUT").length, 1, "session token kept");
    supplier.close();

    hops = 1;
    // The token PUT's 1 s timeout runs on the real clock here.
    const auto = awsCredentialSupplier(aws("auto", { imdsEndpoint: imds.url }), {
      env: envFrom({ HOME: "/nonexistent" }),
      fetch: fetchFn,
      clock: systemClock,
    });
    assert.ok(auto !== "none");
    const err = await auto.get().catch((e) => e);
    assert.ok(err instanceof CredentialError);
    const steps = auto.report().steps;
    assert.deepEqual(steps.map((s) => `${s.source}:${s.outcome}`), [
      "static:skipped",
      "env:skipped",
      "profile:skipped",
      "web_identity:skipped",
      "container:skipped",
      "imds:skipped",
    ]);
    assert.match(steps.at(-1)!.reason, /hop limit of 1/);
    assert.match(err.message, /no source has credentials/);
  } finally {
    await imds.close();
  }
});

Deno.test("container: the full URI with the token file's Authorization; a wrong token is Auth", async () => {
  const tmp = await tempDir("tierd-ecs-");
  const current = creds(3);
  const endpoint = startContainerEndpoint({
    authToken: "pod-identity-token-abc",
    credentials: () => current,
  });
  try {
    const tokenFile = join(tmp.path, "token");
    await Deno.writeTextFile(tokenFile, "pod-identity-token-abc\n");
    const env = {
      AWS_CONTAINER_CREDENTIALS_FULL_URI: `${endpoint.url}/v1/credentials`,
      AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: tokenFile,
    };
    const ok = awsCredentialSupplier(aws("auto"), {
      env: envFrom({ HOME: tmp.path, ...env }),
      fetch: fetchFn,
      clock: new FakeClock(Date.now()),
    });
    assert.ok(ok !== "none");
    assert.equal((await ok.get()).sessionToken, current.sessionToken);
    assert.equal(ok.report().source, "container");
    await Deno.writeTextFile(tokenFile, "wrong");
    const bad = awsCredentialSupplier(aws("container"), {
      env: envFrom(env),
      fetch: fetchFn,
      clock: new FakeClock(Date.now()),
    });
    assert.ok(bad !== "none");
    const err = await bad.get().catch((e) => e);
    assert.ok(err instanceof CredentialError);
    assert.equal(err.kind, "Auth");
    assert.match(err.message, /credentials from container: .*401 AccessDeniedException/);
    // http to anything but loopback or the ECS/EKS agents is refused before any request.
    const far = awsCredentialSupplier(aws("container"), {
      env: envFrom({ AWS_CONTAINER_CREDENTIALS_FULL_URI: "http://example.com/creds" }),
      fetch: fetchFn,
      clock: new FakeClock(Date.now()),
    });
    assert.ok(far !== "none");
    assert.match(String(await far.get().catch((e) => e)), /must be https/);
  } finally {
    await endpoint.close();
    await tmp.cleanup();
  }
});

Deno.test("profile: credential_process runs and its JSON is read", async () => {
  const tmp = await tempDir("tierd-proc-");
  try {
    const script = join(tmp.path, "creds.sh");
    await Deno.writeTextFile(
      script,
      `#!/bin/sh\necho '{"Version": 1, "AccessKeyId": "AKIAPROC", "SecretAccessKey": "proc-secret-123", "Expiration": "2999-01-01T00:00:00Z"}'\n`,
    );
    await Deno.chmod(script, 0o755);
    await Deno.writeTextFile(
      join(tmp.path, "config"),
      `[profile p]\ncredential_process = ${script}\nregion = eu-west-3\n`,
    );
    const env = envFrom({
      HOME: tmp.path,
      AWS_CONFIG_FILE: join(tmp.path, "config"),
      AWS_PROFILE: "p",
    });
    const supplier = awsCredentialSupplier(aws("profile"), {
      env,
      fetch: fetchFn,
      clock: new FakeClock(Date.now()),
    });
    assert.ok(supplier !== "none");
    assert.equal((await supplier.get()).accessKeyId, "AKIAPROC");
    const { resolveRegion } = await import("../../../providers/aws/credentials/region.ts");
    assert.deepEqual((await resolveRegion("", "", env)).region, "eu-west-3");
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("azure: workload identity, client secret and managed identity tokens from the fixtures", async () => {
  const tmp = await tempDir("tierd-aad-");
  let n = 0;
  const aad = startAad({
    tenant: "tenant-1",
    clientId: "client-1",
    accept: (p) => p.assertion === "federated-jwt-xyz" || p.secret === "client-secret-xyz",
    token: () => ({ accessToken: `aad-access-token-${++n}`, expiresIn: 3600 }),
  });
  try {
    const file = join(tmp.path, "azure-token");
    await Deno.writeTextFile(file, "federated-jwt-xyz");
    const settings = {
      source: "auto" as const,
      sharedKey: "",
      sasToken: "",
      clientId: "",
      tenantId: "",
      clientSecret: "",
      federatedTokenFile: "",
      authorityHost: "",
      imdsEndpoint: aad.url,
    };
    const env = envFrom({
      AZURE_FEDERATED_TOKEN_FILE: file,
      AZURE_CLIENT_ID: "client-1",
      AZURE_TENANT_ID: "tenant-1",
      AZURE_AUTHORITY_HOST: aad.url,
    });
    const wi = azureAuth(settings, { env, clock: new FakeClock(Date.now()) });
    assert.equal(wi.kind, "bearer");
    if (wi.kind !== "bearer") return;
    assert.equal(await wi.tokens.token(), "aad-access-token-1");
    assert.equal(wi.tokens.report!().source, "workload_identity");
    assert.ok(wi.tokens.secrets().includes("federated-jwt-xyz"), "the assertion is scrubbed");

    const cs = azureAuth({
      ...settings,
      source: "client_secret",
      clientSecret: "client-secret-xyz",
    }, {
      env: envFrom({
        AZURE_CLIENT_ID: "client-1",
        AZURE_TENANT_ID: "tenant-1",
        AZURE_AUTHORITY_HOST: aad.url,
      }),
    });
    assert.ok(cs.kind === "bearer" && (await cs.tokens.token())!.startsWith("aad-access-token-"));

    const mi = azureAuth(settings, { env: envFrom({}) });
    assert.ok(mi.kind === "bearer");
    if (mi.kind !== "bearer") return;
    assert.ok((await mi.tokens.token())!.startsWith("aad-access-token-"));
    assert.deepEqual(mi.tokens.report!().steps.map((s) => `${s.source}:${s.outcome}`), [
      "sas:skipped",
      "shared_key:skipped",
      "workload_identity:skipped",
      "client_secret:skipped",
      "managed_identity:used",
    ]);
    // A SAS in the config wins and needs no token at all.
    assert.equal(azureAuth({ ...settings, sasToken: "sv=1&sig=x" }, { env }).kind, "sas");
  } finally {
    await aad.close();
    await tmp.cleanup();
  }
});

Deno.test("gcs: external_account exchanges the file's subject token at STS; auto finds the metadata server", async () => {
  const tmp = await tempDir("tierd-gcp-");
  let n = 0;
  const google = startGoogleIdentity({
    subject: "k8s-subject-token-123",
    token: () => ({ accessToken: `ya29.federated-${++n}`, expiresIn: 3600 }),
  });
  try {
    const subject = join(tmp.path, "subject.json");
    await Deno.writeTextFile(subject, JSON.stringify({ id_token: "k8s-subject-token-123" }));
    const file = join(tmp.path, "external.json");
    await Deno.writeTextFile(
      file,
      JSON.stringify({
        type: "external_account",
        audience:
          "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k8s",
        subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
        token_url: `${google.url}/v1/token`,
        credential_source: {
          file: subject,
          format: { type: "json", subject_token_field_name: "id_token" },
        },
      }),
    );
    const config = { credentials_source: "auto" as const, service_account_key: "", token: "" };
    const adc = await tokenSourceFromConfig(config, {
      env: envFrom({ HOME: tmp.path, GOOGLE_APPLICATION_CREDENTIALS: file }),
    });
    assert.equal(await adc.token(), "ya29.federated-1");
    assert.ok(adc.secrets().includes("k8s-subject-token-123"), "the subject token is scrubbed");
    assert.equal(adc.report!().source, "GOOGLE_APPLICATION_CREDENTIALS");
    const sts = google.requests.find((r) => r.path === "/v1/token")!;
    assert.equal(
      new URLSearchParams(sts.body).get("requested_token_type"),
      "urn:ietf:params:oauth:token-type:access_token",
    );

    const meta = await tokenSourceFromConfig({ ...config, metadata_endpoint: google.url }, {
      env: envFrom({ HOME: tmp.path }),
    });
    assert.match((await meta.token())!, /^ya29\.federated-/);
    assert.equal(meta.report!().source, "metadata");
    adc.close?.();
    meta.close?.();
  } finally {
    await google.close();
    await tmp.cleanup();
  }
});

Deno.test("refresher: a failed background refresh is retried with jitter while the old credential lasts; refusals are rate-limited", async () => {
  const clock = new FakeClock(1_000_000);
  let calls = 0;
  let fail = false;
  const refresher = new Refresher<string>({
    source: () => "test",
    clock,
    rng: () => 0.5,
    refusalIntervalMs: 10_000,
    fetch: () => {
      calls++;
      if (fail) return Promise.reject(new Error("endpoint down"));
      return Promise.resolve({ value: `v${calls}`, expiresAt: clock.now() + 100_000 });
    },
  });
  assert.equal(await refresher.get(), "v1");
  fail = true;
  clock.advance(90_000); // the scheduled refresh at 90 % fails
  await Promise.resolve();
  assert.equal(calls, 2);
  assert.equal(await refresher.get(), "v1", "the old one is still valid");
  fail = false;
  clock.advance(2_000); // the jittered retry
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(calls, 3);
  assert.equal(await refresher.get(), "v3");
  assert.equal(await refresher.refused("v3"), true);
  assert.equal(calls, 4);
  assert.equal(
    await refresher.refused("v4"),
    false,
    "a second refusal within 10 s is not refreshed",
  );
  assert.equal(calls, 4);
  refresher.close();
});

Deno.test("redaction: the key id is scrubbed like the secret, before the error snippet is cut", async () => {
  const keyId = "AKIAEXAMPLEKEYID0001";
  const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  // Not XML: the body is quoted as a 120-character snippet that cuts the secret in two.
  const body = "z".repeat(100) + `Credential=${keyId} ${secret}`;
  const store = new S3Store({
    endpoint: "http://127.0.0.1:9",
    region: "us-east-1",
    bucket: "b",
    urlStyle: "path",
    credentials: { accessKeyId: keyId, secretAccessKey: secret },
    fetch: () => Promise.resolve(new Response(body, { status: 403 })),
  });
  const err = await store.list("").catch((e) => e);
  assert.match(err.message, /Credential=\[redacted/, "scrubbed, then cut");
  for (const s of [keyId, secret, keyId.slice(0, 6), secret.slice(0, 6)]) {
    assert.ok(!err.message.includes(s), `the message shows ${s}`);
  }
  assert.match(err.message, /credentials from static/);
});
