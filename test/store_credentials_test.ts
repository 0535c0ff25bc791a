// The AWS auto chain beside a store that is not AWS (on-premises MinIO and the like): without keys
// it must not send a request to the cloud metadata address, and says why in its report; with an
// AWS endpoint, or a metadata endpoint named, the metadata service is asked as before.
import assert from "node:assert/strict";
import { parseConfig } from "../src/config/load.ts";
import { s3Credentials } from "../src/store_credentials.ts";
import { envFrom } from "../providers/credentials/types.ts";

function s3Config(extra: string) {
  const text = `[agent]\ndata_dir = "/nowhere/broker"\nstate_dir = "/nowhere/state"\n` +
    `[tiered_storage]\nenabled = true\nbackend = "s3"\n` +
    `[tiered_storage.s3]\nbucket = "tierd-test"\nregion = "us-east-1"\n${extra}\n`;
  return parseConfig(text, "/nowhere/tierd.toml", {}).tiered_storage.s3;
}

/** Asks the chain for a credential, recording every URL it fetched (each is refused). */
async function ask(extra: string, env: Record<string, string> = {}) {
  const urls: string[] = [];
  const { credentials } = await s3Credentials(s3Config(extra), {
    env: envFrom(env),
    fetch: (input) => {
      urls.push(input);
      return Promise.reject(new TypeError("connection refused"));
    },
  });
  assert.ok(credentials !== "none");
  const err = await credentials.get().catch((e) => e);
  assert.ok(err instanceof Error, "no source has credentials here");
  return { urls, steps: credentials.report().steps };
}

Deno.test("aws auto chain: a store that is not AWS never makes it ask 169.254.169.254", async () => {
  const onPrem = await ask('endpoint = "http://minio.internal:9000"');
  assert.deepEqual(onPrem.urls, [], "no request at all: no source is configured");
  const imds = onPrem.steps.find((s) => s.source === "imds");
  assert.ok(imds, JSON.stringify(onPrem.steps));
  assert.equal(imds.outcome, "skipped");
  assert.match(imds.reason, /is not AWS: the instance metadata service is not asked/);

  // AWS itself: the metadata service is the last source asked.
  const aws = await ask("");
  assert.ok(aws.urls.some((u) => u.startsWith("http://169.254.169.254/")), aws.urls.join(" "));

  // Named on purpose: asked, there and only there.
  const named = await ask(
    'endpoint = "http://minio.internal:9000"\nimds_endpoint = "http://127.0.0.1:9"',
  );
  assert.ok(named.urls.length > 0 && named.urls.every((u) => u.startsWith("http://127.0.0.1:9/")));
  const fromEnv = await ask('endpoint = "http://minio.internal:9000"', {
    AWS_EC2_METADATA_SERVICE_ENDPOINT: "http://127.0.0.1:9",
  });
  assert.ok(fromEnv.urls.length > 0, "AWS_EC2_METADATA_SERVICE_ENDPOINT names one too");
});
