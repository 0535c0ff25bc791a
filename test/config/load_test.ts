import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import {
  ALL_SERVICES,
  type Config,
  ConfigError,
  type ConfigIssue,
  loadConfig,
  parseConfig,
  resolveEvictVia,
  SECRET_FIELDS,
  type Service,
} from "../../src/config/mod.ts";
import { tempDir } from "../_util.ts";

const EXAMPLE = fileURLToPath(new URL("../../tierd.example.toml", import.meta.url));
const REPO = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/$/, "");
const SOURCE = "/etc/tierd/tierd.toml";
const MiB = 1024 * 1024;
const BASE = `[agent]\ndata_dir = "broker"\n`;

/** Parses `toml` expecting failure; returns the error. */
function refuse(toml: string, env: Record<string, string> = {}): ConfigError {
  try {
    parseConfig(toml, SOURCE, env);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  assert.fail(`expected a ConfigError for:\n${toml}`);
}

/** The issue at `path`; fails listing the issues there are if none. */
function issueAt(e: ConfigError, path: string): ConfigIssue {
  const found = e.issues.find((i) => i.path === path);
  assert.ok(found, `no issue at ${path}; got:\n${e.message}`);
  return found;
}

/** Asserts the config is refused at `path` with `value` shown, on one message line. */
function assertRefused(toml: string, path: string, value: string | undefined, expected?: RegExp) {
  const e = refuse(toml);
  const issue = issueAt(e, path);
  assert.equal(issue.value, value, e.message);
  if (expected) assert.match(issue.message, expected);
  const line = e.message.split("\n").find((l) => l.trim().startsWith(path));
  assert.ok(line, e.message);
  if (value !== undefined) assert.ok(line.includes(`${path} = ${value}`), line);
}

Deno.test("the shipped tierd.example.toml loads: fs backend, one untouched topic", async () => {
  const config = await loadConfig(EXAMPLE, {});
  assert.equal(config.tiered_storage.enabled, true);
  assert.equal(config.tiered_storage.backend, "fs");
  assert.equal(config.tiered_storage.fs.path, join(REPO, "var/store"));
  assert.equal(config.tiered_storage.cache.path, join(REPO, "var/cache"));
  assert.equal(config.agent.data_dir, join(REPO, "var/broker"));
  assert.equal(config.agent.state_dir, join(REPO, "var/state"));
  assert.deepEqual(config.topic, [{
    stream: 0,
    topic: 0,
    tiered_storage: true,
    local_retention_age: Infinity,
    local_retention_size: Infinity,
    message_expiry: Infinity,
    max_topic_size: Infinity,
    storage_class: "",
  }]);
  assert.equal(resolveEvictVia(config), "unlink");
});

Deno.test("the image's docker/tierd.toml guards records: it needs TIERD_READ_TOKEN, and serves probes apart", async () => {
  const docker = join(REPO, "docker/tierd.toml");
  await assert.rejects(loadConfig(docker, {}), (e) => {
    assert.ok(e instanceof ConfigError);
    issueAt(e, "agent.read_token");
    return true;
  });
  const config = await loadConfig(docker, { TIERD_READ_TOKEN: "read-token-from-env" });
  assert.equal(config.agent.listen, "0.0.0.0:7070");
  assert.equal(config.agent.read_auth, "token");
  assert.equal(config.agent.read_token, "read-token-from-env");
  assert.equal(config.agent.ops_listen, "0.0.0.0:7071");
});

Deno.test("a minimal file gets every default (the RFC's, plus tierd's own)", () => {
  const config = parseConfig(BASE, SOURCE, {});
  const expected: Config = {
    agent: {
      data_dir: "/etc/tierd/broker",
      state_dir: "/etc/tierd/var/state",
      listen: "127.0.0.1:7070",
      cluster_id: "local",
      format: "auto",
      seal_quiescence: 5_000,
      api_token: "",
      read_auth: "none",
      tls_cert: "",
      tls_key: "",
      read_token: "",
      read_auth_insecure: false,
      ops_listen: "",
      evict_via: "auto",
      log_level: "info",
      http_header_timeout: 10_000,
      http_idle_timeout: 30_000,
      http_max_connections: 0,
      read_memory_budget: 0,
      broker: {
        http_url: "",
        username: "",
        password: "",
        personal_access_token: "",
        tls_ca: "",
      },
      iggy_http: { listen: "", auth_cache_ttl: 1_000 },
      iggy_tcp: {
        listen: "",
        broker_address: "",
        tls_cert: "",
        tls_key: "",
        broker_tls: false,
        broker_tls_ca: "",
        broker_tls_domain: "",
        max_frame_size: 64 * 1024 * 1024,
        max_connections: 1024,
      },
    },
    tiered_storage: {
      enabled: false,
      backend: "s3",
      upload_concurrency: 2,
      upload_piece_size: 1 * MiB,
      part_size: 8 * MiB,
      upload_loop_backoff_max: 10_000,
      segment_upload_timeout: 90_000,
      fetch_concurrency: 4,
      fetch_workers: "auto",
      fetch_timeout: 5_000,
      fetch_bandwidth: Infinity,
      upload_bandwidth: Infinity,
      connection_idle_timeout: 5_000,
      delete_batch_per_pass: 300,
      delete_pending_per_partition: 5000,
      delete_grace: 60_000,
      default_local_retention_age: Infinity,
      default_local_retention_size: Infinity,
      housekeeping: {
        interval: 300_000,
        idle_timeout: 10_000,
        idle_threshold_rps: 10,
        request_quota: 5000,
        orphan_sweep_interval: 3_600_000,
        orphan_grace: 86_400_000,
        manifest_upload_interval: 60_000,
        verify_interval: 6 * 3_600_000,
      },
      s3: {
        bucket: "",
        region: "",
        endpoint: "",
        url_style: "auto",
        prefix: "iggy",
        access_key: "",
        secret_key: "",
        session_token: "",
        credentials_source: "auto",
        profile: "",
        web_identity_token_file: "",
        web_identity_role_arn: "",
        assume_role_arn: "",
        assume_role_session_name: "",
        assume_role_external_id: "",
        credentials_duration: 3_600_000,
        sts_endpoint: "",
        imds_endpoint: "",
        conditional_writes: true,
        checksum: "auto",
        storage_class: "",
        sse: "",
        sse_kms_key_id: "",
        sse_bucket_key: false,
        sse_context: {},
      },
      fs: { path: "", prefix: "iggy" },
      gcs: {
        bucket: "",
        prefix: "iggy",
        endpoint: "",
        credentials_source: "auto",
        service_account_key: "",
        credentials_file: "",
        metadata_endpoint: "",
        token: "",
        storage_class: "",
        kms_key_name: "",
      },
      azure: {
        account: "",
        container: "",
        prefix: "iggy",
        endpoint: "",
        shared_key: "",
        sas_token: "",
        credentials_source: "auto",
        client_id: "",
        tenant_id: "",
        client_secret: "",
        federated_token_file: "",
        authority_host: "",
        imds_endpoint: "",
        access_tier: "",
        encryption_scope: "",
      },
      cache: {
        path: "/etc/tierd/var/state/cache",
        size: 4 * 1024 * MiB,
        size_percent: 20,
        max_objects: 100_000,
        chunk_size: 8 * MiB,
        readahead_max: 4,
        low_watermark_percent: 80,
        trim_min_interval: 5_000,
        direct_io: true,
      },
      request_prices: {
        currency: "USD",
        write_per_1000: 0.005,
        read_per_1000: 0.0004,
        delete_per_1000: 0,
      },
    },
    topic: [],
  };
  assert.deepEqual(config, expected);
});

Deno.test("a topic that omits local retention takes tiered_storage.default_local_retention_*", () => {
  const config = parseConfig(
    `${BASE}[tiered_storage]\ndefault_local_retention_age = "1 d"\n` +
      `default_local_retention_size = "10 GiB"\n` +
      `[[topic]]\nstream = 1\ntopic = 2\n` +
      `[[topic]]\nstream = 1\ntopic = 3\nlocal_retention_age = "2 h"\nmessage_expiry = "7 d"\n`,
    SOURCE,
    {},
  );
  assert.deepEqual(config.topic.map((t) => [t.local_retention_age, t.local_retention_size]), [
    [86_400_000, 10 * 1024 * MiB],
    [7_200_000, 10 * 1024 * MiB],
  ]);
  assert.equal(config.topic[1].message_expiry, 7 * 86_400_000);
  assert.equal(config.topic[0].tiered_storage, true);
});

Deno.test("relative paths resolve against the config file's directory", () => {
  const config = parseConfig(
    `[agent]\ndata_dir = "../iggy/local_data"\nstate_dir = "/var/lib/tierd"\n` +
      `[tiered_storage.fs]\npath = "store"\n` +
      `[tiered_storage.gcs]\nservice_account_key = "~/keys/gcs.json"\n`,
    SOURCE,
    {},
  );
  assert.equal(config.agent.data_dir, "/etc/iggy/local_data");
  assert.equal(config.agent.state_dir, "/var/lib/tierd");
  assert.equal(config.tiered_storage.fs.path, "/etc/tierd/store");
  assert.equal(config.tiered_storage.cache.path, "/var/lib/tierd/cache");
  assert.equal(config.tiered_storage.gcs.service_account_key, join(homedir(), "keys/gcs.json"));
});

Deno.test("under systemd, unset state and cache dirs are the ones the unit made, never beside /etc/tierd", () => {
  const env = { STATE_DIRECTORY: "/var/lib/tierd", CACHE_DIRECTORY: "/var/cache/tierd:/elsewhere" };
  const unset = parseConfig(`[agent]\ndata_dir = "/var/lib/iggy/local_data"\n`, SOURCE, env);
  assert.equal(unset.agent.state_dir, "/var/lib/tierd");
  assert.equal(unset.tiered_storage.cache.path, "/var/cache/tierd", "the first of the list");
  // What the file says wins.
  const set = parseConfig(
    `[agent]\ndata_dir = "/var/lib/iggy/local_data"\nstate_dir = "/srv/tierd"\n` +
      `[tiered_storage.cache]\npath = "/srv/cache"\n`,
    SOURCE,
    env,
  );
  assert.equal(set.agent.state_dir, "/srv/tierd");
  assert.equal(set.tiered_storage.cache.path, "/srv/cache");
  // Outside systemd: beside the config file, as before.
  const plain = parseConfig(`[agent]\ndata_dir = "/var/lib/iggy/local_data"\n`, SOURCE, {});
  assert.equal(plain.agent.state_dir, "/etc/tierd/var/state");
});

Deno.test("a missing config file says so and points at tierd.example.toml", async () => {
  const dir = await tempDir("tierd-config");
  try {
    const path = join(dir.path, "tierd.toml");
    await assert.rejects(loadConfig(path, {}), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.match(e.message, /not found/);
      assert.ok(e.message.includes(path));
      assert.match(e.message, /tierd\.example\.toml/);
      return true;
    });
    await writeFile(path, `${BASE}[tiered_storage]\nbackend = "sim"\nenabled = true\n`);
    assert.equal((await loadConfig(path, {})).agent.data_dir, join(dir.path, "broker"));
  } finally {
    await dir.cleanup();
  }
});

