// The credential sources each store's `credentials_source` may name: one list per store, read by
// the config schema (what a file may say, and the message when it says something else) and by
// the store's credential chain (what it builds for each name).

/** The sources of `[tiered_storage.s3] credentials_source`. */
export const AWS_CREDENTIAL_SOURCES = [
  "auto",
  "static",
  "env",
  "profile",
  "web_identity",
  "container",
  "imds",
  "none",
] as const;

/** A source `[tiered_storage.s3] credentials_source` may name. */
export type AwsSourceName = typeof AWS_CREDENTIAL_SOURCES[number];

/** The sources of `[tiered_storage.gcs] credentials_source`. */
export const GCS_CREDENTIAL_SOURCES = [
  "auto",
  "service_account",
  "external_account",
  "metadata",
  "static",
  "none",
] as const;

/** A source `[tiered_storage.gcs] credentials_source` may name. */
export type GcsSourceName = typeof GCS_CREDENTIAL_SOURCES[number];

/** The sources of `[tiered_storage.azure] credentials_source`. */
export const AZURE_CREDENTIAL_SOURCES = [
  "auto",
  "shared_key",
  "sas",
  "workload_identity",
  "client_secret",
  "managed_identity",
] as const;

/** A source `[tiered_storage.azure] credentials_source` may name. */
export type AzureSourceName = typeof AZURE_CREDENTIAL_SOURCES[number];

/** `one of "a", "b", …`: what a config error says a source must be. */
export function sourcesMessage(sources: readonly string[]): string {
  return `one of ${sources.map((s) => JSON.stringify(s)).join(", ")}`;
}
