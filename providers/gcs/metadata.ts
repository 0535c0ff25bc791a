// Tokens of the instance's service account from the GCE / GKE metadata server
// (GCE_METADATA_HOST, else metadata.google.internal), and the short check the ADC chain makes
// to tell whether one answers here.
import { callEndpoint } from "../credentials/endpoint.ts";
import { SourceSkipped } from "../credentials/types.ts";
import {
  type FetchedToken,
  type FetchingTokenOptions,
  FetchingTokenSource,
} from "./token_source.ts";

/** The metadata server's default address. */
export const METADATA_ENDPOINT = "http://metadata.google.internal";

/** The metadata server: `endpoint`, else GCE_METADATA_HOST (a host[:port]), else the default. */
export function metadataEndpoint(endpoint?: string): string {
  const host = globalThis.process?.env?.GCE_METADATA_HOST;
  const chosen = endpoint || (host ? `http://${host}` : METADATA_ENDPOINT);
  return chosen.replace(/\/+$/, "");
}

/** Tokens of the instance's default service account, from the GCE metadata server. */
export class MetadataServerTokenSource extends FetchingTokenSource {
  readonly name = "metadata";
  readonly describe: string;
  readonly #endpoint: string;
  readonly #url: string;
  readonly #optional: boolean;
  #checked = false;

  /**
   * @param options.endpoint the metadata server @default "http://metadata.google.internal"
   * @param options.optional the ADC chain's link: first check (1 s) that a metadata server
   *   answers at all, and skip when none does
   */
  constructor(options: FetchingTokenOptions & { endpoint?: string; optional?: boolean } = {}) {
    super(options);
    const endpoint = metadataEndpoint(options.endpoint);
    this.#endpoint = endpoint;
    this.#url = `${endpoint}/computeMetadata/v1/instance/service-accounts/default/token`;
    this.describe = `metadata server ${endpoint}`;
    this.#optional = options.optional ?? false;
  }

  protected override async fetchToken(signal?: AbortSignal): Promise<FetchedToken> {
    if (this.#optional && !this.#checked) {
      const ctx = { ...this.endpoint(signal), timeoutMs: 1000 };
      const answer = await callEndpoint(ctx, {
        method: "GET",
        url: `${this.#endpoint}/computeMetadata/v1/instance/`,
        headers: { "metadata-flavor": "Google" },
      }).catch((err) => {
        if (signal?.aborted) throw err;
        throw new SourceSkipped(`no metadata server answers at ${this.#endpoint}`);
      });
      if (answer.headers.get("metadata-flavor") !== "Google") {
        throw new SourceSkipped(`${this.#endpoint} answered without Metadata-Flavor: Google`);
      }
      this.#checked = true;
    }
    return await this.fetchOnce(signal);
  }

  protected fetchOnce(signal?: AbortSignal): Promise<FetchedToken> {
    return this.exchange(this.describe, {
      method: "GET",
      url: this.#url,
      headers: { "metadata-flavor": "Google" },
    }, signal);
  }
}
