// A strict little parser of the Prometheus text exposition format 0.0.4, for tests: it refuses
// anything a scraper would (samples before their TYPE, bad escapes, duplicate series,
// non-cumulative buckets) so a passing parse means a scrape would succeed.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  help: string;
  type: string;
  samples: Sample[];
}

function parseValue(text: string, line: string): number {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  if (text === "NaN") return NaN;
  if (!/^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/.test(text)) {
    throw new Error(`bad value ${JSON.stringify(text)} in ${JSON.stringify(line)}`);
  }
  return Number(text);
}

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const m = /^([a-zA-Z_][a-zA-Z0-9_]*)="/.exec(text.slice(i));
    if (!m) throw new Error(`bad label at ${i} in ${JSON.stringify(line)}`);
    i += m[0].length;
    let value = "";
    for (;;) {
      const ch = text[i++];
      if (ch === undefined) throw new Error(`unterminated label value in ${JSON.stringify(line)}`);
      if (ch === '"') break;
      if (ch === "\\") {
        const esc = text[i++];
        if (esc === "\\") value += "\\";
        else if (esc === '"') value += '"';
        else if (esc === "n") value += "\n";
        else throw new Error(`bad escape \\${esc} in ${JSON.stringify(line)}`);
      } else if (ch === "\n") {
        throw new Error(`raw newline in a label value`);
      } else value += ch;
    }
    if (m[1] in labels) throw new Error(`label ${m[1]} repeated in ${JSON.stringify(line)}`);
    labels[m[1]] = value;
    if (text[i] === ",") i++;
    else if (i < text.length) throw new Error(`expected , at ${i} in ${JSON.stringify(line)}`);
  }
  return labels;
}

/** Parses a scrape into metric families; throws on anything malformed. */
export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  if (text !== "" && !text.endsWith("\n")) throw new Error("the scrape must end with a newline");
  for (const line of text.split("\n").slice(0, -1)) {
    if (line.startsWith("# HELP ")) {
      const m = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
      if (!m) throw new Error(`bad HELP line ${JSON.stringify(line)}`);
      if (families.has(m[1])) throw new Error(`family ${m[1]} declared twice`);
      families.set(m[1], { name: m[1], help: m[2].replace(/\\n/g, "\n"), type: "", samples: [] });
      continue;
    }
    if (line.startsWith("# TYPE ")) {
      const m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/
        .exec(line);
      const f = m && families.get(m[1]);
      if (!m || !f || f.type !== "") throw new Error(`bad TYPE line ${JSON.stringify(line)}`);
      f.type = m[2];
      continue;
    }
    if (line.startsWith("#") || line === "") continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/s.exec(line);
    if (!m) throw new Error(`bad sample line ${JSON.stringify(line)}`);
    const [, name, labelText, valueText] = m;
    const family = families.get(name) ??
      families.get(name.replace(/_(bucket|sum|count)$/, ""));
    if (!family || family.type === "") throw new Error(`sample ${name} before its TYPE`);
    if (family.name !== name && family.type !== "histogram") {
      throw new Error(`sample ${name} does not belong to ${family.type} ${family.name}`);
    }
    const labels = parseLabels(labelText ?? "", line);
    const key = name + JSON.stringify(Object.entries(labels).sort());
    if (seen.has(key)) throw new Error(`duplicate series ${line}`);
    seen.add(key);
    family.samples.push({ name, labels, value: parseValue(valueText, line) });
  }
  for (const f of families.values()) {
    if (f.type === "histogram") checkHistogram(f);
  }
  return families;
}

/** Buckets must be cumulative, end in +Inf, and +Inf must equal _count. */
function checkHistogram(f: Family): void {
  const series = new Map<string, { buckets: [number, number][]; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const entry = series.get(key) ?? { buckets: [] };
    series.set(key, entry);
    if (s.name.endsWith("_bucket")) entry.buckets.push([parseValue(le, s.name), s.value]);
    if (s.name.endsWith("_count")) entry.count = s.value;
  }
  for (const [key, { buckets, count }] of series) {
    for (let i = 1; i < buckets.length; i++) {
      if (buckets[i][0] <= buckets[i - 1][0] || buckets[i][1] < buckets[i - 1][1]) {
        throw new Error(`histogram ${f.name}${key}: buckets are not cumulative`);
      }
    }
    const last = buckets.at(-1);
    if (!last || last[0] !== Infinity || last[1] !== count) {
      throw new Error(`histogram ${f.name}${key}: +Inf bucket must equal _count`);
    }
  }
}

/** The value of the sample `name` with exactly `labels`, or undefined. */
export function sampleValue(
  families: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const family = families.get(name) ?? families.get(name.replace(/_(bucket|sum|count)$/, ""));
  const want = JSON.stringify(Object.entries(labels).sort());
  return family?.samples.find((s) =>
    s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === want
  )?.value;
}
