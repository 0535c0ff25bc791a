// GCS credentials, chosen by the config: application default credentials (`auto`: the
// config's token or key, GOOGLE_APPLICATION_CREDENTIALS — a service account key or an
// external_account file —, gcloud's well-known file, then the metadata server), or one source
// named explicitly. The sources themselves live beside this file; this one re-exports them.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { ChainSupplier, type CredentialSource } from "../credentials/chain.ts";
import { parseJsonObject } from "../credentials/endpoint.ts";
import {
  CredentialError,
  type CredentialReport,
  type Env,
  type Expiring,
  processEnv,
  SourceSkipped,
} from "../credentials/types.ts";
import { checkExternalAccount, ExternalAccountTokenSource } from "./external_account.ts";
import { MetadataServerTokenSource } from "./metadata.ts";
import {
  checkServiceAccountKey,
  loadServiceAccountKey,
  ServiceAccountTokenSource,
} from "./service_account.ts";
import {
  type FetchingTokenOptions,
  type FetchingTokenSource,
  NoTokenSource,
  StaticTokenSource,
  type TokenSource,
} from "./token_source.ts";

export * from "./token_source.ts";
export * from "./service_account.ts";
export * from "./metadata.ts";
export * from "./external_account.ts";

/** The sources `credentials_source` may name. */
export type { GcsSourceName } from "../credentials/sources.ts";
import type { GcsSourceName } from "../credentials/sources.ts";

/** The order of the ADC chain. */
export const GCS_AUTO_CHAIN = [
  "static",
  "service_account_key",
  "GOOGLE_APPLICATION_CREDENTIALS",
  "gcloud",
  "metadata",
] as const;

/** The `[tiered_storage.gcs]` settings that choose a token source. */
export interface GcsCredentialsConfig {
  credentials_source: GcsSourceName;
  /** Path of the JSON key file (service_account). */
  service_account_key: string;
  /** The bearer token (static). */
  token: string;
  /** A credentials file (service account or external_account); `""`: GOOGLE_APPLICATION_CREDENTIALS. */
  credentials_file?: string;
  /** `""`: GCE_METADATA_HOST, else metadata.google.internal. */
  metadata_endpoint?: string;
}

/** Reads a credentials file and builds the source its `type` names. */
async function sourceFromFile(
  path: string,
  options: FetchingTokenOptions,
): Promise<FetchingTokenSource> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new CredentialError(
      "Auth",
      "credentials_file",
      `cannot read ${path}: ${(err as Error).message}`,
      {
        code: "CredentialsFileUnreadable",
      },
    );
  }
  const json = parseJsonObject(text);
  if (!json) {
    throw new CredentialError("Auth", "credentials_file", `${path} is not a JSON object`, {
      code: "BadCredentialsFile",
    });
  }
  switch (json.type) {
    case "service_account":
      return new ServiceAccountTokenSource(checkServiceAccountKey(json, path), options);
    case "external_account":
      return new ExternalAccountTokenSource(checkExternalAccount(json, path), options);
    default:
      throw new CredentialError(
        "Auth",
        "credentials_file",
        `${path}: type ${
          JSON.stringify(json.type)
        } is not supported (service_account or external_account)`,
        { code: "BadCredentialsFile" },
      );
  }
}

/** A chain link whose source is built on first use (reading its file then). */
function lazyLink(
  name: string,
  build: () => Promise<FetchingTokenSource>,
  detail: () => string,
): CredentialSource<string> {
  let built: Promise<FetchingTokenSource> | undefined;
  let source: FetchingTokenSource | undefined;
  return {
    name,
    detail: () => source ? `${detail()}: ${source.describe}` : detail(),
    secrets: () => source?.secrets() ?? [],
    async load(signal): Promise<Expiring<string>> {
      built ??= build().then((s) => (source = s), (err) => {
        built = undefined;
        throw err;
      });
      return await (await built).load(signal);
    },
  };
}

/** Application default credentials: the first link of the ADC chain that answers. */
export class AdcTokenSource implements TokenSource {
  readonly #chain: ChainSupplier<string>;

