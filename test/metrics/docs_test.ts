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

Deno.test("docs/metrics.md and the alert rules name the same alerts, and every condition to alert on has one", async () => {
  const doc = await readFile(new URL("../../docs/metrics.md", import.meta.url), "utf8");
  const rules = await readFile(
    new URL("../../deploy/prometheus/tierd-alerts.yml", import.meta.url),
    "utf8",
  );
  const defined = new Set([...rules.matchAll(/^\s*- alert: (\w+)$/gm)].map((m) => m[1]));
  const named = new Set([...doc.matchAll(/`(Tierd[A-Za-z]+)`/g)].map((m) => m[1]));
  assert.deepEqual([...named].filter((n) => !defined.has(n)), [], "named but no such rule");
  assert.deepEqual([...defined].filter((n) => !named.has(n)), [], "rules the page never names");
  // Each metric row's last cell ("alert on") is empty or names the rule that raises it.
  const unruled: string[] = [];
  for (const m of doc.matchAll(/^\| `([a-z_]+)`\s*\|\s*[a-z]+\s*\|.*\|([^|]*)\|$/gm)) {
    const alertOn = m[2].trim();
    if (alertOn !== "" && !/`Tierd[A-Za-z]+`/.test(alertOn)) unruled.push(`${m[1]}: ${alertOn}`);
  }
  assert.deepEqual(unruled, [], "a condition to alert on without a rule");
});
