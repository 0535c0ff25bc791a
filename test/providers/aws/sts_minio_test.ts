// The AWS credential chain against a real MinIO: its STS AssumeRole, and
// AssumeRoleWithWebIdentity with MinIO pointed at an OpenID provider this test serves on
// loopback (MinIO fetches the discovery document and JWKS and checks the token's signature, its
// `aud` against the client id and its `policy` claim). Static, env, profile, web identity and
// assume_role each pass the boot probe and copy an object; temporary credentials are refreshed
// during a long multipart upload without a failed request; a credential MinIO revoked gets one
// refresh, then a clear Auth error naming the source. Skipped loudly without MinIO (failed in CI).
import assert from "node:assert/strict";
import { join } from "node:path";
import { awsCredentialSupplier } from "../../../providers/aws/credentials/chain.ts";
import { readCredentials } from "../../../providers/aws/credentials/sts.ts";
import { systemClock } from "../../../src/base/clock.ts";
import { envFrom } from "../../../providers/credentials/types.ts";
import { probeStore } from "../../../providers/probe.ts";
import { EMPTY_SHA256, sha256Hex, signRequest } from "../../../providers/s3/sigv4.ts";
import { S3Store } from "../../../providers/s3/store.ts";
import { StoreError } from "../../../providers/types.ts";
import { parseConfig } from "../../../src/config/mod.ts";
import { openStore } from "../../../src/store.ts";
import { FakeClock } from "../../_fake_clock.ts";
import { tempDir } from "../../_util.ts";
import { type FixtureCredentials, startImds, startOidc } from "../../fixtures/identity.ts";
import { findMinio, type MinioServer, startMinio } from "../../fixtures/minio.ts";
import { announceSkip } from "../../fixtures/_server.ts";

const CLIENT_ID = "tierd-sts-test";
const ROLE = "arn:minio:iam:::role/tierd"; // MinIO ignores an unknown role with a claim provider

