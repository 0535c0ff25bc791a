// Azure managed identity through the instance metadata service (VMs, VM scale sets, AKS node
// identity): `GET /metadata/identity/oauth2/token?api-version=2018-02-01&resource=...` with
// `Metadata: true`, optionally naming a user-assigned identity by client id. In the auto chain a
// metadata service that does not answer within a second means "not on Azure".
import { SourceSkipped } from "../../credentials/types.ts";
import { CredentialError } from "../../credentials/types.ts";
import {
  type FetchedToken,
  type FetchingTokenOptions,
  FetchingTokenSource,
} from "../../credentials/tokens.ts";

/** The instance metadata service. */
export const AZURE_IMDS_ENDPOINT = "http://169.254.169.254";
const RESOURCE = "https://storage.azure.com/";

/** Tokens of the managed identity. */
export class ManagedIdentityTokenSource extends FetchingTokenSource {
  readonly name = "managed_identity";
  readonly describe: string;
  readonly #url: string;
  readonly #optional: boolean;
  #answered = false;

  /**
   * @param options.clientId a user-assigned identity's client id (`""`: the system-assigned one)
   * @param options.optional the auto chain's link: no answer skips instead of failing
   */
  constructor(
    options: FetchingTokenOptions & { endpoint?: string; clientId?: string; optional?: boolean } =
      {},
  ) {
    super(options);
    const endpoint = (options.endpoint || AZURE_IMDS_ENDPOINT).replace(/\/+$/, "");
    const query = new URLSearchParams({ "api-version": "2018-02-01", resource: RESOURCE });
    if (options.clientId) query.set("client_id", options.clientId);
    this.#url = `${endpoint}/metadata/identity/oauth2/token?${query}`;
    this.#optional = options.optional ?? false;
    this.describe = `managed identity${
      options.clientId ? ` ${options.clientId}` : ""
    } at ${endpoint}`;
  }

  protected async fetchToken(signal?: AbortSignal): Promise<FetchedToken> {
    const probing = this.#optional && !this.#answered;
    try {
      const token = await this.exchange(
        this.describe,
        {
          method: "GET",
          url: this.#url,
          headers: { metadata: "true" },
        },
        signal,
        probing ? 1000 : undefined,
      );
      this.#answered = true;
      return token;
    } catch (err) {
      if (signal?.aborted) throw err;
      if (probing && (!(err instanceof CredentialError) || err.kind === "Transport")) {
        throw new SourceSkipped(`no instance metadata service answers for ${this.describe}`);
      }
      if (probing && err instanceof CredentialError && err.detail.status === 400) {
        throw new SourceSkipped(`${this.describe}: no identity is assigned (${err.message})`);
      }
      throw err;
    }
  }
}
