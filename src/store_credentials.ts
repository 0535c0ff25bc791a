// Turns a config's credential keys into what the stores take: the AWS supplier (with the region
// resolved and the STS endpoint chosen), the GCS token source, the Azure authorization. Each
// source's names and order live beside its provider; this file only maps keys onto them.
import { awsCredentialSupplier } from "../providers/aws/credentials/chain.ts";
import { resolveRegion } from "../providers/aws/credentials/region.ts";
import { awsStsEndpoint } from "../providers/aws/credentials/sts.ts";
import { type AzureAuth, azureAuth } from "../providers/azure/credentials/chain.ts";
import { type Clock, systemClock } from "./base/clock.ts";
import type {
  CredentialObserver,
  CredentialSupplier,
  Env,
} from "../providers/credentials/types.ts";
import { processEnv } from "../providers/credentials/types.ts";
import { tokenSourceFromConfig } from "../providers/gcs/credentials.ts";
import type { TokenSource } from "../providers/credentials/tokens.ts";
import type { FetchFn } from "../providers/http.ts";
import { isAwsHost } from "../providers/s3/requests.ts";
import type { Credentials } from "../providers/s3/sigv4.ts";
import type { AzureConfig, GcsConfig, S3Config } from "./config/schema.ts";

/** What credential sources run on; tests replace any of it. */
export interface CredentialDeps {
  /** @default the process environment */
  env?: Env;
  /** @default globalThis.fetch */
  fetch?: FetchFn;
  /** @default systemClock */
  clock?: Clock;
  /** Reports each source's expiry (`tierd_credentials_expiry_seconds`). */
  observer?: CredentialObserver;
}

/** The S3 credentials and the region, with where the region came from. */
export interface S3Credentials {
  credentials: CredentialSupplier<Credentials> | "none";
  region: string;
  regionFrom: string;
}

/** The AWS credentials and region an `[tiered_storage.s3]` table names. */
export async function s3Credentials(
  s3: S3Config,
  deps: CredentialDeps = {},
): Promise<S3Credentials> {
  const env = deps.env ?? processEnv;
  const { region, from } = await resolveRegion(s3.region, s3.profile, env);
  const endpointIsAws = s3.endpoint === "" || isAwsHost(new URL(s3.endpoint).hostname);
  const stsEndpoint = s3.sts_endpoint || (endpointIsAws ? awsStsEndpoint(region) : s3.endpoint);
  const credentials = awsCredentialSupplier({
    source: s3.credentials_source,
    accessKeyId: s3.access_key,
    secretAccessKey: s3.secret_key,
    sessionToken: s3.session_token,
    profile: s3.profile,
    sts: { endpoint: stsEndpoint, region },
    imdsEndpoint: s3.imds_endpoint,
    noImdsInAuto: endpointIsAws || s3.imds_endpoint !== "" ||
        env("AWS_EC2_METADATA_SERVICE_ENDPOINT") !== undefined
      ? undefined
      : `the endpoint ${s3.endpoint} is not AWS: the instance metadata service is not asked ` +
        '(name it with imds_endpoint, or set credentials_source = "imds")',
    webIdentityTokenFile: s3.web_identity_token_file,
    webIdentityRoleArn: s3.web_identity_role_arn,
    assumeRoleArn: s3.assume_role_arn,
    assumeRoleSessionName: s3.assume_role_session_name,
    assumeRoleExternalId: s3.assume_role_external_id,
    durationSeconds: Math.round(s3.credentials_duration / 1000),
  }, {
    env,
    fetch: deps.fetch ?? ((input, init) => fetch(input, init)),
    clock: deps.clock ?? systemClock,
    observer: deps.observer,
  });
  return { credentials, region, regionFrom: from };
}

/** The token source a `[tiered_storage.gcs]` table names. */
export function gcsTokens(gcs: GcsConfig, deps: CredentialDeps = {}): Promise<TokenSource> {
  return tokenSourceFromConfig(gcs, {
    env: deps.env,
    fetch: deps.fetch,
    clock: deps.clock,
    observer: deps.observer,
  });
}

/** The authorization an `[tiered_storage.azure]` table names. */
export function azureCredentials(az: AzureConfig, deps: CredentialDeps = {}): AzureAuth {
  return azureAuth({
    source: az.credentials_source,
    sharedKey: az.shared_key,
    sasToken: az.sas_token,
    clientId: az.client_id,
    tenantId: az.tenant_id,
    clientSecret: az.client_secret,
    federatedTokenFile: az.federated_token_file,
    authorityHost: az.authority_host,
    imdsEndpoint: az.imds_endpoint,
  }, {
    env: deps.env ?? processEnv,
    fetch: deps.fetch,
    clock: deps.clock,
    observer: deps.observer,
  });
}
