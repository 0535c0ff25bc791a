// Writes docs/configuration.md from the config schema: every key of `tierd.toml` with its type,
// unit, default and environment override, from the zod schema (src/config/schema.ts) and the
// secret list (src/config/secrets.ts); each key's description is the JSDoc of its field in the
// interfaces of schema.ts, whose `@default` must agree with the schema's real default.
//
//   npx -y deno@2 run -A scripts/gen_config_docs.ts          # rewrite docs/configuration.md
//   npx -y deno@2 run -A scripts/gen_config_docs.ts --check  # exit 1 if it is stale
//
// test/scripts/gen_config_docs_test.ts fails when the committed file is stale.
import { readFile, writeFile } from "node:fs/promises";
import { z } from "zod";
import { configSchema, NOT_SUPPORTED_YET } from "../src/config/schema.ts";
import { SECRET_FIELDS } from "../src/config/secrets.ts";
import { parseDuration, parseSize } from "../src/config/units.ts";
import { dirname, fromFileUrl } from "./_paths.ts";

const ROOT = dirname(dirname(fromFileUrl(import.meta.url)));
/** The schema whose interfaces' JSDoc describes each key. */
export const SCHEMA_FILE = `${ROOT}/src/config/schema.ts`;
/** Where the reference is written. */
export const DOCS_FILE = `${ROOT}/docs/configuration.md`;

/** One documented field of an interface in schema.ts. */
interface FieldDoc {
  text: string;
  /** The `@default` tag's text, if any. */
  default?: string;
}

/** A table as the interfaces describe it: its summary and its fields' docs. */
interface TableDoc {
  summary: string;
  fields: Map<string, FieldDoc>;
}

/** A key's schema with `prefault`/`optional`/`default` taken off, and whether one was. */
function unwrap(schema: z.core.$ZodType): { inner: z.core.$ZodType; optional: boolean } {
  let s = schema;
  let optional = false;
  for (;;) {
    if (s instanceof z.ZodPrefault || s instanceof z.ZodOptional || s instanceof z.ZodDefault) {
      optional = true;
      s = s.unwrap() as z.core.$ZodType;
    } else return { inner: s, optional };
  }
}

/** The JSDoc of every interface in schema.ts that names its table (`[agent]`, `[[topic]]`). */
function tableDocs(source: string): Map<string, TableDoc> {
  const tables = new Map<string, TableDoc>();
  const iface = /\/\*\*([\s\S]*?)\*\/\s*export interface \w+ \{([\s\S]*?)\n\}/g;
  for (const m of source.matchAll(iface)) {
    const doc = clean(m[1]);
    const name = /`\[\[?([a-z0-9_.]+)\]\]?`/.exec(doc);
    if (!name) continue;
    const fields = new Map<string, FieldDoc>();
    const field = /(?:\/\*\*([\s\S]*?)\*\/\s*)?(\w+)\??: [^;]+;/g;
    for (const f of m[2].matchAll(field)) {
      if (f[1] === undefined) continue;
      const text = clean(f[1]);
      const tag = /@default\s+([\s\S]*)$/.exec(text);
      fields.set(f[2], {
        text: text.replace(/\s*@default[\s\S]*$/, "").trim(),
        default: tag?.[1].trim(),
      });
    }
    tables.set(name[1], { summary: doc.replace(/^.*?`:\s*/, ""), fields });
  }
  return tables;
}

/** A JSDoc body as one line: `*` margins gone, `{@link X}` as `X`. */
function clean(jsdoc: string): string {
  return jsdoc.split("\n").map((l) => l.replace(/^\s*\*\s?/, "").trim()).join(" ")
    .replace(/\{@link(?:code)? ([^}]+)\}/g, "$1").replace(/\s+/g, " ").trim();
}

/** The key's type as the file writes it. */
function typeOf(schema: z.core.$ZodType): string {
  const unit = (schema as { meta?: () => { unit?: string } | undefined }).meta?.()?.unit;
  if (unit) return unit;
  if (schema instanceof z.ZodEnum) {
    return (schema.options as string[]).map((o) => `\`"${o}"\``).join(" \\| ");
  }
  if (schema instanceof z.ZodBoolean) return "boolean";
  if (schema instanceof z.ZodNumber) return schema.isInt ? "integer" : "number";
  if (schema instanceof z.ZodString) return "string";
  if (schema instanceof z.ZodRecord) return "table of strings";
  throw new Error(`gen_config_docs: no type name for ${schema.constructor.name}`);
}

/** The default as TOML writes it. */
function show(value: unknown): string {
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value);
    return entries.length === 0
      ? "{}"
      : `{ ${entries.map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ")} }`;
  }
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

/**
 * Compares a `@default` tag with the real default (quotes and a trailing remark ignored;
 * durations and sizes by value, so `60 s` is `1 m`).
 */
function sameDefault(tag: string, value: unknown, type: string): boolean {
  const bare = tag.replace(/\s*\(.*\)$/, "").replace(/^"(.*)"$/, "$1");
  if (bare === String(value) || bare === show(value)) return true;
  try {
    if (type === "duration") return parseDuration(bare) === parseDuration(String(value));
    if (type.startsWith("size")) {
      const size = (t: string) => parseSize(t.replace(/\s*\/\s*s$/i, ""));
      return size(bare) === size(String(value));
    }
  } catch {
    return false;
  }
  return false;
}

/** One row of a table's key list. */
interface KeyRow {
  key: string;
  type: string;
  default: string;
  env: string;
  text: string;
}

/**
 * The whole of docs/configuration.md, formatted as `deno fmt` would (so the committed file
 * passes `deno fmt --check` unchanged).
 * @throws {Error} when a key has no JSDoc, or its `@default` disagrees with the schema's
 */
export async function configDocs(schemaSource?: string): Promise<string> {
  return await denoFmtMarkdown(rawDocs(schemaSource ?? await readFile(SCHEMA_FILE, "utf8")));
}

/** Runs `deno fmt` on Markdown text, with the repository's settings. */
async function denoFmtMarkdown(text: string): Promise<string> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--ext=md", "-"],
    cwd: ROOT,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(text));
  await writer.close();
  const out = await child.output();
  if (!out.success) throw new Error(`deno fmt: ${new TextDecoder().decode(out.stderr)}`);
  return new TextDecoder().decode(out.stdout);
}