const found = await findMinio();
if ("reason" in found) {
  if (Deno.env.get("CI") === "true") throw new Error(`MinIO is required in CI: ${found.reason}`);
  announceSkip(`AWS credential chain against MinIO: ${found.reason}`);
  Deno.test({ name: `aws credentials on minio (skipped: ${found.reason})`, ignore: true, fn() {} });
} else {
  Deno.test("aws credentials on minio: every source probes and copies; refresh and revocation", async (t) => {
    const oidc = await startOidc(CLIENT_ID);
    const minio = (await startMinio({
      env: {
        MINIO_IDENTITY_OPENID_CONFIG_URL: `${oidc.issuer}/.well-known/openid-configuration`,
        MINIO_IDENTITY_OPENID_CLIENT_ID: CLIENT_ID,
        MINIO_IDENTITY_OPENID_CLAIM_NAME: "policy",
      },
    }))!;
    const tmp = await tempDir("tierd-sts-");
    const config = (lines: string) =>
      parseConfig(
        `[agent]\ndata_dir = "d"\n[tiered_storage]\nenabled = true\nbackend = "s3"\n` +
          `[tiered_storage.s3]\nbucket = "${minio.bucket}"\nendpoint = "${minio.endpoint}"\n` +
          `url_style = "path"\nregion = "${minio.region}"\n${lines}`,
        join(tmp.path, "tierd.toml"),
        {},
      );
    /** Opens the configured store with `env`, probes it, copies and reads one object. */
    const probeAndCopy = async (lines: string, env: Record<string, string>, key: string) => {
      const opened = await openStore(config(lines), { env: envFrom({ HOME: tmp.path, ...env }) });
      try {
        const probe = await probeStore(opened.store, opened.prefix);
        assert.deepEqual(probe, { ok: true }, JSON.stringify(probe));
        await opened.store.put(key, new TextEncoder().encode(key));
        assert.equal(new TextDecoder().decode((await opened.store.get(key)).bytes), key);
        return opened.credentials!();
      } finally {
        await opened.store.close?.();
      }
    };
    const root = { AWS_ACCESS_KEY_ID: minio.accessKey, AWS_SECRET_ACCESS_KEY: minio.secretKey };
    try {
      await t.step("static: the config's keys", async () => {
        const report = await probeAndCopy(
          `credentials_source = "static"\naccess_key = "${minio.accessKey}"\nsecret_key = "${minio.secretKey}"\n`,
          {},
          "static/o",
        );
        assert.equal(report.source, "static");
      });

      await t.step(
        "env: auto skips the config's empty keys and takes AWS_ACCESS_KEY_ID",
        async () => {
          const report = await probeAndCopy("", root, "env/o");
          assert.equal(report.source, "env");
          assert.deepEqual(report.steps.map((s) => [s.source, s.outcome]), [["static", "skipped"], [
            "env",
            "used",
          ]]);
          assert.match(report.steps[0].reason, /access_key and secret_key are not set/);
        },
      );

      await t.step("profile: a named profile of the shared credentials file", async () => {
        const file = join(tmp.path, "credentials");
        await Deno.writeTextFile(
          file,
          `[default]\naws_access_key_id = nope\naws_secret_access_key = nope\n\n[minio]\n` +
            `aws_access_key_id = ${minio.accessKey}\naws_secret_access_key = ${minio.secretKey}\n`,
        );
        const report = await probeAndCopy(`profile = "minio"\n`, {
          AWS_SHARED_CREDENTIALS_FILE: file,
          AWS_CONFIG_FILE: join(tmp.path, "absent-config"),
        }, "profile/o");
        assert.equal(report.source, "profile");
        assert.match(report.steps.at(-1)!.reason, /profile minio/);
      });

      await t.step(
        "web identity: MinIO checks the token against the loopback OpenID provider",
        async () => {
          const tokenFile = join(tmp.path, "token");
          await Deno.writeTextFile(tokenFile, await oidc.sign({ policy: "readwrite" }));
          const report = await probeAndCopy("", {
            AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile,
            AWS_ROLE_ARN: ROLE,
          }, "web/o");
          assert.equal(report.source, "web_identity");
          assert.deepEqual(report.steps.map((s) => `${s.source}:${s.outcome}`), [
            "static:skipped",
            "env:skipped",
            "profile:skipped",
            "web_identity:used",
          ]);
          assert.ok(report.expiresAt! > Date.now(), "temporary credentials expire");
          assert.ok(
            oidc.requests.some((r) => r.path === "/jwks"),
            "MinIO fetched the JWKS to check the token",
          );
        },
      );

      await t.step(
        "web identity: a token signed by another key is refused, naming the source",
        async () => {
          const other = await startOidc(CLIENT_ID);
          const tokenFile = join(tmp.path, "forged");
          const forged = await other.sign({ policy: "readwrite" });
          await Deno.writeTextFile(tokenFile, forged);
          await other.close();
          const opened = await openStore(config(`credentials_source = "web_identity"\n`), {
            env: envFrom({
              HOME: tmp.path,
              AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile,
              AWS_ROLE_ARN: ROLE,
            }),
          });
          const probe = await probeStore(opened.store, opened.prefix);
          assert.equal(probe.ok, false);
          if (!probe.ok) {
            assert.match(
              probe.reason,
              /credentials from web_identity: STS AssumeRoleWithWebIdentity refused/,
            );
            assert.ok(!probe.reason.includes(forged), "the token is never shown");
          }
          await opened.store.close?.();
        },
      );

      await t.step(
        "assume_role on top of env: STS AssumeRole signed with the root keys",
        async () => {
          const report = await probeAndCopy(`assume_role_arn = "${ROLE}"\n`, root, "assume/o");
          assert.equal(report.source, "assume_role");
          assert.deepEqual(report.steps.map((s) => `${s.source}:${s.outcome}`), [
            "static:skipped",
            "env:used",
            "assume_role:used",
          ]);
        },
      );

      await t.step(
        "15-minute credentials are refreshed at 90 % during a long upload, no request fails",
        async () => {
          const clock = new FakeClock(Date.now());
          const issued: string[] = [];
          const supplier = awsCredentialSupplier({
            source: "env",
            accessKeyId: "",
            secretAccessKey: "",
            sessionToken: "",
            profile: "",
            sts: { endpoint: minio.endpoint, region: minio.region },
            imdsEndpoint: "",
            webIdentityTokenFile: "",
            webIdentityRoleArn: "",
            assumeRoleArn: ROLE,
            assumeRoleSessionName: "",
            assumeRoleExternalId: "",
            durationSeconds: 900,
          }, {
            env: envFrom(root),
            fetch: (input, init) => fetch(input, init),
            clock,
            observer: {
              expiry: (source) => void (source === "assume_role" && issued.push(source)),
            },
          });
          assert.notEqual(supplier, "none");
          if (supplier === "none") return;
          const store = new S3Store({
            endpoint: minio.endpoint,
            region: minio.region,
            bucket: minio.bucket,
            urlStyle: "path",
            credentials: supplier,
          });
          const part = new Uint8Array(5 * 1024 * 1024).fill(7);
          const id = await store.createMultipart("long/o");
          const first = (await supplier.get()).accessKeyId;
          const parts = [await store.putPart("long/o", id, 1, part)];
          clock.advance(811_000); // past 90 % of 900 s: the background refresh runs
          for (let i = 0; i < 100 && issued.length < 2; i++) {
            await new Promise((r) => setTimeout(r, 20));
          }
          assert.equal(issued.length, 2, "one scheduled refresh of the assumed role");
          const second = (await supplier.get()).accessKeyId;
          assert.notEqual(second, first, "new temporary credentials");
          parts.push(await store.putPart("long/o", id, 2, part));
          parts.push(await store.putPart("long/o", id, 3, part.subarray(0, 10)));
          assert.equal((await store.completeMultipart("long/o", id, parts)).status, "Created");
          assert.equal((await store.head("long/o")).size, 2 * part.length + 10);
          await store.close();
        },
      );

      await t.step("revoked: one refresh from IMDS, then an Auth error naming imds", async () => {
        const creds = await revocableCredentials(minio);
        const imds = startImds({ credentials: () => creds });
        const opened = await openStore(
          config(`credentials_source = "imds"\nimds_endpoint = "${imds.url}"\n`),
          {
            env: envFrom({ HOME: tmp.path }),
          },
        );
        try {
          await opened.store.put("revoked/o", new Uint8Array([1]));
          const credentialGets = () =>
            imds.requests.filter((r) => r.path.endsWith("/security-credentials/tierd-role")).length;
          assert.equal(credentialGets(), 1);
          await revoke(minio, creds);
          const err = await opened.store.put("revoked/p", new Uint8Array([1])).catch((e) => e);
          assert.ok(err instanceof StoreError, String(err));
          assert.equal(err.kind, "Auth");
          assert.match(err.message, /credentials from imds/);
          assert.equal(credentialGets(), 2, "exactly one out-of-band refresh");
          for (const secret of [creds.accessKeyId, creds.secretAccessKey, creds.sessionToken!]) {
            assert.ok(!err.message.includes(secret), "no credential in the message");
          }
        } finally {
          await opened.store.close?.();
          await imds.close();
        }
      });
    } finally {
      await minio.stop();
      await oidc.close();
      await tmp.cleanup();
    }
  });
}

