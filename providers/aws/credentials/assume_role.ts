// STS AssumeRole on top of any other credentials (the config's `assume_role_arn`, or a shared
// config profile's `role_arn` with `source_profile`): each refresh asks the base credentials
// (themselves refreshed as they need) and calls AssumeRole with them.
import type { Credentials } from "../../s3/sigv4.ts";
import type { CredentialSource } from "../../credentials/chain.ts";
import type { CredentialSupplier, Expiring } from "../../credentials/types.ts";
import { type AwsSourceContext, endpointContext, sessionName } from "./context.ts";
import { assumeRole } from "./sts.ts";

/** What to assume, and where. */
export interface AssumeRoleSettings {
  roleArn: string;
  sessionName?: string;
  externalId?: string;
  /** @default 3600 */
  durationSeconds?: number;
  sts: { endpoint: string; region: string };
}

/** The base credentials AssumeRole is signed with: a supplier, or a source loaded each time. */
export type RoleBase =
  | { supplier: CredentialSupplier<Credentials> }
  | { source: CredentialSource<Credentials> };

/** The `assume_role` source. */
export class AssumeRoleSource implements CredentialSource<Credentials> {
  readonly name: string;
  readonly #ctx: AwsSourceContext;
  readonly #s: AssumeRoleSettings;
  readonly #base: RoleBase;
  readonly #session: string;

  constructor(
    ctx: AwsSourceContext,
    base: RoleBase,
    settings: AssumeRoleSettings,
    name = "assume_role",
  ) {
    this.name = name;
    this.#ctx = ctx;
    this.#base = base;
    this.#s = settings;
    this.#session = settings.sessionName ?? sessionName();
  }

  /** The base's name and detail, for the report. */
  get base(): string {
    return "supplier" in this.#base ? this.#base.supplier.describe : this.#base.source.name;
  }

  detail(): string {
    return `role ${this.#s.roleArn} at ${this.#s.sts.endpoint}, signed with ${this.base}`;
  }

  secrets(): string[] {
    return "supplier" in this.#base
      ? this.#base.supplier.secrets()
      : this.#base.source.secrets?.() ?? [];
  }

  async load(signal?: AbortSignal): Promise<Expiring<Credentials>> {
    const base = "supplier" in this.#base
      ? await this.#base.supplier.get({ signal })
      : (await this.#base.source.load(signal)).value;
    return await assumeRole(
      {
        ...endpointContext(this.#ctx, this.name, signal),
        ...this.#s.sts,
        clock: this.#ctx.clock,
      },
      base,
      {
        roleArn: this.#s.roleArn,
        sessionName: this.#session,
        durationSeconds: this.#s.durationSeconds ?? 3600,
        externalId: this.#s.externalId,
      },
    );
  }
}
