// AWS credentials from the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and, for
// temporary ones, AWS_SESSION_TOKEN (with AWS_CREDENTIAL_EXPIRATION when the tool that set them
// says when they end). The first link of the AWS chain.
import type { Credentials } from "../../s3/sigv4.ts";
import type { CredentialSource } from "../../credentials/chain.ts";
import {
  CredentialError,
  type Env,
  type Expiring,
  SourceSkipped,
} from "../../credentials/types.ts";

/** The `env` source. */
export class EnvSource implements CredentialSource<Credentials> {
  readonly name = "env";
  readonly #env: Env;
  constructor(env: Env) {
    this.#env = env;
  }

  detail(): string {
    return "AWS_ACCESS_KEY_ID";
  }

  /**
   * @throws {SourceSkipped} when AWS_ACCESS_KEY_ID is unset
   * @throws {CredentialError} when only one of the key id and the secret is set
   */
  load(): Promise<Expiring<Credentials>> {
    const id = this.#env("AWS_ACCESS_KEY_ID");
    const secret = this.#env("AWS_SECRET_ACCESS_KEY");
    if (!id && !secret) {
      return Promise.reject(new SourceSkipped("AWS_ACCESS_KEY_ID is not set"));
    }
    if (!id || !secret) {
      return Promise.reject(
        new CredentialError(
          "Auth",
          this.name,
          `${id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID"} is not set (the other one is)`,
          { code: "IncompleteCredentials" },
        ),
      );
    }
    const token = this.#env("AWS_SESSION_TOKEN");
    const expiration = this.#env("AWS_CREDENTIAL_EXPIRATION");
    const expiresAt = expiration ? Date.parse(expiration) : NaN;
    return Promise.resolve({
      value: { accessKeyId: id, secretAccessKey: secret, sessionToken: token },
      expiresAt: Number.isFinite(expiresAt) ? expiresAt : undefined,
    });
  }
}
