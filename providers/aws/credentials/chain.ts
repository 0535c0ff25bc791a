// Builds the AWS credential supplier a config names. `auto` walks, in order: the config's own
// keys, the environment, the shared files' profile, web identity, container credentials, then
// EC2 IMDSv2 (not asked for a store that is not AWS, unless a metadata endpoint is named) — the
// first that is configured answers. An explicit source is a chain of one;
// `assume_role_arn` puts STS AssumeRole on top of whichever answered; `none` signs nothing.
import type { Clock } from "../../../src/base/clock.ts";
import type { FetchFn } from "../../http.ts";
import { secretRedactor } from "../../_redact.ts";
import type { Credentials } from "../../s3/sigv4.ts";
import { ChainSupplier, type CredentialSource, StaticSupplier } from "../../credentials/chain.ts";
import {
  CredentialError,
  type CredentialObserver,
  type CredentialSupplier,
  type Env,
  type Expiring,
  SourceSkipped,
} from "../../credentials/types.ts";
import type { AwsSourceContext } from "./context.ts";
import { EnvSource } from "./env.ts";
import { ProfileSource } from "./profile.ts";
import { WebIdentitySource } from "./web_identity.ts";
import { ContainerSource } from "./container.ts";
import { ImdsSource } from "./imds.ts";
import { AssumeRoleSource } from "./assume_role.ts";

export type { AwsSourceName } from "../../credentials/sources.ts";
import type { AwsSourceName } from "../../credentials/sources.ts";

/** The order of the auto chain. */
export const AWS_AUTO_CHAIN = [
  "static",
  "env",
  "profile",
  "web_identity",
  "container",
  "imds",
] as const;

/** What the AWS credentials come from. */
export interface AwsCredentialSettings {
  source: AwsSourceName;
  /** The config's own keys (`static`, and first in `auto` when set). */
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  /** `""`: AWS_PROFILE, else default. */
  profile: string;
  /** The STS endpoint and its signing region. */
  sts: { endpoint: string; region: string };
  /** `""`: AWS_EC2_METADATA_SERVICE_ENDPOINT, else 169.254.169.254. */
  imdsEndpoint: string;
  /**
   * Why `auto` must not ask the instance metadata service, if it must not: the store is not AWS
   * (on-premises MinIO and the like), and nothing names a metadata endpoint, so a request to
   * 169.254.169.254 would only leave the network for a cloud that is not there.
   */
  noImdsInAuto?: string;
  /** Overrides AWS_WEB_IDENTITY_TOKEN_FILE / AWS_ROLE_ARN when set. */
  webIdentityTokenFile: string;
  webIdentityRoleArn: string;
  /** Set: AssumeRole this role on top of the source. */
  assumeRoleArn: string;
  assumeRoleSessionName: string;
  assumeRoleExternalId: string;
  /** Lifetime asked of STS (AssumeRole, web identity), seconds, 900 and up. */
  durationSeconds: number;
}

/** What the sources run on. */
export interface AwsCredentialDeps {
  env: Env;
  fetch: FetchFn;
  clock: Clock;
  observer?: CredentialObserver;
  rng?: () => number;
  /** @default 10000 */
  refusalIntervalMs?: number;
}

const secretsOf = (c: Credentials) => [c.accessKeyId, c.secretAccessKey, c.sessionToken];

/** The config's own keys as a source: skipped when both are empty. */
class ConfigKeysSource implements CredentialSource<Credentials> {
  readonly name = "static";
  readonly #s: AwsCredentialSettings;
  constructor(s: AwsCredentialSettings) {
    this.#s = s;
  }
  detail(): string {
    return "access_key and secret_key in the config";
  }
  load(): Promise<Expiring<Credentials>> {
    const { accessKeyId, secretAccessKey, sessionToken } = this.#s;
    if (!accessKeyId && !secretAccessKey) {
      return Promise.reject(new SourceSkipped("access_key and secret_key are not set"));
    }
    if (!accessKeyId || !secretAccessKey) {
      return Promise.reject(
        new CredentialError(
          "Auth",
          this.name,
          `${accessKeyId ? "secret_key" : "access_key"} is not set`,
          {
            code: "IncompleteCredentials",
          },
        ),
      );
    }
    return Promise.resolve({
      value: { accessKeyId, secretAccessKey, sessionToken: sessionToken || undefined },
    });
  }
}

