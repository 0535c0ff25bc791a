// Reads `tierd.toml`: TOML → environment overrides for secrets → keys not supported yet →
// schema → paths made absolute against the file's directory → cross-key rules. Every problem found is reported at once in
// one ConfigError, each naming its key path and the value as written (secrets redacted).
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import process from "node:process";
import { parse as parseToml, TomlError } from "smol-toml";
import { z } from "zod";
import { ConfigError, type ConfigIssue } from "./error.ts";
import { checkRules, type Service } from "./rules.ts";
import { type Config, configSchema, NOT_SUPPORTED_YET } from "./schema.ts";
import { REDACTED, SECRET_FIELDS, secretAt } from "./secrets.ts";

/** Environment variables, as `process.env` holds them. */
export type Env = Record<string, string | undefined>;

/**
 * Reads and validates a config file.
 *
 * @param path the config file; relative paths inside it resolve against its directory
 * @param env where the `TIERD_*` secret overrides are read from; defaults to `process.env`
 * @param options.uses the services the command talks to (see {@linkcode parseConfig})
 * @returns the config with defaults filled and paths absolute
 * @throws {ConfigError} when the file is missing, unreadable, not TOML, or invalid
 */
export async function loadConfig(
  path: string,
  env: Env = process.env,
  options: { uses?: readonly Service[] } = {},
): Promise<Config> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    const message = code === "ENOENT"
      ? `config file not found: ${path} (${resolve(path)}); copy tierd.example.toml to ` +
        "tierd.toml and edit it, or pass --config FILE"
      : `cannot read config file ${path}: ${(e as Error).message}`;
    throw new ConfigError(path, [{ path: "", message }]);
  }
  return parseConfig(text, path, env, options);
}

/**
 * Parses and validates config text.
 *
 * @param text the TOML document
 * @param source the file it came from: named in errors, and its directory is the base for
 *   relative paths (`agent.data_dir`, `agent.state_dir`, `tiered_storage.fs.path`,
 *   `tiered_storage.cache.path`, `tiered_storage.gcs.service_account_key`, the token and
 *   credentials files)
 * @param env where the `TIERD_*` secret overrides are read from; defaults to `process.env`
 * @param options.notSupported keys refused as "not supported yet" @default NOT_SUPPORTED_YET
 * @param options.uses the services the command talks to: the rules about the others (the
 *   broker's credentials for a command that never calls it) are not checked @default ALL_SERVICES
 * @returns the config with defaults filled and paths absolute
 * @throws {ConfigError} listing every problem found
 */
export function parseConfig(
  text: string,
  source: string,
  env: Env = process.env,
  options: { notSupported?: readonly (readonly string[])[]; uses?: readonly Service[] } = {},
): Config {
  let doc: Record<string, unknown>;
  try {
    doc = parseToml(text);
  } catch (e) {
    if (!(e instanceof TomlError)) throw e;
    // Only the first line: the rest is a code frame that may quote a secret.
    const what = e.message.split("\n")[0].replace(/^Invalid TOML document:\s*/, "");
    throw new ConfigError(source, [{
      path: "",
      message: `TOML syntax error: ${what}`,
      line: e.line,
      column: e.column,
    }]);
  }
  applySecretEnv(doc, env);
  applyServiceDirs(doc, env);

  // A key nothing acts on yet is refused, never silently ignored.
  const unsupported: ConfigIssue[] = (options.notSupported ?? NOT_SUPPORTED_YET)
    .filter((p) => valueAt(doc, p) !== undefined)
    .map((p) => ({
      path: keyPath(p),
      value: show(p, valueAt(doc, p)),
      message: "not supported yet: nothing in tierd reads this key; remove it",
    }));
  const parsed = configSchema.safeParse(doc, { error: expectedFor });
  if (!parsed.success) {
    const others = parsed.error.issues.flatMap((i) => schemaIssues(doc, i))
      .filter((i) => !unsupported.some((u) => u.path === i.path));
    throw new ConfigError(source, [...unsupported, ...others]);
  }
  if (unsupported.length > 0) throw new ConfigError(source, unsupported);
  const config = resolvePaths(parsed.data, dirname(resolve(source)));

  const violations = checkRules(config, options.uses);
  if (violations.length > 0) {
    const written = z.encode(configSchema, config) as Record<string, unknown>;
    throw new ConfigError(
      source,
      violations.map((v) => {
        const raw = valueAt(doc, v.path);
        const fallback = valueAt(written, v.path);
        const value = raw !== undefined
          ? show(v.path, raw)
          : fallback === "" || fallback === undefined || isTable(fallback)
          ? undefined
          : `${show(v.path, fallback)} (default)`;
        return { path: keyPath(v.path), value, message: `expected ${v.expected}` };
      }),
    );
  }
  return config;
}

