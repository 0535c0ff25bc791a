import assert from "node:assert/strict";
import fc from "fast-check";
import {
  ConfigError,
  formatSize,
  parseConfig,
  REDACTED,
  redactedConfig,
  renderConfig,
  SECRET_FIELDS,
  type SecretField,
  secretValues,
} from "../../src/config/mod.ts";

const SOURCE = "/srv/tierd/tierd.toml";
const BASE = `[agent]\ndata_dir = "broker"\n`;

/** Secrets long and random enough never to occur in config text by chance. */
const secret = fc.string({
  unit: fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_.-"),
  minLength: 12,
  maxLength: 40,
});

/** Where a secret comes from in one generated case. */
type Placement = "file" | "env" | "unset";

/** An Azure account key: base64, as the config requires. */
const base64Secret = fc.uint8Array({ minLength: 9, maxLength: 30 })
  .map((b) => btoa(String.fromCharCode(...b)));

const placement = fc.constantFrom<Placement>("file", "env", "unset");
const secretsArb = fc.tuple(
  ...SECRET_FIELDS.map((f) =>
    fc.tuple(f.env === "TIERD_AZURE_KEY" ? base64Secret : secret, placement)
  ),
);

/** The `TIERD_*` variables that give `config`'s secrets back. */
function secretEnv(config: object): Record<string, string> {
  const env: Record<string, string> = {};
  for (const f of SECRET_FIELDS) {
    const value = f.path.reduce<unknown>((v, k) => (v as Record<string, unknown>)[k], config);
    if (typeof value === "string" && value !== "") env[f.env] = value;
  }
  return env;
}

/** TOML tables (by dotted name) holding the `file` secrets, plus the `env` secrets. */
function place(
  values: [string, Placement][],
  extra: Record<string, string[]> = {},
): { toml: string; env: Record<string, string>; set: string[] } {
  const tables: Record<string, string[]> = { ...extra };
  (tables.agent ??= []).unshift('data_dir = "broker"');
  const env: Record<string, string> = {};
  const set: string[] = [];
  SECRET_FIELDS.forEach((f: SecretField, i) => {
    const [value, where] = values[i];
    if (where === "unset") return;
    set.push(value);
    if (where === "env") env[f.env] = value;
    else (tables[f.path.slice(0, -1).join(".")] ??= []).push(`${f.path.at(-1)} = "${value}"`);
  });
  const toml = Object.entries(tables).map(([name, lines]) => `[${name}]\n${lines.join("\n")}\n`)
    .join("");
  return { toml, env, set };
}

Deno.test("redactedConfig stars set secrets and leaves unset ones empty", () => {
  const config = parseConfig(
    `${BASE}api_token = "tok-123456789"\n[tiered_storage.s3]\nsecret_key = "s3-secret-value"\n`,
    SOURCE,
    {},
  );
  const shown = redactedConfig(config) as typeof config;
  assert.equal(shown.agent.api_token, REDACTED);
  assert.equal(shown.tiered_storage.s3.secret_key, REDACTED);
  assert.equal(shown.tiered_storage.s3.access_key, "");
  assert.equal(shown.agent.broker.password, "");
  assert.equal(config.agent.api_token, "tok-123456789", "the loaded config is left alone");
  assert.deepEqual(secretValues(config), ["s3-secret-value", "tok-123456789"]);
  const text = renderConfig(config);
  assert.match(text, /api_token = "\*\*\*"/);
  assert.match(text, /access_key = ""/);
});

Deno.test('renderConfig writes durations and sizes as text and unlimited as "unlimited"', () => {
  const config = parseConfig(
    `${BASE}[tiered_storage]\nfetch_bandwidth = "50 MiB/s"\nsegment_upload_timeout = "2 m"\n` +
      `[[topic]]\nstream = 3\ntopic = 4\nlocal_retention_size = 1073741824\n`,
    SOURCE,
    {},
  );
  assert.equal(config.tiered_storage.fetch_bandwidth, 50 * 1024 * 1024);
  const text = renderConfig(config);
  for (
    const line of [
      'fetch_bandwidth = "50 MiB/s"',
      'segment_upload_timeout = "2 m"',
      'chunk_size = "8 MiB"',
      'local_retention_size = "1 GiB"',
      'local_retention_age = "unlimited"',
      'fetch_timeout = "5 s"',
    ]
  ) assert.ok(text.includes(line), line);
  assert.deepEqual(parseConfig(text, SOURCE, {}), config);
});

Deno.test("property: no secret reaches renderConfig; with the secrets in env it re-parses to the config", () => {
  fc.assert(fc.property(secretsArb, (values) => {
    const { toml, env, set } = place(values, {
      tiered_storage: ["enabled = true", 'backend = "sim"'],
    });
    const config = parseConfig(toml, SOURCE, env);
    assert.deepEqual(new Set(secretValues(config)), new Set(set));
    const text = renderConfig(config);
    for (const s of set) assert.ok(!text.includes(s), `secret ${s} in:\n${text}`);
    assert.deepEqual(parseConfig(text, SOURCE, secretEnv(config)), config);
  }));
});

