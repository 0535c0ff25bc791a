// A profile of the AWS shared files (`~/.aws/credentials`, `~/.aws/config`): static keys,
// `credential_process`, `role_arn` with `source_profile` (AssumeRole on the source profile's
// credentials, up to a few levels) or with `web_identity_token_file`. The profile is the
// config's `profile`, else AWS_PROFILE, else `default`; a profile named explicitly must exist.
import type { Credentials } from "../../s3/sigv4.ts";
import type { CredentialSource } from "../../credentials/chain.ts";
import { CredentialError, type Expiring, SourceSkipped } from "../../credentials/types.ts";
import type { AwsSourceContext } from "./context.ts";
import { type IniFile, profileSettings, readIni, sharedFilePaths } from "./ini.ts";
import { runCredentialProcess } from "./process.ts";
import { AssumeRoleSource } from "./assume_role.ts";
import { WebIdentitySource } from "./web_identity.ts";

/** How deep `source_profile` may chain. */
const MAX_DEPTH = 4;

/** Settings of the profile source. */
export interface ProfileSettings {
  /** `""`: AWS_PROFILE, else `default`. */
  profile: string;
  sts: { endpoint: string; region: string };
  /** @default 3600 */
  durationSeconds?: number;
}

/** The `profile` source. */
export class ProfileSource implements CredentialSource<Credentials> {
  readonly name = "profile";
  readonly #ctx: AwsSourceContext;
  readonly #s: ProfileSettings;
  #detail = "";
  #inner: CredentialSource<Credentials>[] = [];

  constructor(ctx: AwsSourceContext, settings: ProfileSettings) {
    this.#ctx = ctx;
    this.#s = settings;
  }

  /** The profile's name and whether it was named explicitly. */
  #profile(): { name: string; explicit: boolean } {
    const named = this.#s.profile || this.#ctx.env("AWS_PROFILE");
    return named ? { name: named, explicit: true } : { name: "default", explicit: false };
  }

  detail(): string {
    return this.#detail;
  }

  secrets(): string[] {
    return this.#inner.flatMap((s) => s.secrets?.() ?? []);
  }

  async load(signal?: AbortSignal): Promise<Expiring<Credentials>> {
    const paths = sharedFilePaths(this.#ctx.env);
    const [credentials, config] = await Promise.all([
      readIni(paths.credentials),
      readIni(paths.config),
    ]);
    const { name, explicit } = this.#profile();
    const files = { credentials, config };
    if (!credentials && !config) {
      const why = `neither ${paths.credentials} nor ${paths.config} exists`;
      if (explicit) {
        throw new CredentialError("Auth", this.name, `profile ${name}: ${why}`, {
          code: "NoProfile",
        });
      }
      throw new SourceSkipped(why);
    }
    if (!profileSettings(name, files)) {
      const why = `no profile ${name} in ${paths.credentials} or ${paths.config}`;
      if (explicit) throw new CredentialError("Auth", this.name, why, { code: "NoProfile" });
      throw new SourceSkipped(why);
    }
    this.#inner = [];
    return await this.#resolve(name, files, [], signal);
  }

  async #resolve(
    name: string,
    files: { credentials?: IniFile; config?: IniFile },
    visited: string[],
    signal?: AbortSignal,
  ): Promise<Expiring<Credentials>> {
    const settings = profileSettings(name, files);
    const where = `profile ${name}`;
    if (!settings) {
      throw new CredentialError(
        "Auth",
        this.name,
        `${
          visited.at(-1) ? `profile ${visited.at(-1)}: source_profile ` : ""
        }${name} does not exist`,
        {
          code: "NoProfile",
        },
      );
    }
    if (visited.includes(name) || visited.length > MAX_DEPTH) {
      throw new CredentialError(
        "Auth",
        this.name,
        `source_profile loop: ${[...visited, name].join(" → ")}`,
        {
          code: "ProfileLoop",
        },
      );
    }
    const chain = [...visited, name];
    const role = settings.get("role_arn");
    const sourceProfile = settings.get("source_profile");
    const tokenFile = settings.get("web_identity_token_file");
    const durationSeconds = Number(
      settings.get("duration_seconds") ?? this.#s.durationSeconds ?? 3600,
    );
    if (role && tokenFile) {
      this.#detail = `${where}: role ${role} with the token in ${tokenFile}`;
      const inner = new WebIdentitySource(this.#ctx, {
        tokenFile,
        roleArn: role,
        sessionName: settings.get("role_session_name"),
        durationSeconds,
        sts: this.#s.sts,
      }, this.name);
      this.#inner.push(inner);
      return await inner.load(signal);
    }
    if (role && sourceProfile) {
      this.#detail = `${chain.map((p) => `profile ${p}`).join(" → ")}: role ${role}`;
      const base: CredentialSource<Credentials> = {
        name: `profile ${sourceProfile}`,
        load: (s) =>
          sourceProfile === name && settings.has("aws_access_key_id")
            ? Promise.resolve(staticFrom(settings, this.name, where))
            : this.#resolve(sourceProfile, files, chain, s),
      };
      const inner = new AssumeRoleSource(this.#ctx, { source: base }, {
        roleArn: role,
        sessionName: settings.get("role_session_name"),
        externalId: settings.get("external_id"),
        durationSeconds,
        sts: this.#s.sts,
      }, this.name);
      return await inner.load(signal);
    }
    if (role) {
      throw new CredentialError(
        "Auth",
        this.name,
        `${where}: role_arn needs source_profile or web_identity_token_file (credential_source is not supported)`,
        { code: "UnsupportedProfile" },
      );
    }
    const process = settings.get("credential_process");
    if (process) {
      if (visited.length === 0) this.#detail = `${where}: credential_process`;
      return await runCredentialProcess(this.name, process, this.#ctx.clock.now());
    }
    if (visited.length === 0) this.#detail = where;
    return staticFrom(settings, this.name, where);
  }
}

function staticFrom(
  settings: Map<string, string>,
  source: string,
  where: string,
): Expiring<Credentials> {
  const id = settings.get("aws_access_key_id");
  const secret = settings.get("aws_secret_access_key");
  if (!id || !secret) {
    throw new CredentialError(
      "Auth",
      source,
      `${where} has no ${
        id ? "aws_secret_access_key" : "aws_access_key_id"
      } (nor credential_process or role_arn)`,
      { code: "IncompleteCredentials" },
    );
  }
  return {
    value: {
      accessKeyId: id,
      secretAccessKey: secret,
      sessionToken: settings.get("aws_session_token") || undefined,
    },
  };
}
