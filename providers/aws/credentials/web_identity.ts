// AWS web identity (IRSA on EKS, any OIDC federation): the token in
// AWS_WEB_IDENTITY_TOKEN_FILE (re-read on every refresh: the kubelet rotates it) exchanged with
// STS AssumeRoleWithWebIdentity for AWS_ROLE_ARN. The token is a secret: scrubbed, never logged.
import { readFile } from "node:fs/promises";
import type { Credentials } from "../../s3/sigv4.ts";
import type { CredentialSource } from "../../credentials/chain.ts";
import { CredentialError, type Expiring, SourceSkipped } from "../../credentials/types.ts";
import { type AwsSourceContext, endpointContext, sessionName } from "./context.ts";
import { assumeRoleWithWebIdentity } from "./sts.ts";

/** Settings of the web identity source; unset ones come from the environment. */
export interface WebIdentitySettings {
  tokenFile?: string;
  roleArn?: string;
  sessionName?: string;
  /** @default 3600 */
  durationSeconds?: number;
  /** The STS endpoint and signing region. */
  sts: { endpoint: string; region: string };
}

/** The `web_identity` source. */
export class WebIdentitySource implements CredentialSource<Credentials> {
  readonly name: string;
  readonly #ctx: AwsSourceContext;
  readonly #s: WebIdentitySettings;
  readonly #session: string;
  #token?: string;

  constructor(ctx: AwsSourceContext, settings: WebIdentitySettings, name = "web_identity") {
    this.name = name;
    this.#ctx = ctx;
    this.#s = settings;
    this.#session = settings.sessionName ?? ctx.env("AWS_ROLE_SESSION_NAME") ?? sessionName();
  }

  #file(): string | undefined {
    return this.#s.tokenFile ?? this.#ctx.env("AWS_WEB_IDENTITY_TOKEN_FILE");
  }

  #role(): string | undefined {
    return this.#s.roleArn ?? this.#ctx.env("AWS_ROLE_ARN");
  }

  detail(): string {
    return `role ${this.#role() ?? "?"} with the token in ${this.#file() ?? "?"}`;
  }

  secrets(): string[] {
    return this.#token ? [this.#token] : [];
  }

  async load(signal?: AbortSignal): Promise<Expiring<Credentials>> {
    const file = this.#file();
    const role = this.#role();
    if (!file) throw new SourceSkipped("AWS_WEB_IDENTITY_TOKEN_FILE is not set");
    if (!role) {
      throw new CredentialError(
        "Auth",
        this.name,
        `AWS_ROLE_ARN is not set (the token file is ${file})`,
        {
          code: "IncompleteCredentials",
        },
      );
    }
    let token: string;
    try {
      token = (await readFile(file, "utf8")).trim();
    } catch (err) {
      throw new CredentialError(
        "Auth",
        this.name,
        `cannot read the token file ${file}: ${(err as Error).message}`,
        { code: "TokenFileUnreadable" },
      );
    }
    if (!token) {
      throw new CredentialError("Auth", this.name, `the token file ${file} is empty`, {
        code: "TokenFileEmpty",
      });
    }
    this.#token = token;
    return await assumeRoleWithWebIdentity({
      ...endpointContext(this.#ctx, this.name, signal),
      ...this.#s.sts,
      clock: this.#ctx.clock,
    }, {
      roleArn: role,
      sessionName: this.#session,
      durationSeconds: this.#s.durationSeconds ?? 3600,
      token,
    });
  }
}
