// Microsoft Entra ID (AAD) tokens for Azure Storage from an app registration: workload identity
// (AKS: the federated token in AZURE_FEDERATED_TOKEN_FILE, re-read on every refresh, sent as a
// client assertion) or a client secret — both the client-credentials grant at
// `{authority}/{tenant}/oauth2/v2.0/token` with scope `https://storage.azure.com/.default`.
import { readFile } from "node:fs/promises";
import { CredentialError } from "../../credentials/types.ts";
import {
  type FetchedToken,
  type FetchingTokenOptions,
  FetchingTokenSource,
} from "../../credentials/tokens.ts";

/** The scope of Azure Storage tokens. */
export const STORAGE_SCOPE = "https://storage.azure.com/.default";
/** The public cloud's authority (AZURE_AUTHORITY_HOST overrides it). */
export const AUTHORITY_HOST = "https://login.microsoftonline.com";

/** The app registration a token is asked for. */
export interface AppRegistration {
  tenantId: string;
  clientId: string;
  /** @default https://login.microsoftonline.com */
  authorityHost?: string;
}

/** How the app proves itself. */
export type ClientProof = { federatedTokenFile: string } | { clientSecret: string };

/** Tokens by the client-credentials grant: `workload_identity` or `client_secret`. */
export class AadTokenSource extends FetchingTokenSource {
  readonly name: "workload_identity" | "client_secret";
  readonly describe: string;
  readonly #app: AppRegistration;
  readonly #proof: ClientProof;
  #assertion?: string;

  constructor(app: AppRegistration, proof: ClientProof, options: FetchingTokenOptions = {}) {
    super(options);
    this.#app = app;
    this.#proof = proof;
    this.name = "federatedTokenFile" in proof ? "workload_identity" : "client_secret";
    this.describe = "federatedTokenFile" in proof
      ? `workload identity of client ${app.clientId} in tenant ${app.tenantId} (token ${proof.federatedTokenFile})`
      : `client secret of client ${app.clientId} in tenant ${app.tenantId}`;
  }

  /** The token endpoint. */
  get tokenUrl(): string {
    const host = (this.#app.authorityHost || AUTHORITY_HOST).replace(/\/+$/, "");
    return `${host}/${encodeURIComponent(this.#app.tenantId)}/oauth2/v2.0/token`;
  }

  protected override extraSecrets(): string[] {
    const out = this.#assertion ? [this.#assertion] : [];
    if ("clientSecret" in this.#proof) out.push(this.#proof.clientSecret);
    return out;
  }

  async #proofFields(): Promise<Record<string, string>> {
    if ("clientSecret" in this.#proof) return { client_secret: this.#proof.clientSecret };
    const file = this.#proof.federatedTokenFile;
    let token: string;
    try {
      token = (await readFile(file, "utf8")).trim();
    } catch (err) {
      throw new CredentialError(
        "Auth",
        this.name,
        `cannot read AZURE_FEDERATED_TOKEN_FILE ${file}: ${(err as Error).message}`,
        {
          code: "TokenFileUnreadable",
        },
      );
    }
    if (!token) {
      throw new CredentialError("Auth", this.name, `the federated token file ${file} is empty`, {
        code: "TokenFileEmpty",
      });
    }
    this.#assertion = token;
    return {
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      client_assertion: token,
    };
  }

  protected async fetchToken(signal?: AbortSignal): Promise<FetchedToken> {
    const form = new URLSearchParams({
      client_id: this.#app.clientId,
      scope: STORAGE_SCOPE,
      grant_type: "client_credentials",
      ...(await this.#proofFields()),
    });
    return await this.exchange(`the token endpoint ${new URL(this.tokenUrl).origin}`, {
      method: "POST",
      url: this.tokenUrl,
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form.toString(),
    }, signal);
  }
}
