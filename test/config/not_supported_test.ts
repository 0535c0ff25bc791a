// A config key that does nothing is a lie (issue 10): every key the schema accepts is either read
// by the code or refused with "not supported yet". The audit is by name: each key's last segment
// must be read as a property (`.delete_grace`) somewhere outside the config module, which catches
// the way a key goes unimplemented (parsed, documented, read by nothing); keys whose only reader
// is the schema itself are named. The refusal itself is checked with a key passed in.
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { ConfigError } from "../../src/config/error.ts";
import { parseConfig } from "../../src/config/load.ts";
import { NOT_SUPPORTED_YET } from "../../src/config/schema.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** Read by the schema's own decoding (a topic's defaults) or its helpers (`resolveEvictVia`). */
const READ_BY_THE_SCHEMA = new Set([
  "tiered_storage.default_local_retention_age",
  "tiered_storage.default_local_retention_size",
  "agent.evict_via",
]);

/** Files that only parse, check, show or document the config: reading a key there is no use. */
const NOT_USES = new Set([
  "schema.ts",
  "load.ts",
  "redact.ts",
  "secrets.ts",
  "rules.ts",
  "error.ts",
]);

const MINIMAL = `[agent]\ndata_dir = "broker"\n\n[[topic]]\nstream = 1\ntopic = 1\n`;

/** Every key path of a parsed config, `topic[]` for the topic tables. */
function keyPaths(): string[] {
  const config = parseConfig(MINIMAL, "/tmp/tierd.toml", {});
  const out: string[] = [];
  const walk = (v: unknown, path: string[]) => {
    if (Array.isArray(v)) return walk(v[0], [...path.slice(0, -1), `${path.at(-1)}[]`]);
    if (v !== null && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) walk(x, [...path, k]);
      return;
    }
    out.push(path.join("."));
  };
  walk(config, []);
  return out;
}

async function sources(dir: string): Promise<{ path: string; text: string }[]> {
  const out: { path: string; text: string }[] = [];
  for (const e of await readdir(join(ROOT, dir), { withFileTypes: true, recursive: true })) {
    if (!e.isFile() || !e.name.endsWith(".ts")) continue;
    const path = join(e.parentPath, e.name);
    out.push({ path, text: await readFile(path, "utf8") });
  }
  return out;
}

/** Whether `text` reads the key: as a property (`.key`), or destructured (`{ key, … } =`). */
function reads(text: string, key: string): boolean {
  const leaf = key.split(".").at(-1)!;
  return new RegExp(`\\.${leaf}(?![A-Za-z0-9_])|\\{ ${leaf}(,[^}]*)? \\} =`).test(text);
}

Deno.test("config: every key is read by the code, or refused as not supported yet", async () => {
  const files = [...await sources("src"), ...await sources("providers")];
  const uses = files.filter((f) =>
    !(f.path.includes("/src/config/") && NOT_USES.has(f.path.split("/").at(-1)!))
  );
  const schema = files.find((f) => f.path.endsWith("/src/config/schema.ts"))!.text;
  const refused = new Set(NOT_SUPPORTED_YET.map((p) => p.join(".")));
  const keys = keyPaths();
  assert.ok(keys.length > 70, `${keys.length} keys`);
  const unread: string[] = [];
  for (const key of keys) {
    const read = uses.some((f) => reads(f.text, key)) ||
      (READ_BY_THE_SCHEMA.has(key) && reads(schema, key));
    if (refused.has(key)) {
      assert.ok(!read, `${key} is read now: take it out of NOT_SUPPORTED_YET`);
    } else if (!read) {
      unread.push(key);
    }
  }
  assert.deepEqual(
    unread,
    [],
    "keys nothing reads: implement them, or add them to NOT_SUPPORTED_YET in src/config/schema.ts",
  );
  for (const key of refused) assert.ok(keys.includes(key), `${key} is not a config key`);
});

Deno.test("config: a file setting a key that is not supported yet is refused, naming it; one that leaves it out loads", () => {
  const notSupported = [["tiered_storage", "upload_piece_size"], [
    "tiered_storage",
    "housekeeping",
    "interval",
  ]];
  const text = MINIMAL.replace(
    "[[topic]]",
    `[tiered_storage]\nupload_piece_size = "2 MiB"\n\n[[topic]]`,
  );
  assert.throws(
    () => parseConfig(text, "/etc/tierd.toml", {}, { notSupported }),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.equal(err.issues.length, 1, "only the key the file sets");
      assert.equal(err.issues[0].path, "tiered_storage.upload_piece_size");
      assert.equal(err.issues[0].value, '"2 MiB"');
      assert.match(err.message, /tiered_storage\.upload_piece_size = "2 MiB": not supported yet/);
      return true;
    },
  );
  parseConfig(MINIMAL, "/etc/tierd.toml", {}, { notSupported });
});
