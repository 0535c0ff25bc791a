// docs/metrics.md lists exactly the metrics tierd exports: each one in a table row with its
// type, and no row for a metric that does not exist.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { initStoreSeries } from "../../src/metrics/instrument_store.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics } from "../../src/metrics/tierd.ts";
import { parseExposition } from "./_exposition.ts";

Deno.test("docs/metrics.md documents every exported metric, with its type, and no other", async () => {
  const r = new Registry();
  initStoreSeries(createTierdMetrics(r));
  const exported = parseExposition(r.render());
  const doc = await readFile(new URL("../../docs/metrics.md", import.meta.url), "utf8");
  const rows = new Map<string, string>();
  for (const m of doc.matchAll(/^\| `([a-z_]+)`\s*\|\s*([a-z]+)\s*\|/gm)) rows.set(m[1], m[2]);
  const missing = [...exported.keys()].filter((n) => !rows.has(n));
  assert.deepEqual(missing, [], "exported but not documented");
  // The process_* metrics exist only where /proc does (Linux).
  const procfs = exported.has("process_open_fds");
  const stale = [...rows.keys()].filter((n) =>
    !exported.has(n) && (procfs || !n.startsWith("process_"))
  );
  assert.deepEqual(stale, [], "documented but not exported");
  for (const [name, family] of exported) assert.equal(rows.get(name), family.type, name);
});
