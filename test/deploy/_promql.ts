// The metric names a PromQL expression reads, for checking that dashboards and alert rules
// query only metrics tierd exports. A small scanner, not a parser: it drops strings, label
// matchers, ranges, grouping clauses, numbers and durations, then takes every identifier that is
// not a function call, keyword or aggregation.

const KEYWORDS = new Set([
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "and",
  "or",
  "unless",
  "bool",
  "offset",
  "inf",
  "nan",
]);

/** Every metric name `expr` selects. Grafana's `$variables` are not metric names. */
export function metricNames(expr: string): Set<string> {
  const text = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, " ") // strings
    .replace(/\{[^}]*\}/g, " ") // label matchers
    .replace(/\[[^\]]*\]/g, " ") // ranges and subqueries
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ") // groupings
    .replace(/\$\{?[A-Za-z_][A-Za-z0-9_]*\}?/g, " ") // Grafana variables
    .replace(/\boffset\s+\d+[smhdwy]\b/g, " ")
    .replace(/\b\d+(\.\d+)?([eE][-+]?\d+)?\b/g, " ");
  const out = new Set<string>();
  for (const m of text.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const after = text.slice(m.index! + m[0].length).trimStart();
    if (after.startsWith("(")) continue; // a function or an aggregation
    if (KEYWORDS.has(m[0].toLowerCase())) continue;
    out.add(m[0]);
  }
  return out;
}

/** The names a scrape exposes: each family, and a histogram's `_bucket`, `_sum`, `_count`. */
export function scrapedNames(scrape: string): Set<string> {
  const out = new Set<string>();
  for (const m of scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    out.add(m[1]);
    if (m[2] === "histogram" || m[2] === "summary") {
      for (const s of ["_bucket", "_sum", "_count"]) out.add(m[1] + s);
    }
  }
  return out;
}

/** Every `expr` in a Grafana dashboard (panel targets, rows' panels) and its query variables. */
export function dashboardExpressions(dashboard: unknown): string[] {
  const out: string[] = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if ((k === "expr" || k === "definition") && typeof x === "string") out.push(x);
        else walk(x);
      }
    }
  };
  walk(dashboard);
  return out.map((e) => e.replace(/^label_values\(([^,)]+).*$/, "$1"));
}

/** Every `expr:` of a Prometheus rule file (plain, or a `>-` / `|` block scalar). */
export function ruleExpressions(yaml: string): string[] {
  const lines = yaml.split("\n");
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^(\s*)expr:\s*(.*)$/.exec(lines[i]);
    if (!m) continue;
    if (!/^[>|]/.test(m[2])) {
      out.push(m[2]);
      continue;
    }
    const block: string[] = [];
    while (
      i + 1 < lines.length && (lines[i + 1].trim() === "" || indent(lines[i + 1]) > m[1].length)
    ) {
      block.push(lines[++i].trim());
    }
    out.push(block.join(" ").trim());
  }
  return out;
}

function indent(line: string): number {
  return line.length - line.trimStart().length;
}
