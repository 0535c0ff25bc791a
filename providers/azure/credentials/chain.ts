// How the Azure store authorizes, chosen by the config. `auto`: a SAS token or the shared key
// when the config has one; else Entra ID bearer tokens from the first source that is
// configured — workload identity (AZURE_FEDERATED_TOKEN_FILE + AZURE_CLIENT_ID +
// AZURE_TENANT_ID), a client secret (AZURE_CLIENT_SECRET + the same ids), then the managed
// identity of the instance metadata service. An explicit source is a chain of one.
import { ChainSupplier, type CredentialSource } from "../../credentials/chain.ts";
import {
  CredentialError,
  type CredentialReport,
  type Env,
  SourceSkipped,
} from "../../credentials/types.ts";
import type { FetchingTokenOptions, TokenSource } from "../../credentials/tokens.ts";
import { AadTokenSource } from "./aad.ts";
import { ManagedIdentityTokenSource } from "./managed_identity.ts";

/** The sources `credentials_source` may name. */
export type { AzureSourceName } from "../../credentials/sources.ts";
import type { AzureSourceName } from "../../credentials/sources.ts";

/** The order of the auto chain. */
export const AZURE_AUTO_CHAIN = [
  "sas",
  "shared_key",
  "workload_identity",
  "client_secret",
  "managed_identity",
] as const;

/** The `[tiered_storage.azure]` settings that choose the authorization. */
export interface AzureCredentialSettings {
  source: AzureSourceName;
  sharedKey: string;
  sasToken: string;
  /** `""`: AZURE_CLIENT_ID. */
  clientId: string;
  /** `""`: AZURE_TENANT_ID. */
  tenantId: string;
  /** `""`: AZURE_CLIENT_SECRET. */
  clientSecret: string;
  /** `""`: AZURE_FEDERATED_TOKEN_FILE. */
  federatedTokenFile: string;
  /** `""`: AZURE_AUTHORITY_HOST, else login.microsoftonline.com. */
  authorityHost: string;
  /** `""`: 169.254.169.254. */
  imdsEndpoint: string;
}

/** How requests are authorized: a SAS, the shared key, or bearer tokens. */
export type AzureAuth =
  | { kind: "sas"; sasToken: string }
  | { kind: "shared-key"; sharedKey: string }
  | { kind: "bearer"; tokens: TokenSource };

/**
 * The authorization `settings` name.
 * @throws {CredentialError} naming the source when it is explicit and not configured
 */
export function azureAuth(
  settings: AzureCredentialSettings,
  options: FetchingTokenOptions & { env: Env },
): AzureAuth {
  const { env } = options;
  const sas = settings.sasToken.trim();
  const key = settings.sharedKey.trim();
  const need = (source: string, what: string): never => {
    throw new CredentialError("Auth", source, `${what} is not set`, { code: "NotConfigured" });
  };
  if (settings.source === "sas" || (settings.source === "auto" && sas)) {
    return { kind: "sas", sasToken: sas || need("sas", "sas_token (env TIERD_AZURE_SAS)") };
  }
  if (settings.source === "shared_key" || (settings.source === "auto" && key)) {
    return {
      kind: "shared-key",
      sharedKey: key || need("shared_key", "shared_key (env TIERD_AZURE_KEY)"),
    };
  }
  const clientId = () => settings.clientId || env("AZURE_CLIENT_ID");
  const tenantId = () => settings.tenantId || env("AZURE_TENANT_ID");
  const authorityHost = settings.authorityHost || env("AZURE_AUTHORITY_HOST");
  const app = (source: string) => {
    const c = clientId(), t = tenantId();
    if (!c || !t) {
      throw new CredentialError(
        "Auth",
        source,
        `${!c ? "client_id (AZURE_CLIENT_ID)" : "tenant_id (AZURE_TENANT_ID)"} is not set`,
        {
          code: "IncompleteCredentials",
        },
      );
    }
    return { clientId: c, tenantId: t, authorityHost };
  };
  const built = new Map<string, TokenSource & { asSource(): CredentialSource<string> }>();
  const link = (
    name: string,
    configured: () => string | undefined,
    build: () => TokenSource & { asSource(): CredentialSource<string> },
  ): CredentialSource<string> => ({
    name,
    detail: () => built.get(name)?.describe ?? "",
    secrets: () => built.get(name)?.secrets() ?? [],
    load: (signal) => {
      const why = configured();
      if (why) return Promise.reject(new SourceSkipped(why));
      let source = built.get(name);
      if (!source) built.set(name, source = build());
      return source.asSource().load(signal);
    },
  });
  const federated = () => settings.federatedTokenFile || env("AZURE_FEDERATED_TOKEN_FILE");
  const secret = () => settings.clientSecret || env("AZURE_CLIENT_SECRET");
  const links: Record<
    "workload_identity" | "client_secret" | "managed_identity",
    (optional: boolean) => CredentialSource<string>
  > = {
    workload_identity: () =>
      link(
        "workload_identity",
        () => federated() ? undefined : "AZURE_FEDERATED_TOKEN_FILE is not set",
        () =>
          new AadTokenSource(
            app("workload_identity"),
            { federatedTokenFile: federated()! },
            options,
          ),
      ),
    client_secret: () =>
      link(
        "client_secret",
        () => secret() ? undefined : "client_secret (AZURE_CLIENT_SECRET) is not set",
        () => new AadTokenSource(app("client_secret"), { clientSecret: secret()! }, options),
      ),
    managed_identity: (optional) =>
      link("managed_identity", () => undefined, () =>
        new ManagedIdentityTokenSource({
          ...options,
          endpoint: settings.imdsEndpoint || undefined,
          clientId: clientId(),
          optional,
        })),
  };
  const sources = settings.source === "auto"
    ? [
      skipped("sas", "sas_token is not set"),
      skipped("shared_key", "shared_key is not set"),
      links.workload_identity(true),
      links.client_secret(true),
      links.managed_identity(true),
    ]
    : [links[settings.source](false)];
  const chain = new ChainSupplier<string>({
    chain: settings.source === "auto" ? "the azure auto chain" : settings.source,
    sources,
    secretsOf: (t) => [t],
    clock: options.clock,
    observer: options.observer,
    rng: options.rng,
    refusalIntervalMs: options.refusalIntervalMs,
  });
  const tokens: TokenSource = {
    get describe() {
      return chain.describe;
    },
    token: (o) => chain.get(o),
    refused: (t, o) => chain.refused(t, o),
    secrets: () => [...chain.secrets(), ...(settings.clientSecret ? [settings.clientSecret] : [])],
    report: (): CredentialReport => chain.report(),
    close: () => chain.close(),
  };
  return { kind: "bearer", tokens };
}

/** A link that is never configured (already decided above), kept for the report. */
function skipped(name: string, why: string): CredentialSource<string> {
  return { name, load: () => Promise.reject(new SourceSkipped(why)) };
}
