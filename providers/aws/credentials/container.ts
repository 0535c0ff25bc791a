// ECS and EKS Pod Identity container credentials: a GET of
// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on 169.254.170.2) or AWS_CONTAINER_CREDENTIALS_FULL_URI
// (https anywhere; http only to loopback or the ECS/EKS agent addresses), with the
// Authorization token from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (re-read each time) or
// AWS_CONTAINER_AUTHORIZATION_TOKEN. The answer: AccessKeyId, SecretAccessKey, Token, Expiration.
import { readFile } from "node:fs/promises";
import type { Credentials } from "../../s3/sigv4.ts";
import type { CredentialSource } from "../../credentials/chain.ts";
import {
  callEndpoint,
  expiryFrom,
  jsonAnswer,
  requireField,
  str,
} from "../../credentials/endpoint.ts";
import { CredentialError, type Expiring, SourceSkipped } from "../../credentials/types.ts";
import { type AwsSourceContext, endpointContext } from "./context.ts";

/** The ECS agent's address for relative URIs. */
export const ECS_HOST = "http://169.254.170.2";
/** Hosts an http:// full URI may name: loopback and the ECS and EKS Pod Identity agents. */
const ALLOWED_HTTP_HOSTS =
  /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]|169\.254\.170\.2|169\.254\.170\.23|\[fd00:ec2::23\])$/i;

/** The `container` source. */
export class ContainerSource implements CredentialSource<Credentials> {
  readonly name = "container";
  readonly #ctx: AwsSourceContext;
  #authToken?: string;

  constructor(ctx: AwsSourceContext) {
    this.#ctx = ctx;
  }

  /**
   * The URL to ask, from the environment.
   * @throws {SourceSkipped} when neither variable is set
   * @throws {CredentialError} for a full URI that is not allowed
   */
  url(): string {
    const relative = this.#ctx.env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    if (relative) return ECS_HOST + (relative.startsWith("/") ? relative : `/${relative}`);
    const full = this.#ctx.env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (!full) {
      throw new SourceSkipped(
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and AWS_CONTAINER_CREDENTIALS_FULL_URI are not set",
      );
    }
    let url: URL;
    try {
      url = new URL(full);
    } catch {
      throw new CredentialError(
        "Auth",
        this.name,
        `AWS_CONTAINER_CREDENTIALS_FULL_URI is not a URL`,
        {
          code: "BadEndpoint",
        },
      );
    }
    if (
      url.protocol !== "https:" &&
      !(url.protocol === "http:" && ALLOWED_HTTP_HOSTS.test(url.hostname))
    ) {
      throw new CredentialError(
        "Auth",
        this.name,
        `AWS_CONTAINER_CREDENTIALS_FULL_URI ${url.origin} must be https, or http to a loopback address or the ECS/EKS agent (169.254.170.2, 169.254.170.23)`,
        { code: "BadEndpoint" },
      );
    }
    return url.href;
  }

  detail(): string {
    try {
      return new URL(this.url()).origin;
    } catch {
      return "";
    }
  }

  secrets(): string[] {
    return this.#authToken ? [this.#authToken] : [];
  }

  async #authorization(): Promise<string | undefined> {
    const file = this.#ctx.env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    if (file) {
      try {
        return (await readFile(file, "utf8")).trim();
      } catch (err) {
        throw new CredentialError(
          "Auth",
          this.name,
          `cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE ${file}: ${(err as Error).message}`,
          { code: "TokenFileUnreadable" },
        );
      }
    }
    return this.#ctx.env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  }

  async load(signal?: AbortSignal): Promise<Expiring<Credentials>> {
    const url = this.url();
    const auth = await this.#authorization();
    if (auth && /[\r\n]/.test(auth)) {
      throw new CredentialError("Auth", this.name, "the authorization token holds a line break", {
        code: "BadToken",
      });
    }
    if (auth) this.#authToken = auth;
    const ctx = endpointContext(this.#ctx, this.name, signal);
    const what = `the container credentials endpoint ${new URL(url).origin}`;
    const answer = await callEndpoint(ctx, {
      method: "GET",
      url,
      headers: auth ? { authorization: auth } : {},
    });
    const json = jsonAnswer(ctx, what, answer);
    const expiration = str(json.Expiration);
    return {
      value: {
        accessKeyId: requireField(this.name, what, json, "AccessKeyId"),
        secretAccessKey: requireField(this.name, what, json, "SecretAccessKey"),
        sessionToken: str(json.Token),
      },
      expiresAt: expiration
        ? expiryFrom(this.name, expiration, "date", this.#ctx.clock.now())
        : undefined,
    };
  }
}