// ---- environment ----------------------------------------------------------------------------

function applySecretEnv(doc: Record<string, unknown>, env: Env): void {
  for (const field of SECRET_FIELDS) {
    const value = env[field.env];
    if (value === undefined || value === "") continue;
    const parent = tableFor(doc, field.path.slice(0, -1));
    if (parent) parent[field.path[field.path.length - 1]] = value;
  }
}

/**
 * Under systemd (`StateDirectory=`, `CacheDirectory=` in the unit), where the config does not
 * write `agent.state_dir` or `[tiered_storage.cache] path`: the directories the service manager
 * made for tierd (`$STATE_DIRECTORY`, `$CACHE_DIRECTORY`, the first of each) — not `var/state`
 * beside a config file in `/etc/tierd`, which the unit keeps read-only.
 */
function applyServiceDirs(doc: Record<string, unknown>, env: Env): void {
  const first = (name: string) => env[name]?.split(":")[0] || undefined;
  const state = first("STATE_DIRECTORY");
  if (state && valueAt(doc, ["agent", "state_dir"]) === undefined) {
    const agent = tableFor(doc, ["agent"]);
    if (agent) agent.state_dir = state;
  }
  const cache = first("CACHE_DIRECTORY");
  if (cache && valueAt(doc, ["tiered_storage", "cache", "path"]) === undefined) {
    const table = tableFor(doc, ["tiered_storage", "cache"]);
    if (table) table.path = cache;
  }
}

/** The table at `path`, created if absent; undefined if something else is in the way. */
function tableFor(doc: Record<string, unknown>, path: readonly string[]) {
  let table = doc;
  for (const seg of path) {
    table[seg] ??= {};
    const next = table[seg];
    if (!isTable(next)) return undefined; // the schema reports the misshapen key
    table = next;
  }
  return table;
}

// ---- paths ----------------------------------------------------------------------------------

function resolvePaths(config: Config, base: string): Config {
  const abs = (p: string) =>
    p === ""
      ? ""
      : p === "~" || p.startsWith("~/")
      ? join(homedir(), p.slice(1))
      : resolve(base, p);
  const { agent, tiered_storage: ts } = config;
  const state_dir = abs(agent.state_dir);
  return {
    ...config,
    agent: {
      ...agent,
      data_dir: abs(agent.data_dir),
      state_dir,
      tls_cert: abs(agent.tls_cert),
      tls_key: abs(agent.tls_key),
      broker: { ...agent.broker, tls_ca: abs(agent.broker.tls_ca) },
      iggy_tcp: {
        ...agent.iggy_tcp,
        tls_cert: abs(agent.iggy_tcp.tls_cert),
        tls_key: abs(agent.iggy_tcp.tls_key),
        broker_tls_ca: abs(agent.iggy_tcp.broker_tls_ca),
      },
    },
    tiered_storage: {
      ...ts,
      fs: { ...ts.fs, path: abs(ts.fs.path) },
      s3: { ...ts.s3, web_identity_token_file: abs(ts.s3.web_identity_token_file) },
      gcs: {
        ...ts.gcs,
        service_account_key: abs(ts.gcs.service_account_key),
        credentials_file: abs(ts.gcs.credentials_file),
      },
      azure: { ...ts.azure, federated_token_file: abs(ts.azure.federated_token_file) },
      cache: {
        ...ts.cache,
        path: ts.cache.path === "" ? join(state_dir, "cache") : abs(ts.cache.path),
      },
    },
  };
}

