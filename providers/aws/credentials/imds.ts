// EC2 instance metadata, IMDSv2 only: a session token from `PUT /latest/api/token` (TTL in
// X-aws-ec2-metadata-token-ttl-seconds, kept until shortly before it ends), then the instance
// role's name and credentials from `/latest/meta-data/iam/security-credentials/`, each GET
// carrying X-aws-ec2-metadata-token. A 401 means the session token ended: one new one. The
// endpoint is AWS_EC2_METADATA_SERVICE_ENDPOINT or 169.254.169.254; AWS_EC2_METADATA_DISABLED
// turns the source off. In the auto chain, no answer to the token PUT means "not on EC2".
import type { Credentials } from "../../s3/sigv4.ts";
import type { CredentialSource } from "../../credentials/chain.ts";
import {
  callEndpoint,
  type EndpointAnswer,
  expiryFrom,
  jsonAnswer,
  refusal,
  requireField,
  str,
} from "../../credentials/endpoint.ts";
import { CredentialError, type Expiring, SourceSkipped } from "../../credentials/types.ts";
import { type AwsSourceContext, endpointContext } from "./context.ts";

/** The instance metadata service's default address. */
export const IMDS_ENDPOINT = "http://169.254.169.254";
/** The session token lifetime tierd asks for: six hours, the maximum. */
const TOKEN_TTL_SECONDS = 21600;
/** How long the token PUT may take: off EC2 nothing answers, and the chain must move on. */
const PROBE_TIMEOUT_MS = 1000;
const CREDENTIALS_PATH = "/latest/meta-data/iam/security-credentials/";

/** Settings of the IMDS source. */
export interface ImdsSettings {
  /** @default AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254 */
  endpoint?: string;
  /** True in the auto chain: no answer (or no role) skips the source instead of failing. */
  optional: boolean;
}

/** The `imds` source. */
export class ImdsSource implements CredentialSource<Credentials> {
  readonly name = "imds";
  readonly #ctx: AwsSourceContext;
  readonly #s: ImdsSettings;
  #session?: { token: string; until: number };
  #role?: string;

  constructor(ctx: AwsSourceContext, settings: ImdsSettings) {
    this.#ctx = ctx;
    this.#s = settings;
  }

  get endpoint(): string {
    return (this.#s.endpoint || this.#ctx.env("AWS_EC2_METADATA_SERVICE_ENDPOINT") || IMDS_ENDPOINT)
      .replace(/\/+$/, "");
  }

  detail(): string {
    return this.#role ? `role ${this.#role} at ${this.endpoint}` : this.endpoint;
  }

  secrets(): string[] {
    return this.#session ? [this.#session.token] : [];
  }

  async load(signal?: AbortSignal): Promise<Expiring<Credentials>> {
    if (/^true$/i.test(this.#ctx.env("AWS_EC2_METADATA_DISABLED") ?? "")) {
      throw new SourceSkipped("AWS_EC2_METADATA_DISABLED is true");
    }
    let role = this.#role;
    if (!role) {
      const answer = await this.#get(CREDENTIALS_PATH, signal);
      if (answer.status === 404) {
        return this.#skipOrFail("the instance has no IAM role (404 from the role list)", "NoRole");
      }
      const ctx = endpointContext(this.#ctx, this.name, signal);
      if (answer.status !== 200) throw refusal(ctx, "the IMDS role list", answer);
      role = answer.text.split(/\r?\n/).map((l) => l.trim()).find((l) => l !== "");
      if (!role) {
        return this.#skipOrFail("the instance has no IAM role (empty role list)", "NoRole");
      }
      this.#role = role;
    }
    const answer = await this.#get(CREDENTIALS_PATH + encodeURIComponent(role), signal);
    const ctx = endpointContext(this.#ctx, this.name, signal);
    if (answer.status === 404) this.#role = undefined; // the role changed: look it up next time
    const what = `IMDS credentials of role ${role}`;
    const json = jsonAnswer(ctx, what, answer);
    const code = str(json.Code);
    if (code && code !== "Success") {
      throw new CredentialError(
        "Auth",
        this.name,
        `${what}: Code ${code}${str(json.Message) ? `: ${str(json.Message)}` : ""}`,
        { status: answer.status, code },
      );
    }
    return {
      value: {
        accessKeyId: requireField(this.name, what, json, "AccessKeyId"),
        secretAccessKey: requireField(this.name, what, json, "SecretAccessKey"),
        sessionToken: str(json.Token),
      },
      expiresAt: json.Expiration === undefined
        ? undefined
        : expiryFrom(this.name, json.Expiration, "date", this.#ctx.clock.now()),
    };
  }

  #skipOrFail(why: string, code: string): never {
    if (this.#s.optional) throw new SourceSkipped(`${why} at ${this.endpoint}`);
    throw new CredentialError("Auth", this.name, `${why} at ${this.endpoint}`, { code });
  }

  /** A GET with the session token; a 401 (the token ended) gets one new token. */
  async #get(path: string, signal?: AbortSignal): Promise<EndpointAnswer> {
    for (let attempt = 0;; attempt++) {
      const token = await this.#sessionToken(signal);
      const answer = await callEndpoint(endpointContext(this.#ctx, this.name, signal), {
        method: "GET",
        url: this.endpoint + path,
        headers: { "x-aws-ec2-metadata-token": token },
      });
      if (answer.status !== 401 || attempt > 0) return answer;
      this.#session = undefined;
    }
  }

  async #sessionToken(signal?: AbortSignal): Promise<string> {
    const now = this.#ctx.clock.now();
    if (this.#session && now < this.#session.until) return this.#session.token;
    const ctx = endpointContext(this.#ctx, this.name, signal, PROBE_TIMEOUT_MS);
    let answer: EndpointAnswer;
    try {
      answer = await callEndpoint(ctx, {
        method: "PUT",
        url: `${this.endpoint}/latest/api/token`,
        headers: { "x-aws-ec2-metadata-token-ttl-seconds": String(TOKEN_TTL_SECONDS) },
      });
    } catch (err) {
      if (signal?.aborted || !(err instanceof CredentialError) || err.kind !== "Transport") {
        throw err;
      }
      const why =
        `no answer to the IMDSv2 token PUT at ${this.endpoint} (${
          err.message.replace(/^credentials from imds: /, "")
        }; ` +
        "off EC2 nothing answers; on EC2 from a container, an instance metadata hop limit of 1 drops the answer: set it to 2)";
      if (this.#s.optional) throw new SourceSkipped(why);
      throw new CredentialError("Transport", this.name, why, { code: "ImdsUnreachable" });
    }
    if (answer.status === 403) {
      return this.#skipOrFail(
        "IMDS refused a session token (403: the instance metadata service is disabled)",
        "ImdsDisabled",
      );
    }
    if (answer.status !== 200 || !answer.text.trim()) {
      throw refusal(ctx, "the IMDSv2 token PUT", answer);
    }
    const ttl = Number(
      answer.headers.get("x-aws-ec2-metadata-token-ttl-seconds") ?? TOKEN_TTL_SECONDS,
    );
    const lifetimeMs = (Number.isFinite(ttl) && ttl > 0 ? ttl : TOKEN_TTL_SECONDS) * 1000;
    this.#session = {
      token: answer.text.trim(),
      until: now + Math.max(0, lifetimeMs - Math.min(60_000, lifetimeMs / 10)),
    };
    return this.#session.token;
  }
}
