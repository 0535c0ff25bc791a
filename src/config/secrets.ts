// The one list of secret config keys and the environment variables that override them.
// Loading, redaction, error messages and log scrubbing all read this list.

/** A secret key in the config file and the environment variable that overrides it. */
export interface SecretField {
  /** Key path from the root of the file, e.g. `["tiered_storage", "s3", "secret_key"]`. */
  readonly path: readonly string[];
  /** Environment variable whose non-empty value wins over the file. */
  readonly env: string;
}

/** Every secret in the config. Values here are never logged, shown or put in an error. */
export const SECRET_FIELDS: readonly SecretField[] = [
  { path: ["agent", "api_token"], env: "TIERD_API_TOKEN" },
  { path: ["agent", "read_token"], env: "TIERD_READ_TOKEN" },
  { path: ["agent", "broker", "password"], env: "TIERD_BROKER_PASSWORD" },
  { path: ["agent", "broker", "personal_access_token"], env: "TIERD_BROKER_TOKEN" },
  { path: ["tiered_storage", "s3", "access_key"], env: "TIERD_S3_ACCESS_KEY" },
  { path: ["tiered_storage", "s3", "secret_key"], env: "TIERD_S3_SECRET_KEY" },
  { path: ["tiered_storage", "s3", "session_token"], env: "TIERD_S3_SESSION_TOKEN" },
  { path: ["tiered_storage", "gcs", "token"], env: "TIERD_GCS_TOKEN" },
  { path: ["tiered_storage", "azure", "shared_key"], env: "TIERD_AZURE_KEY" },
  { path: ["tiered_storage", "azure", "sas_token"], env: "TIERD_AZURE_SAS" },
  { path: ["tiered_storage", "azure", "client_secret"], env: "TIERD_AZURE_CLIENT_SECRET" },
];

/**
 * The shortest secret scrubbed from foreign text (`src/scrub.ts`): shorter strings would blank
 * out ordinary text. A secret that must be scrubbed, `agent.api_token`, is refused below it.
 */
export { MIN_SCRUB_LENGTH as MIN_SCRUBBED_LENGTH } from "../scrub.ts";

/** Shown in place of a secret that is set. An unset secret shows as `""`. */
export const REDACTED = "***";

/**
 * The secret field at a key path, if that path names a secret.
 *
 * @param path key path segments (array indices allowed; they never match)
 */
export function secretAt(path: readonly PropertyKey[]): SecretField | undefined {
  return SECRET_FIELDS.find((f) =>
    f.path.length === path.length && f.path.every((seg, i) => seg === path[i])
  );
}