Deno.test("property: no secret reaches a ConfigError, whatever the mistake", () => {
  const mistake = fc.constantFrom<(stray: string) => Record<string, string[]>>(
    // schema phase: a bad value beside the secrets, a secret under a misspelled key,
    // a secret of the wrong type
    (s) => ({ "tiered_storage.cache": [`chunk_size = "3 MiB"`, `sise = "${s}"`] }),
    (s) => ({ "tiered_storage.s3": [`secret_kye = "${s}"`] }),
    (s) => ({ "tiered_storage.gcs": [`token = ["${s}"]`, 'prefix = ""'] }),
    (s) => ({ "agent.broker": [`password = ${s.length}`, `pasword = "${s}"`] }),
    // rule phase: a backend's requirements unmet (bucket/account never set), Azure keys clash
    () => ({ tiered_storage: ["enabled = true", 'backend = "azure"'] }),
    () => ({ tiered_storage: ["enabled = true", 'backend = "s3"'] }),
    () => ({ tiered_storage: ["enabled = true", 'backend = "gcs"'] }),
    () => ({ agent: ['evict_via = "broker"'] }),
  );
  fc.assert(fc.property(secretsArb, mistake, secret, (values, make, stray) => {
    const { toml, env, set } = place(values, make(stray));
    try {
      parseConfig(toml, SOURCE, env);
      assert.fail(`expected a ConfigError for:\n${toml}`);
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      const shown = e.message + JSON.stringify(e.issues);
      for (const s of [...set, stray]) assert.ok(!shown.includes(s), `secret ${s} in:\n${shown}`);
    }
  }));
});

Deno.test("property: a TOML syntax error never quotes the line holding a secret", () => {
  const broken = fc.constantFrom(
    (s: string) => `secret_key = "${s}`,
    (s: string) => `secret_key = "${s}" trailing`,
    (s: string) => `secret_key = ${s}`,
    (s: string) => `secret_key = "${s}"\nsecret_key = "${s}"`,
  );
  fc.assert(fc.property(secret, broken, (s, line) => {
    const text = `${BASE}[tiered_storage.s3]\n${line(s)}\nbucket = "b"\n`;
    try {
      parseConfig(text, SOURCE, {});
      assert.fail("expected a syntax error");
    } catch (e) {
      assert.ok(e instanceof ConfigError);
      assert.ok(e.issues[0].line !== undefined && e.issues[0].line >= 3);
      assert.ok(!e.message.includes(s), e.message);
    }
  }));
});

Deno.test("property: random valid configs survive render → parse unchanged", () => {
  const KiB4 = 4096;
  const MiB = 1024 * 1024;
  const ms = fc.oneof(fc.constant(Infinity), fc.nat({ max: 10 ** 12 }));
  const bytes = fc.oneof(fc.constant(Infinity), fc.nat({ max: 2 ** 50 }));
  const writeMs = (v: number) => (v === Infinity ? '"unlimited"' : `"${v} ms"`);
  const writeBytes = (v: number) => (v === Infinity ? '"unlimited"' : String(v));
  const topic = fc.record({
    stream: fc.nat({ max: 5 }),
    topic: fc.nat({ max: 5 }),
    tiered_storage: fc.boolean(),
    local_retention_age: ms,
    local_retention_size: bytes,
    message_expiry: ms,
    max_topic_size: bytes,
    /** Which of its backend's storage classes (CLASSES) the topic names. */
    cls: fc.nat({ max: 5 }),
  });
  const CLASSES: Record<string, string[]> = {
    s3: ["", "STANDARD_IA", "GLACIER_IR", "COLD_PLACEMENT"],
    gcs: ["", "NEARLINE", "ARCHIVE"],
    azure: ["", "Cool", "Cold"],
    fs: [""],
    sim: [""],
  };
  const arb = fc.record({
    topics: fc.uniqueArray(topic, { selector: (t) => `${t.stream}/${t.topic}`, maxLength: 6 }),
    fetch_timeout: fc.integer({ min: 1, max: 9_999 }),
    chunk_size: fc.integer({ min: 256, max: 16_384 }).map((n) => n * KiB4),
    fetch_concurrency: fc.integer({ min: 1, max: 16 }),
    cache_extra: fc.nat({ max: 2 ** 40 }),
    part_size: fc.integer({ min: 5 * MiB, max: 5 * 1024 * MiB }),
    fetch_bandwidth: fc.oneof(fc.constant(Infinity), fc.integer({ min: 1, max: 2 ** 40 })),
    backend: fc.constantFrom("s3", "gcs", "azure", "fs", "sim"),
  });
  fc.assert(fc.property(arb, (r) => {
    const classOf = (t: { cls: number }) => CLASSES[r.backend][t.cls % CLASSES[r.backend].length];
    const cacheSize = 2 * r.chunk_size * r.fetch_concurrency + r.cache_extra;
    const text = `${BASE}[tiered_storage]\nbackend = "${r.backend}"\n` +
      `fetch_timeout = "${r.fetch_timeout} ms"\nfetch_concurrency = ${r.fetch_concurrency}\n` +
      `part_size = ${r.part_size}\nfetch_bandwidth = ${writeBytes(r.fetch_bandwidth)}\n` +
      `[tiered_storage.cache]\nchunk_size = "${formatSize(r.chunk_size)}"\nsize = ${cacheSize}\n` +
      r.topics.map((t) =>
        `[[topic]]\nstream = ${t.stream}\ntopic = ${t.topic}\ntiered_storage = ${t.tiered_storage}\n` +
        `local_retention_age = ${writeMs(t.local_retention_age)}\n` +
        `local_retention_size = ${writeBytes(t.local_retention_size)}\n` +
        `message_expiry = ${writeMs(t.message_expiry)}\n` +
        `max_topic_size = ${writeBytes(t.max_topic_size)}\n` +
        `storage_class = "${classOf(t)}"\n`
      ).join("");
    const config = parseConfig(text, SOURCE, {});
    assert.deepEqual(
      config.topic,
      r.topics.map(({ cls: _, ...t }) => ({ ...t, storage_class: classOf({ cls: _ }) })),
    );
    assert.equal(config.tiered_storage.cache.size, cacheSize);
    assert.deepEqual(parseConfig(renderConfig(config), SOURCE, {}), config);
  }));
});
