// What may be shown of a config: secrets replaced by "***" (empty ones left "" so an operator
// sees they are unset), the TOML text for `tierd config show`, and the secret values the
// logger scrubs from every line.
import { stringify } from "smol-toml";
import { z } from "zod";
import { type Config, configSchema, NOT_SUPPORTED_YET } from "./schema.ts";
import { REDACTED, SECRET_FIELDS } from "./secrets.ts";

/**
 * A deep copy of the config with every set secret replaced by `"***"`.
 *
 * @param config a loaded config
 * @returns the same shape as `Config` (numbers stay numbers), safe to print or serialize
 */
export function redactedConfig(config: Config): unknown {
  return redactInPlace(structuredClone(config));
}

/** Replaces every set secret of a config-shaped object (parsed or encoded) by `"***"`. */
function redactInPlace<T extends object>(root: T): T {
  for (const field of SECRET_FIELDS) {
    const table = parentOf(root, field.path);
    const key = field.path[field.path.length - 1];
    if (table && typeof table[key] === "string" && table[key] !== "") table[key] = REDACTED;
  }
  return root;
}

/**
 * The effective config as TOML, secrets redacted, durations and sizes written as text
 * (`"90 s"`, `"64 MiB"`, `"unlimited"`), without the keys that are not supported yet. Parsing it
 * again, with the secrets given back through their `TIERD_*` variables, gives the same config.
 *
 * @param config a loaded config
 * @returns TOML text for `tierd config show`
 */
export function renderConfig(config: Config): string {
  // Encoded first, then redacted: "***" is no valid token or key, and encoding checks values.
  const written = redactInPlace(z.encode(configSchema, config) as Record<string, unknown>);
  for (const path of NOT_SUPPORTED_YET) {
    const table = parentOf(written, path);
    if (table) delete table[path[path.length - 1]];
  }
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