/** The reference before formatting; `source` is schema.ts's text (its JSDoc). */
function rawDocs(source: string): string {
  const docs = tableDocs(source);
  // The schema's defaults, written as the file writes them.
  const parsed = configSchema.parse({ agent: { data_dir: "D" }, topic: [{ stream: 0, topic: 0 }] });
  const written = z.encode(configSchema, parsed) as Record<string, unknown>;
  const fileSchema = (configSchema as unknown as { in: z.ZodObject }).in;
  const unsupported = new Set(NOT_SUPPORTED_YET.map((p) => p.join(".")));
  const problems: string[] = [];
  const sections: string[] = [];
  const notYet: KeyRow[] = [];

  const walk = (
    table: string,
    schema: z.ZodObject,
    defaults: Record<string, unknown>,
    array = false,
  ) => {
    const doc = docs.get(table);
    if (!doc) {
      problems.push(`no interface in schema.ts names [${table}] in its JSDoc`);
      return;
    }
    const rows: KeyRow[] = [];
    const later: (() => void)[] = [];
    for (const [key, raw] of Object.entries(schema.shape)) {
      const path = `${table}.${key}`;
      const { inner, optional } = unwrap(raw as z.core.$ZodType);
      if (inner instanceof z.ZodObject) {
        later.push(() => walk(path, inner, defaults[key] as Record<string, unknown>));
        continue;
      }
      if (inner instanceof z.ZodArray) {
        const element = unwrap(inner.element as z.core.$ZodType).inner as z.ZodObject;
        later.push(() => walk(key, element, (defaults[key] as Record<string, unknown>[])[0], true));
        continue;
      }
      const field = doc.fields.get(key);
      if (!field) {
        problems.push(`${path}: no JSDoc on its field in schema.ts`);
        continue;
      }
      let shown: string;
      if (!optional) {
        shown = "required";
        if (field.default !== undefined) {
          problems.push(`${path}: required, yet @default ${field.default}`);
        }
      } else if (field.default === undefined) {
        problems.push(`${path}: no @default in its JSDoc`);
        shown = "";
      } else if (raw instanceof z.ZodOptional) {
        shown = `= \`${field.default}\``; // filled from another key
      } else {
        const value = defaults[key];
        if (!sameDefault(field.default, value, typeOf(inner))) {
          problems.push(`${path}: @default ${field.default}, but the schema's is ${show(value)}`);
        }
        shown = `\`${show(value)}\``;
      }
      const secret = SECRET_FIELDS.find((f) => f.path.join(".") === path);
      const row = {
        key,
        type: typeOf(inner),
        default: shown,
        env: secret ? `\`${secret.env}\` (secret)` : "",
        text: field.text,
      };
      if (unsupported.has(path)) {
        notYet.push({ ...row, key: path, text: row.text.replace(/ Not supported yet:.*$/, "") });
      } else rows.push(row);
    }
    sections.push(
      [
        `## \`${array ? `[[${table}]]` : `[${table}]`}\``,
        "",
        doc.summary.replace(/^./, (c) => c.toUpperCase()),
        "",
        ...keyTable(rows),
      ].join("\n"),
    );
    for (const next of later) next();
  };
  walk(
    "agent",
    fileSchema.shape.agent as unknown as z.ZodObject,
    written.agent as Record<string, unknown>,
  );
  walk(
    "tiered_storage",
    unwrap(fileSchema.shape.tiered_storage as z.core.$ZodType).inner as z.ZodObject,
    written.tiered_storage as Record<string, unknown>,
  );
  const topicArray = unwrap(fileSchema.shape.topic as z.core.$ZodType).inner as z.ZodArray;
  walk(
    "topic",
    unwrap(topicArray.element as z.core.$ZodType).inner as z.ZodObject,
    (written.topic as Record<string, unknown>[])[0],
    true,
  );
  if (problems.length > 0) {
    throw new Error(`gen_config_docs: schema.ts needs fixing:\n  ${problems.join("\n  ")}`);
  }
  return [
    "# Configuration reference",
    "",
    "<!-- Generated from src/config/schema.ts by scripts/gen_config_docs.ts; do not edit.",
    "     After changing the schema: npx -y deno@2 run -A scripts/gen_config_docs.ts -->",
    "",
    "Every key of `tierd.toml`, with its type, default and environment override. " +
    "`tierd.example.toml` is a commented, working file; `tierd config show` prints the " +
    'effective config (every default filled in, secrets as `"***"`); `tierd config check` ' +
    "validates one.",
    "",
    '- **Durations** are written with a unit: `"250 ms"`, `"90 s"`, `"5 m"`, `"2 h 30 m"`, ' +
    '`"1 d"`, `"1 w"`. **Sizes** are binary (`"512 KiB"`, `"64 MiB"`, `"4 GiB"`), decimal ' +
    '(`"1 MB"`) or a bare byte count; a rate adds `/s` (`"100 MiB/s"`). `"unlimited"` lifts ' +
    "a limit where one may be lifted.",
    "- **Paths** are relative to the config file's directory (`~/` is the home directory). tierd " +
    "never writes into `agent.data_dir`: `state_dir`, the cache and an `fs` store must lie " +
    "outside it, and apart from each other where wiping one would wipe another (only the " +
    "cache may lie inside `state_dir`), also through symlinks.",
    "- **Unknown keys are errors**, and every error names the key path and the value as written " +
    '(secrets as `"***"`); a bad config exits 2.',
    "- **Secrets** are never logged or shown. Each can come from its environment variable " +
    "(the env column), which wins over the file when it is set and not empty; no other key " +
    "has an environment override.",
    "- **Names** that go into URLs and object keys follow their store's rules: S3 and GCS " +
    "bucket names, Azure account and container names, and every `prefix` (letters, digits, " +
    "`.`, `_`, `-`, inner `/`, no `.` or `..` segment) and `agent.cluster_id`.",
    "",
    sections.join("\n\n"),
    "",
    "## Not supported yet",
    "",
    "These keys are in the schema, but nothing in tierd reads them yet. Setting one in the file " +
    "is an error (`not supported yet`), so a value that would do nothing is never silently " +
    "accepted; `tierd config show` leaves them out.",
    "",
    ...keyTable(notYet),
    "",
  ].join("\n");
}

/** A Markdown table of keys. */
function keyTable(rows: KeyRow[]): string[] {
  const cell = (s: string) => s.replace(/\|/g, (m, i, all) => (all[i - 1] === "\\" ? m : "\\|"));
  return [
    "| key | type | default | env | description |",
    "| --- | --- | --- | --- | --- |",
    ...rows.map((r) => `| \`${r.key}\` | ${r.type} | ${r.default} | ${r.env} | ${cell(r.text)} |`),
  ];
}

if (import.meta.main) {
  const text = await configDocs();
  if (Deno.args.includes("--check")) {
    const current = await readFile(DOCS_FILE, "utf8").catch(() => "");
    if (current !== text) {
      console.error(
        "docs/configuration.md is stale: npx -y deno@2 run -A scripts/gen_config_docs.ts",
      );
      Deno.exit(1);
    }
    console.error("docs/configuration.md is up to date");
  } else {
    await writeFile(DOCS_FILE, text);
    console.error(`wrote ${DOCS_FILE}`);
  }
}