/**
 * The supplier for `settings`, or `"none"` for unsigned requests.
 * @throws {CredentialError} for `static` without both keys
 */
export function awsCredentialSupplier(
  settings: AwsCredentialSettings,
  deps: AwsCredentialDeps,
): CredentialSupplier<Credentials> | "none" {
  if (settings.source === "none") return "none";
  let supplier: CredentialSupplier<Credentials> | undefined;
  const redact = secretRedactor(() => supplier?.secrets() ?? []);
  const ctx: AwsSourceContext = { env: deps.env, fetch: deps.fetch, clock: deps.clock, redact };
  const make = (
    name: (typeof AWS_AUTO_CHAIN)[number],
    optional: boolean,
  ): CredentialSource<Credentials> => {
    switch (name) {
      case "static":
        return new ConfigKeysSource(settings);
      case "env":
        return new EnvSource(deps.env);
      case "profile":
        return new ProfileSource(ctx, {
          profile: settings.profile,
          sts: settings.sts,
          durationSeconds: settings.durationSeconds,
        });
      case "web_identity":
        return new WebIdentitySource(ctx, {
          tokenFile: settings.webIdentityTokenFile || undefined,
          roleArn: settings.webIdentityRoleArn || undefined,
          durationSeconds: settings.durationSeconds,
          sts: settings.sts,
        });
      case "container":
        return new ContainerSource(ctx);
      case "imds":
        if (optional && settings.noImdsInAuto) {
          const reason = settings.noImdsInAuto;
          return {
            name: "imds",
            load: () => Promise.reject(new SourceSkipped(reason)),
          };
        }
        return new ImdsSource(ctx, { endpoint: settings.imdsEndpoint || undefined, optional });
    }
  };
  const options = {
    secretsOf,
    clock: deps.clock,
    observer: deps.observer,
    rng: deps.rng,
    refusalIntervalMs: deps.refusalIntervalMs,
  };
  if (settings.source === "static" && !settings.assumeRoleArn) {
    if (!settings.accessKeyId || !settings.secretAccessKey) {
      throw new CredentialError("Auth", "static", "access_key and secret_key must both be set", {
        code: "IncompleteCredentials",
      });
    }
    supplier = new StaticSupplier("static", {
      accessKeyId: settings.accessKeyId,
      secretAccessKey: settings.secretAccessKey,
      sessionToken: settings.sessionToken || undefined,
    }, [settings.accessKeyId, settings.secretAccessKey, settings.sessionToken]);
    return supplier;
  }
  const sources = settings.source === "auto"
    ? AWS_AUTO_CHAIN.map((name) => make(name, true))
    : [make(settings.source, false)];
  const base = new ChainSupplier<Credentials>({
    ...options,
    chain: settings.source === "auto" ? "the aws auto chain" : settings.source,
    sources,
  });
  if (!settings.assumeRoleArn) return supplier = base;
  const role = new AssumeRoleSource(ctx, { supplier: base }, {
    roleArn: settings.assumeRoleArn,
    sessionName: settings.assumeRoleSessionName || undefined,
    externalId: settings.assumeRoleExternalId || undefined,
    durationSeconds: settings.durationSeconds,
    sts: settings.sts,
  });
  supplier = new LayeredSupplier(
    base,
    new ChainSupplier<Credentials>({
      ...options,
      chain: "assume_role",
      sources: [role],
    }),
  );
  return supplier;
}

/** AssumeRole's supplier with its base's chain in the report. */
class LayeredSupplier implements CredentialSupplier<Credentials> {
  constructor(
    readonly base: CredentialSupplier<Credentials>,
    readonly top: CredentialSupplier<Credentials>,
  ) {}
  get describe(): string {
    return this.top.describe;
  }
  get(options?: { signal?: AbortSignal }): Promise<Credentials> {
    return this.top.get(options);
  }
  refused(used: Credentials, options?: { signal?: AbortSignal }): Promise<boolean> {
    return this.top.refused(used, options);
  }
  secrets(): string[] {
    return [...new Set([...this.top.secrets(), ...this.base.secrets()])];
  }
  report() {
    const base = this.base.report();
    const top = this.top.report();
    return { source: top.source, steps: [...base.steps, ...top.steps], expiresAt: top.expiresAt };
  }
  close(): void {
    this.top.close();
    this.base.close();
  }
}
