// What may be shown of a config: secrets replaced by "***" (empty ones left "" so an operator
// sees they are unset), the TOML text for `tierd config show`, and the secret values the
// logger scrubs from every line.
import { stringify } from "smol-toml";
import { z } from "zod";
import { type Config, configSchema } from "./schema.ts";
import { REDACTED, SECRET_FIELDS } from "./secrets.ts";

/**
 * A deep copy of the config with every set secret replaced by `"***"`.
 *
 * @param config a loaded config
 * @returns the same shape as `Config` (numbers stay numbers), safe to print or serialize
 */
export function redactedConfig(config: Config): unknown {
  const copy = structuredClone(config);
  for (const field of SECRET_FIELDS) {
    const table = parentOf(copy, field.path);
    const key = field.path[field.path.length - 1];
    if (table && typeof table[key] === "string" && table[key] !== "") table[key] = REDACTED;
  }
  return copy;
}

/**
 * The effective config as TOML, secrets redacted, durations and sizes written as text
 * (`"90 s"`, `"64 MiB"`, `"unlimited"`). Parsing it again gives the redacted config.
 *
 * @param config a loaded config
 * @returns TOML text for `tierd config show`
 */
export function renderConfig(config: Config): string {
  const written = z.encode(configSchema, redactedConfig(config) as Config);
  return '# effective tierd config; secrets shown as "***"\n' + stringify(written);
}

/**
 * Every secret value that is set, for scrubbing from log lines and error text.
 *
 * @param config a loaded config
 * @returns the non-empty secret strings, longest first (so a secret containing another is
 *   scrubbed whole)
 */
export function secretValues(config: Config): string[] {
  const values = new Set<string>();
  for (const field of SECRET_FIELDS) {
    const value = parentOf(config, field.path)?.[field.path[field.path.length - 1]];
    if (typeof value === "string" && value !== "") values.add(value);
  }
  return [...values].sort((a, b) => b.length - a.length);
}

function parentOf(root: object, path: readonly string[]): Record<string, unknown> | undefined {
  let table: unknown = root;
  for (const seg of path.slice(0, -1)) {
    if (typeof table !== "object" || table === null) return undefined;
    table = (table as Record<string, unknown>)[seg];
  }
  return typeof table === "object" && table !== null ? table as Record<string, unknown> : undefined;
}