// ---- turning schema issues into ConfigIssues ------------------------------------------------

const TYPE_NAMES: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "a whole number",
  boolean: "true or false",
  object: "a table",
  array: "an array",
};

/** Error map for zod's built-in checks, phrased to follow "expected". */
function expectedFor(iss: z.core.$ZodRawIssue): string | undefined {
  switch (iss.code) {
    case "invalid_type": {
      const what = TYPE_NAMES[iss.expected] ?? iss.expected;
      return iss.input === undefined ? `${what} (required)` : what;
    }
    case "invalid_value":
      return `one of ${iss.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "too_small":
      return `${iss.inclusive ? "at least" : "more than"} ${iss.minimum}`;
    case "too_big":
      return `${iss.inclusive ? "at most" : "less than"} ${iss.maximum}`;
    default:
      return undefined;
  }
}

function schemaIssues(doc: Record<string, unknown>, iss: z.core.$ZodIssue): ConfigIssue[] {
  if (iss.code === "unrecognized_keys") {
    const known = knownKeys(iss.path);
    return iss.keys.map((key) => {
      const near = closest(key, known);
      const hint = near ? `did you mean "${near}"?` : `known keys here: ${known.join(", ")}`;
      return { path: keyPath([...iss.path, key]), message: `unknown key (${hint})` };
    });
  }
  const raw = valueAt(doc, iss.path);
  return [{
    path: keyPath(iss.path),
    value: raw === undefined ? undefined : show(iss.path, raw),
    message: `expected ${iss.message}`,
  }];
}

/** The keys the schema allows in the table at `path`, for "did you mean". */
function knownKeys(path: readonly PropertyKey[]): string[] {
  const unwrap = (s: z.core.$ZodType | undefined): z.core.$ZodType | undefined => {
    while (s) {
      if (s instanceof z.ZodPipe) s = s.in;
      else if (s instanceof z.ZodPrefault || s instanceof z.ZodOptional) s = s.unwrap();
      else break;
    }
    return s;
  };
  let schema = unwrap(configSchema);
  for (const seg of path) {
    if (schema instanceof z.ZodObject) schema = unwrap(schema.shape[String(seg)]);
    else if (schema instanceof z.ZodArray) schema = unwrap(schema.element);
    else return [];
  }
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
}

function closest(word: string, candidates: string[]): string | undefined {
  const limit = Math.max(1, Math.min(3, Math.floor(word.length / 3)));
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return bestDistance <= limit ? best : undefined;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length];
}

// ---- values and key paths -------------------------------------------------------------------

function isTable(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

function valueAt(doc: unknown, path: readonly PropertyKey[]): unknown {
  let v = doc;
  for (const seg of path) {
    if (Array.isArray(v) && typeof seg === "number") v = v[seg];
    else if (isTable(v)) v = v[String(seg)];
    else return undefined;
  }
  return v;
}

/** The value as it would be written in TOML; secrets and tables never shown. */
function show(path: readonly PropertyKey[], v: unknown): string | undefined {
  if (secretAt(path)) return v === "" ? '""' : JSON.stringify(REDACTED);
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : v > 0 ? "inf" : String(v);
  if (typeof v === "boolean" || typeof v === "bigint" || v instanceof Date) return String(v);
  if (Array.isArray(v)) return "[…]";
  return undefined;
}

/** `["topic", 1, "stream"]` → `topic[1].stream`. */
function keyPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (out, seg) =>
      typeof seg === "number"
        ? `${out}[${seg}]`
        : out === ""
        ? String(seg)
        : `${out}.${String(seg)}`,
    "",
  );
}
