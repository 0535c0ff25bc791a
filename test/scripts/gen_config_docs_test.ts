// docs/configuration.md is generated from the config schema: the committed file must be what
// scripts/gen_config_docs.ts writes now, list every key, and the generator must refuse a schema
// whose JSDoc is missing or whose @default disagrees with the real default.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { configDocs, DOCS_FILE, SCHEMA_FILE } from "../../scripts/gen_config_docs.ts";
import { parseConfig, renderConfig } from "../../src/config/mod.ts";

Deno.test("docs/configuration.md is up to date with the schema", async () => {
  const committed = await readFile(DOCS_FILE, "utf8");
  assert.ok(
    committed === await configDocs(),
    "docs/configuration.md is stale: run `npx -y deno@2 run -A scripts/gen_config_docs.ts`",
  );
});

Deno.test("the reference lists every key config show prints, and the unsupported ones", async () => {
  const docs = await configDocs();
  const shown = renderConfig(
    parseConfig('[agent]\ndata_dir = "d"\n[[topic]]\nstream = 0\ntopic = 0\n', "/x/t.toml", {}),
  );
  let table = "";
  for (const line of shown.split("\n")) {
    const header = /^\[\[?([a-z0-9_.]+)\]\]?$/.exec(line);
    if (header) {
      table = header[1];
      const heading = line.startsWith("[[") ? `## \`[[${table}]]\`` : `## \`[${table}]\``;
      // A key whose value is a table of strings (sse_context) is shown as a table of its own.
      const last = table.split(".").at(-1);
      assert.ok(
        docs.includes(heading) || new RegExp(`\\| \`${last}\` +\\| table of strings`).test(docs),
        line,
      );
      continue;
    }
    const key = /^([a-z_]+) = /.exec(line)?.[1];
    if (key) assert.match(docs, new RegExp(`\\| \`${key}\` +\\|`), `${table}.${key}`);
  }
  for (const key of ["upload_piece_size", "connection_idle_timeout"]) {
    assert.ok(docs.includes(`\`tiered_storage.${key}\``), key);
  }
  assert.match(docs, /`TIERD_AZURE_KEY` \(secret\)/);
});

Deno.test("the generator refuses drift: a wrong @default, a key without JSDoc", async () => {
  const source = await readFile(SCHEMA_FILE, "utf8");
  const wrong = source.replace('@default "127.0.0.1:7070"', '@default "0.0.0.0:7070"');
  assert.notEqual(wrong, source);
  await assert.rejects(
    configDocs(wrong),
    /agent\.listen: @default 0\.0\.0\.0:7070|agent\.listen: @default "0\.0\.0\.0:7070"/,
  );
  const undocumented = source.replace(
    /\/\*\* Readahead cap, in chunks\. @default 4 \*\/\n/,
    "",
  );
  assert.notEqual(undocumented, source);
  await assert.rejects(configDocs(undocumented), /tiered_storage\.cache\.readahead_max: no JSDoc/);
});
