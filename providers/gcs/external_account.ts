// Workload identity federation (`"type": "external_account"` credentials, GKE/AKS/EKS or any
// OIDC issuer): the subject token read from the configured file (text, or a field of a JSON
// file; re-read on every refresh), exchanged at Google's STS (`token_url`, RFC 8693 token
// exchange) for an access token, then — when `service_account_impersonation_url` is set —
// exchanged again for the service account's own token. The subject token is a secret.
import { readFile } from "node:fs/promises";
import { CredentialError } from "../credentials/types.ts";
import { parseJsonObject, str } from "../credentials/endpoint.ts";
import {
  type FetchedToken,
  type FetchingTokenOptions,
  FetchingTokenSource,
  GCS_SCOPE,
} from "./token_source.ts";

/** The fields of an external_account credentials file tierd uses. */
export interface ExternalAccountConfig {
  audience: string;
  subject_token_type: string;
  /** @default "https://sts.googleapis.com/v1/token" */
  token_url?: string;
  service_account_impersonation_url?: string;
  credential_source: {
    file: string;
    format?: { type?: "text" | "json"; subject_token_field_name?: string };
  };
}

const CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform";

/**
 * Checks the shape of a parsed external_account file.
 * @throws {CredentialError} naming the missing or unsupported field
 */
export function checkExternalAccount(
  value: Record<string, unknown>,
  where: string,
): ExternalAccountConfig {
  const fail = (why: string) =>
    new CredentialError("Auth", "external_account", `${where}: ${why}`, {
      code: "BadCredentialsFile",
    });
  for (const field of ["audience", "subject_token_type"]) {
    if (!str(value[field])) throw fail(`"${field}" is missing`);
  }
  const source = value.credential_source as Record<string, unknown> | undefined;
  if (!source || typeof source !== "object") throw fail(`"credential_source" is missing`);
  if (!str(source.file)) {
    throw fail(
      `only a file-sourced subject token is supported (credential_source.file)${
        source.url ? "; credential_source.url is not" : ""
      }`,
    );
  }
  const format = (source.format ?? {}) as Record<string, unknown>;
  if (format.type === "json" && !str(format.subject_token_field_name)) {
    throw fail(`credential_source.format.subject_token_field_name is missing`);
  }
  return value as unknown as ExternalAccountConfig;
}

/** Tokens through workload identity federation. */
export class ExternalAccountTokenSource extends FetchingTokenSource {
  readonly name = "external_account";
  readonly describe: string;
  readonly #c: ExternalAccountConfig;
  readonly #scope: string;
  #subject?: string;
  #stsToken?: string;

  constructor(
    config: ExternalAccountConfig,
    options: FetchingTokenOptions & { scope?: string } = {},
  ) {
    super(options);
    this.#c = config;
    this.#scope = options.scope ?? GCS_SCOPE;
    const target = config.service_account_impersonation_url
      ? /serviceAccounts\/([^:/]+)/.exec(config.service_account_impersonation_url)?.[1] ??
        "a service account"
      : undefined;
    this.describe = `external account ${config.audience}${
      target ? ` as ${target}` : ""
    } (subject token ${config.credential_source.file})`;
  }

  protected override extraSecrets(): string[] {
    return [this.#subject, this.#stsToken].filter((s): s is string => !!s);
  }

  async #subjectToken(): Promise<string> {
    const { file, format } = this.#c.credential_source;
    let text: string;
    try {
      text = (await readFile(file, "utf8")).trim();
    } catch (err) {
      throw new CredentialError(
        "Auth",
        this.name,
        `cannot read the subject token file ${file}: ${(err as Error).message}`,
        {
          code: "TokenFileUnreadable",
        },
      );
    }
    let token = text;
    if (format?.type === "json") {
      const field = format.subject_token_field_name!;
      token = str(parseJsonObject(text)?.[field]) ?? "";
      if (!token) {
        throw new CredentialError(
          "Auth",
          this.name,
          `the subject token file ${file} has no "${field}"`,
          {
            code: "TokenFileEmpty",
          },
        );
      }
    }
    if (!token) {
      throw new CredentialError("Auth", this.name, `the subject token file ${file} is empty`, {
        code: "TokenFileEmpty",
      });
    }
    this.#subject = token;
    return token;
  }

  protected async fetchToken(signal?: AbortSignal): Promise<FetchedToken> {
    const subject = await this.#subjectToken();
    const impersonate = this.#c.service_account_impersonation_url;
    const tokenUrl = this.#c.token_url ?? "https://sts.googleapis.com/v1/token";
    const form = new URLSearchParams({
      grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
      audience: this.#c.audience,
      scope: impersonate ? CLOUD_PLATFORM : this.#scope,
      requested_token_type: "urn:ietf:params:oauth:token-type:access_token",
      subject_token_type: this.#c.subject_token_type,
      subject_token: subject,
    });
    const sts = await this.exchange(`the STS token exchange at ${tokenUrl}`, {
      method: "POST",
      url: tokenUrl,
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form.toString(),
    }, signal);
    if (!impersonate) return sts;
    this.#stsToken = sts.accessToken;
    return await this.exchange(`service account impersonation at ${new URL(impersonate).origin}`, {
      method: "POST",
      url: impersonate,
      headers: { "content-type": "application/json", authorization: `Bearer ${sts.accessToken}` },
      body: JSON.stringify({ scope: [this.#scope], lifetime: "3600s" }),
    }, signal);
  }
}