/** Root's temporary credentials from MinIO's AssumeRole, revocable by their TokenRevokeType. */
async function revocableCredentials(minio: MinioServer): Promise<FixtureCredentials> {
  const body =
    "Action=AssumeRole&Version=2011-06-15&DurationSeconds=900&TokenRevokeType=tierd-test";
  const url = new URL(minio.endpoint);
  const signed = await signRequest({
    method: "POST",
    protocol: url.protocol,
    host: url.host,
    path: "/",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
    region: minio.region,
    service: "sts",
    now: new Date(systemClock.now()),
    payloadHash: await sha256Hex(body),
  });
  const response = await fetch(signed.url, { method: "POST", headers: signed.headers, body });
  const got = readCredentials(
    { source: "test", redact: (t) => t },
    "AssumeRole",
    response.status,
    await response.text(),
  );
  return { ...got.value, expiresAt: got.expiresAt! };
}

/** MinIO's admin API: the credentials revoke every token of their own TokenRevokeType. */
async function revoke(minio: MinioServer, creds: FixtureCredentials): Promise<void> {
  const url = new URL(minio.endpoint);
  const signed = await signRequest({
    method: "POST",
    protocol: url.protocol,
    host: url.host,
    path: "/minio/admin/v3/revoke-tokens/builtin",
    credentials: creds,
    region: minio.region,
    now: new Date(systemClock.now()),
    payloadHash: EMPTY_SHA256,
  });
  const response = await fetch(signed.url, { method: "POST", headers: signed.headers });
  assert.equal(response.status, 204, `revoke-tokens: ${response.status} ${await response.text()}`);
}