Deno.test("a TOML syntax error names the file, line and column", () => {
  const e = refuse(`${BASE}listen = "127.0.0.1:7070"\nformat = auto\n`);
  assert.equal(e.issues.length, 1);
  assert.equal(e.issues[0].line, 4);
  assert.equal(e.issues[0].column, 10);
  assert.match(e.message, /^\/etc\/tierd\/tierd\.toml:4:10: TOML syntax error: /);
});

Deno.test("unknown keys are errors, named with their path and a likely fix", () => {
  const e = refuse(
    `${BASE}log_levle = "debug"\n[tiered_storage.cache]\nsise = "1 GiB"\n` +
      `[tiered_storage.s4]\n[[topic]]\nstrem = 0\ntopic = 0\n`,
  );
  assert.match(issueAt(e, "agent.log_levle").message, /did you mean "log_level"/);
  assert.match(issueAt(e, "tiered_storage.cache.sise").message, /did you mean "size"/);
  assert.match(issueAt(e, "tiered_storage.s4").message, /unknown key/);
  assert.match(issueAt(e, "topic[0].strem").message, /did you mean "stream"/);
  assert.match(refuse(`${BASE}[zzz]\n`).message, /zzz: unknown key \(known keys here: agent/);
});

Deno.test("every problem is reported at once, one per line", () => {
  const e = refuse(
    `${BASE}format = "iggy-1.0"\nseal_quiescence = 5\n` +
      `[tiered_storage]\nenabled = "yes"\nupload_concurrency = 0\n`,
  );
  assert.deepEqual(e.issues.map((i) => [i.path, i.value]), [
    ["agent.format", '"iggy-1.0"'],
    ["agent.seal_quiescence", "5"],
    ["tiered_storage.enabled", '"yes"'],
    ["tiered_storage.upload_concurrency", "0"],
  ]);
  assert.equal(e.message.split("\n").length, 5);
  assert.match(
    e.message,
    /agent\.format = "iggy-1\.0": expected one of "auto", "iggy-0\.8", "iggy-0\.9"/,
  );
  assert.match(e.message, /agent\.seal_quiescence = 5: expected a duration with a unit/);
  assert.match(e.message, /tiered_storage\.enabled = "yes": expected true or false/);
  assert.match(e.message, /tiered_storage\.upload_concurrency = 0: expected at least 1/);
  assertRefused("[agent]\n", "agent.data_dir", undefined, /required/);
  assertRefused("", "agent", undefined, /data_dir/);
});

// ---- cross-field and range rules ------------------------------------------------------------

const ENABLED = (backend: string) =>
  `${BASE}[tiered_storage]\nenabled = true\nbackend = "${backend}"\n`;

Deno.test("rule: enabled s3 needs a bucket, and both keys or neither", () => {
  const s3 = `${ENABLED("s3")}[tiered_storage.s3]\n`;
  assertRefused(`${s3}region = "eu-west-1"\n`, "tiered_storage.s3.bucket", undefined, /bucket/);
  assertRefused(`${s3}bucket = ""\n`, "tiered_storage.s3.bucket", '""', /backend = "s3"/);
  // An empty region is resolved from the environment and the shared config file.
  assert.equal(
    parseConfig(`${s3}bucket = "bkt"\nregion = ""\n`, SOURCE, {}).tiered_storage.s3.region,
    "",
  );
  assertRefused(
    `${s3}bucket = "bkt"\ncredentials_source = "static"\n`,
    "tiered_storage.s3.access_key",
    undefined,
    /credentials_source = "static"/,
  );
  assertRefused(
    `${s3}bucket = "bkt"\ncredentials_source = "sts"\n`,
    "tiered_storage.s3.credentials_source",
    '"sts"',
    /"web_identity"/,
  );
  assertRefused(
    `${s3}bucket = "bkt"\nassume_role_arn = "role/tierd"\n`,
    "tiered_storage.s3.assume_role_arn",
    '"role/tierd"',
    /arn:aws:iam/,
  );
  assertRefused(
    `${s3}bucket = "bkt"\ncredentials_duration = "5 m"\n`,
    "tiered_storage.s3.credentials_duration",
    '"5 m"',
    /15 min/,
  );
  assertRefused(
    `${s3}bucket = "bkt"\naccess_key = "AKIA"\n`,
    "tiered_storage.s3.secret_key",
    undefined,
    /TIERD_S3_SECRET_KEY/,
  );
  const ok = parseConfig(
    `${s3}bucket = "bkt"\nendpoint = "http://127.0.0.1:9000"\ncredentials_source = "none"\n`,
    SOURCE,
    {},
  );
  assert.equal(ok.tiered_storage.s3.endpoint, "http://127.0.0.1:9000");
  assertRefused(
    `${s3}bucket = "bkt"\nendpoint = "127.0.0.1:9000"\n`,
    "tiered_storage.s3.endpoint",
    '"127.0.0.1:9000"',
  );
  assertRefused(`${s3}url_style = "dns"\n`, "tiered_storage.s3.url_style", '"dns"', /"path"/);
  // Disabled: nothing is required.
  parseConfig(`${BASE}[tiered_storage]\nenabled = false\nbackend = "s3"\n`, SOURCE, {});
});

Deno.test("rule: enabled gcs needs a bucket and its credentials", () => {
  const gcs = `${ENABLED("gcs")}[tiered_storage.gcs]\n`;
  assertRefused(`${gcs}credentials_source = "none"\n`, "tiered_storage.gcs.bucket", undefined);
  assertRefused(
    `${gcs}bucket = "bkt"\ncredentials_source = "service_account"\n`,
    "tiered_storage.gcs.service_account_key",
    undefined,
  );
  // auto (application default credentials) needs nothing in the file.
  parseConfig(`${gcs}bucket = "bkt"\n`, SOURCE, {});
  assertRefused(
    `${gcs}bucket = "bkt"\ncredentials_source = "adc"\n`,
    "tiered_storage.gcs.credentials_source",
    '"adc"',
    /"external_account"/,
  );
  assertRefused(
    `${gcs}bucket = "bkt"\ncredentials_source = "static"\n`,
    "tiered_storage.gcs.token",
    undefined,
  );
  const ok = parseConfig(`${gcs}bucket = "bkt"\nservice_account_key = "key.json"\n`, SOURCE, {});
  assert.equal(ok.tiered_storage.gcs.service_account_key, "/etc/tierd/key.json");
});

Deno.test("rule: enabled azure needs account, container, at most one of shared_key, sas_token", () => {
  const az = `${ENABLED("azure")}[tiered_storage.azure]\n`;
  assertRefused(
    `${az}container = "ctr"\nshared_key = "a2V5"\n`,
    "tiered_storage.azure.account",
    undefined,
  );
  assertRefused(
    `${az}account = "acct"\nshared_key = "a2V5"\n`,
    "tiered_storage.azure.container",
    undefined,
  );
  assertRefused(
    `${az}account = "acct"\ncontainer = "ctr"\ncredentials_source = "shared_key"\n`,
    "tiered_storage.azure.shared_key",
    undefined,
    /TIERD_AZURE_KEY/,
  );
  assertRefused(
    `${az}account = "acct"\ncontainer = "ctr"\ncredentials_source = "sas"\n`,
    "tiered_storage.azure.sas_token",
    undefined,
    /TIERD_AZURE_SAS/,
  );
  // auto without a key or SAS: Entra ID tokens (workload identity, client secret, IMDS).
  parseConfig(`${az}account = "acct"\ncontainer = "ctr"\n`, SOURCE, {});
  assertRefused(
    `${az}account = "acct"\ncontainer = "ctr"\nshared_key = "a2V5"\nsas_token = "s"\n`,
    "tiered_storage.azure.sas_token",
    '"***"',
    /only one/,
  );
  parseConfig(`${az}account = "acct"\ncontainer = "ctr"\nsas_token = "sv=1"\n`, SOURCE, {});
});

Deno.test("rule: enabled fs needs a path", () => {
  assertRefused(`${ENABLED("fs")}[tiered_storage.fs]\npath = ""\n`, "tiered_storage.fs.path", '""');
  parseConfig(`${ENABLED("sim")}`, SOURCE, {});
});

Deno.test("rule: fetch_timeout is below 10 s", () => {
  assertRefused(
    `${BASE}[tiered_storage]\nfetch_timeout = "10 s"\n`,
    "tiered_storage.fetch_timeout",
    '"10 s"',
    /below 10 s/,
  );
  assertRefused(
    `${BASE}[tiered_storage]\nfetch_timeout = "unlimited"\n`,
    "tiered_storage.fetch_timeout",
    '"unlimited"',
  );
  const ok = parseConfig(`${BASE}[tiered_storage]\nfetch_timeout = "9999 ms"\n`, SOURCE, {});
  assert.equal(ok.tiered_storage.fetch_timeout, 9999);
});

Deno.test("rule: chunk_size is a multiple of 4096 within 1–64 MiB", () => {
  const at = (v: string) => `${BASE}[tiered_storage.cache]\nchunk_size = ${v}\n`;
  for (const bad of ['"1 MB"', '"512 KiB"', '"128 MiB"', "1048577", '"lots"']) {
    assertRefused(at(bad), "tiered_storage.cache.chunk_size", bad);
  }
  assertRefused(at('"1 MB"'), "tiered_storage.cache.chunk_size", '"1 MB"', /multiple of 4096/);
  assert.equal(parseConfig(at('"2 MiB"'), SOURCE, {}).tiered_storage.cache.chunk_size, 2 * MiB);
  assert.equal(parseConfig(at("1052672"), SOURCE, {}).tiered_storage.cache.chunk_size, 1052672);
});

Deno.test("rule: cache size is at least 2 × chunk_size × fetch_concurrency", () => {
  assertRefused(
    `${BASE}[tiered_storage.cache]\nsize = "32 MiB"\n`,
    "tiered_storage.cache.size",
    '"32 MiB"',
    /2 × 8 MiB × 4 = 64 MiB/,
  );
  // The default size (4 GiB) is shown as a default when it is the one too small.
  assertRefused(
    `${BASE}[tiered_storage]\nfetch_concurrency = 64\n[tiered_storage.cache]\nchunk_size = "64 MiB"\n`,
    "tiered_storage.cache.size",
    '"4 GiB" (default)',
  );
  parseConfig(`${BASE}[tiered_storage.cache]\nsize = "64 MiB"\n`, SOURCE, {});
  parseConfig(`${BASE}[tiered_storage.cache]\nsize = "unlimited"\n`, SOURCE, {});
});

Deno.test("rule: part_size is at least 5 MiB", () => {
  assertRefused(
    `${BASE}[tiered_storage]\npart_size = "4 MiB"\n`,
    "tiered_storage.part_size",
    '"4 MiB"',
    /5 MiB/,
  );
  parseConfig(`${BASE}[tiered_storage]\npart_size = "5 MiB"\n`, SOURCE, {});
});

Deno.test("rule: seal_quiescence is a finite, non-negative duration", () => {
  assertRefused(`${BASE}seal_quiescence = "-1 s"\n`, "agent.seal_quiescence", '"-1 s"');
  assertRefused(
    `${BASE}seal_quiescence = "unlimited"\n`,
    "agent.seal_quiescence",
    '"unlimited"',
    /finite/,
  );
  assert.equal(
    parseConfig(`${BASE}seal_quiescence = "0 s"\n`, SOURCE, {}).agent.seal_quiescence,
    0,
  );
});

Deno.test("rule: agent.iggy_http.auth_cache_ttl is at most 60 s (a revoked permission honoured within it)", () => {
  for (const bad of ["30 d", "61 s", "unlimited"]) {
    assertRefused(
      `${BASE}[agent.iggy_http]\nauth_cache_ttl = "${bad}"\n`,
      "agent.iggy_http.auth_cache_ttl",
      `"${bad}"`,
      /at most 60 s/,
    );
  }
  const ok = parseConfig(`${BASE}[agent.iggy_http]\nauth_cache_ttl = "60 s"\n`, SOURCE, {});
  assert.equal(ok.agent.iggy_http.auth_cache_ttl, 60_000);
});

Deno.test("rule: records without access control only on loopback, unless on purpose", () => {
  for (const listen of ["0.0.0.0:7070", "[::]:7070", "10.0.0.5:7070", "tierd.example:7070"]) {
    assertRefused(
      `${BASE}listen = "${listen}"\n`,
      "agent.read_auth",
      '"none" (default)',
      /not a loopback/,
    );
  }
  for (const listen of ["127.0.0.1:7070", "127.3.2.1:1", "[::1]:7070", "localhost:7070"]) {
    assert.equal(parseConfig(`${BASE}listen = "${listen}"\n`, SOURCE, {}).agent.listen, listen);
  }
  const open = `${BASE}listen = "0.0.0.0:7070"\nread_auth_insecure = true\n`;
  assert.equal(parseConfig(open, SOURCE, {}).agent.read_auth, "none");
  // The other modes need what they check against.
  assertRefused(
    `${BASE}listen = "0.0.0.0:7070"\nread_auth = "token"\n`,
    "agent.read_token",
    undefined,
    /TIERD_READ_TOKEN/,
  );
  const token = parseConfig(
    `${BASE}listen = "0.0.0.0:7070"\nread_auth = "token"\n`,
    SOURCE,
    { TIERD_READ_TOKEN: "a-read-token-1" },
  );
  assert.equal(token.agent.read_token, "a-read-token-1");
  assertRefused(`${BASE}read_auth = "iggy"\n`, "agent.broker.http_url", undefined, /read_auth/);
  assertRefused(`${BASE}ops_listen = "nowhere"\n`, "agent.ops_listen", '"nowhere"', /host:port/);
});

Deno.test("rule: listen is host:port", () => {
  for (const bad of ["localhost", "127.0.0.1", "127.0.0.1:99999", "http://x:1"]) {
    assertRefused(`${BASE}listen = "${bad}"\n`, "agent.listen", `"${bad}"`, /host:port/);
  }
  assert.equal(parseConfig(`${BASE}listen = "[::1]:0"\n`, SOURCE, {}).agent.listen, "[::1]:0");
});

Deno.test("rule: a (stream, topic) is listed once", () => {
  const e = refuse(
    `${BASE}[[topic]]\nstream = 1\ntopic = 1\n[[topic]]\nstream = 1\ntopic = 2\n` +
      `[[topic]]\nstream = 1\ntopic = 1\ntiered_storage = false\n`,
  );
  assert.equal(e.issues.length, 1);
  assert.match(issueAt(e, "topic[2]").message, /stream 1 topic 1 is already topic\[0\]/);
  assertRefused(`${BASE}[[topic]]\nstream = -1\ntopic = 0\n`, "topic[0].stream", "-1");
  assertRefused(`${BASE}[[topic]]\nstream = "orders"\ntopic = 0\n`, "topic[0].stream", '"orders"');
});

Deno.test("rule: evict_via = broker needs the broker's URL and credentials", () => {
  assertRefused(
    `${BASE}evict_via = "broker"\n`,
    "agent.broker.http_url",
    undefined,
    /HTTP API URL/,
  );
  assertRefused(
    `${BASE}evict_via = "broker"\n[agent.broker]\nhttp_url = "http://127.0.0.1:3000"\nusername = "iggy"\n`,
    "agent.broker.password",
    undefined,
    /TIERD_BROKER_PASSWORD/,
  );
  const viaToken = parseConfig(
    `${BASE}evict_via = "broker"\n[agent.broker]\nhttp_url = "http://127.0.0.1:3000"\n`,
    SOURCE,
    { TIERD_BROKER_TOKEN: "pat" },
  );
  assert.equal(resolveEvictVia(viaToken), "broker");
  const auto = parseConfig(`${BASE}[agent.broker]\nhttp_url = "http://h:3000"\n`, SOURCE, {});
  assert.equal(resolveEvictVia(auto), "broker");
});

Deno.test("rules about a service are checked only for the commands that use it", () => {
  // The broker's and the store's credentials missing, a token reader without its token, and two
  // topics alike: the last is a fault whatever the command.
  const text = `[agent]\ndata_dir = "broker"\nevict_via = "broker"\nread_auth = "token"\n` +
    `[agent.broker]\nhttp_url = "http://127.0.0.1:3000"\nusername = "iggy"\n` +
    `[tiered_storage]\nenabled = true\nbackend = "s3"\n` +
    `[tiered_storage.s3]\nbucket = "tiered"\ncredentials_source = "static"\n`;
  const paths = (uses?: Service[], more = "") => {
    try {
      parseConfig(text + more, SOURCE, {}, { uses });
      return [];
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      return e.issues.map((i) => i.path);
    }
  };
  const broker = ["agent.broker.password"];
  const listeners = ["agent.read_token"];
  const store = ["tiered_storage.s3.access_key", "tiered_storage.s3.secret_key"];
  assert.deepEqual(paths(), [...broker, ...listeners, ...store], "every service by default");
  assert.deepEqual(paths([...ALL_SERVICES]), [...broker, ...listeners, ...store]);
  assert.deepEqual(paths([]), [], "tierd ls: none");
  assert.deepEqual(paths(["store"]), store, "tierd restore: the store's");
  assert.deepEqual(paths(["broker"]), broker);
  const twice = `[[topic]]\nstream = 1\ntopic = 1\n[[topic]]\nstream = 1\ntopic = 1\n`;
  assert.deepEqual(paths([], twice), ["topic[1]"], "a rule of no service is always checked");
});

// ---- environment overrides ------------------------------------------------------------------

Deno.test("env overrides every secret, wins over the file, and an empty variable is ignored", () => {
  const file = `${BASE}api_token = "file"\n[agent.broker]\npassword = "file"\n` +
    `[tiered_storage.s3]\naccess_key = "file"\nsecret_key = "file"\n`;
  const env: Record<string, string> = {};
  const envValue = (name: string) => name === "TIERD_AZURE_KEY" ? "ZW52LWtleQ==" : `env-${name}`;
  for (const f of SECRET_FIELDS) env[f.env] = envValue(f.env);
  env.TIERD_S3_SECRET_KEY = "";
  const config = parseConfig(file, SOURCE, env);
  const at = (path: readonly string[]) =>
    path.reduce<unknown>((v, k) => (v as Record<string, unknown>)[k], config);
  for (const f of SECRET_FIELDS) {
    const want = f.env === "TIERD_S3_SECRET_KEY" ? "file" : envValue(f.env);
    assert.equal(at(f.path), want, f.env);
  }
  assert.deepEqual(
    new Set(SECRET_FIELDS.map((f) => f.env)),
    new Set([
      "TIERD_S3_ACCESS_KEY",
      "TIERD_S3_SECRET_KEY",
      "TIERD_S3_SESSION_TOKEN",
      "TIERD_AZURE_KEY",
      "TIERD_AZURE_SAS",
      "TIERD_AZURE_CLIENT_SECRET",
      "TIERD_GCS_TOKEN",
      "TIERD_API_TOKEN",
      "TIERD_BROKER_PASSWORD",
      "TIERD_BROKER_TOKEN",
      "TIERD_READ_TOKEN",
    ]),
  );
});

Deno.test("env credentials satisfy the backend's required fields", () => {
  const s3 = `${ENABLED("s3")}[tiered_storage.s3]\nbucket = "bkt"\n`;
  const config = parseConfig(s3, SOURCE, { TIERD_S3_ACCESS_KEY: "a", TIERD_S3_SECRET_KEY: "s" });
  assert.equal(config.tiered_storage.s3.secret_key, "s");
});

Deno.test("env defaults to process.env", () => {
  process.env.TIERD_API_TOKEN = "from-process-env";
  try {
    assert.equal(parseConfig(BASE, SOURCE).agent.api_token, "from-process-env");
  } finally {
    delete process.env.TIERD_API_TOKEN;
  }
});