  constructor(config: GcsCredentialsConfig, options: FetchingTokenOptions & { env?: Env } = {}) {
    const env = options.env ?? processEnv;
    const home = env("HOME") ?? "/";
    const gcloud = join(
      env("CLOUDSDK_CONFIG") ?? join(home, ".config", "gcloud"),
      "application_default_credentials.json",
    );
    const fileLink = (name: string, path: () => string | undefined, unset: string) =>
      lazyLink(name, async () => {
        const p = path();
        if (!p) throw new SourceSkipped(unset);
        return await sourceFromFile(p, options);
      }, () => path() ?? "");
    const links: CredentialSource<string>[] = [
      {
        name: "static",
        detail: () => "token in the config",
        load: () =>
          config.token
            ? Promise.resolve({ value: config.token })
            : Promise.reject(new SourceSkipped("token is not set")),
      },
      lazyLink("service_account_key", async () => {
        if (!config.service_account_key) throw new SourceSkipped("service_account_key is not set");
        return new ServiceAccountTokenSource(
          await loadServiceAccountKey(config.service_account_key),
          options,
        );
      }, () => config.service_account_key),
      fileLink(
        "GOOGLE_APPLICATION_CREDENTIALS",
        () => config.credentials_file || env("GOOGLE_APPLICATION_CREDENTIALS"),
        "credentials_file and GOOGLE_APPLICATION_CREDENTIALS are not set",
      ),
      lazyLink("gcloud", async () => {
        try {
          await readFile(gcloud);
        } catch {
          throw new SourceSkipped(`${gcloud} does not exist`);
        }
        return await sourceFromFile(gcloud, options);
      }, () => gcloud),
      new MetadataServerTokenSource({
        ...options,
        endpoint: config.metadata_endpoint,
        optional: true,
      })
        .asSource(),
    ];
    this.#chain = new ChainSupplier<string>({
      chain: "the gcs application default credentials",
      sources: links,
      secretsOf: (t) => [t],
      clock: options.clock,
      observer: options.observer,
      rng: options.rng,
      refusalIntervalMs: options.refusalIntervalMs,
    });
  }

  get describe(): string {
    return this.#chain.describe;
  }
  token(options?: { signal?: AbortSignal }): Promise<string | undefined> {
    return this.#chain.get(options);
  }
  refused(token: string, options?: { signal?: AbortSignal }): Promise<boolean> {
    return this.#chain.refused(token, options);
  }
  secrets(): string[] {
    return this.#chain.secrets();
  }
  report(): CredentialReport {
    return this.#chain.report();
  }
  close(): void {
    this.#chain.close();
  }
}

/**
 * The token source a GCS config names.
 * @throws {Error} when the key file is missing or unreadable, or a static token is empty
 */
export async function tokenSourceFromConfig(
  config: GcsCredentialsConfig,
  options: FetchingTokenOptions & { metadataEndpoint?: string; env?: Env } = {},
): Promise<TokenSource> {
  const env = options.env ?? processEnv;
  switch (config.credentials_source) {
    case "none":
      return new NoTokenSource();
    case "static":
      if (!config.token) throw new Error('gcs: credentials_source = "static" needs a token');
      return new StaticTokenSource(config.token);
    case "metadata":
      return new MetadataServerTokenSource({
        ...options,
        endpoint: config.metadata_endpoint || options.metadataEndpoint,
      });
    case "service_account":
      if (!config.service_account_key) {
        throw new Error('gcs: credentials_source = "service_account" needs service_account_key');
      }
      return new ServiceAccountTokenSource(
        await loadServiceAccountKey(config.service_account_key),
        options,
      );
    case "external_account": {
      const path = config.credentials_file || env("GOOGLE_APPLICATION_CREDENTIALS");
      if (!path) {
        throw new Error(
          'gcs: credentials_source = "external_account" needs credentials_file or GOOGLE_APPLICATION_CREDENTIALS',
        );
      }
      return await sourceFromFile(path, options);
    }
    case "auto":
      return new AdcTokenSource(config, {
        ...options,
        env,
      });
  }
}
