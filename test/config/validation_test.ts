// Configs that would break the sidecar contract are refused, each problem naming its key path
// and value: tierd's directories inside the broker's, key prefixes and cluster ids that climb
// out of their place, bucket/container/account names a provider refuses, an Azure key that is
// not base64, an admin token no header can carry or the log cannot scrub, keys nothing reads yet,
// and (at start) a data dir that is missing or holds no streams/.
import assert from "node:assert/strict";
import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { hostIssues } from "../../src/config/host.ts";
import { ConfigError, parseConfig } from "../../src/config/mod.ts";
import {
  azureAccountProblem,
  azureContainerProblem,
  base64Problem,
  gcsBucketProblem,
  prefixProblem,
  s3BucketProblem,
} from "../../src/config/names.ts";
import { MIN_SCRUBBED_LENGTH } from "../../src/config/secrets.ts";
import { createLogger } from "../../src/log.ts";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";
import { cli, cliProcess } from "../cli/_cli.ts";

const SOURCE = "/srv/tierd/tierd.toml";

/** The ConfigError `toml` is refused with. */
function refuse(toml: string, env: Record<string, string> = {}): ConfigError {
  try {
    parseConfig(toml, SOURCE, env);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  assert.fail(`expected a ConfigError for:\n${toml}`);
}

/** Asserts one message line `path = value: …expected…` (value as written, secrets as "***"). */
function assertRefused(toml: string, path: string, value: string, expected: RegExp, env = {}) {
  const e = refuse(toml, env);
  const line = e.message.split("\n").find((l) => l.trim().startsWith(`${path} = `));
  assert.ok(line, `no line for ${path} in:\n${e.message}`);
  assert.ok(line.includes(`${path} = ${value}: `), line);
  assert.match(line, expected);
}

const agent = (extra = "") => `[agent]\ndata_dir = "/var/lib/iggy"\n${extra}`;

Deno.test("tierd's directories may not be or lie in the broker's data dir", () => {
  assertRefused(
    agent('state_dir = "/var/lib/iggy"\n'),
    "agent.state_dir",
    '"/var/lib/iggy"',
    /not agent\.data_dir itself/,
  );
  assertRefused(
    agent('state_dir = "/var/lib/iggy/"\n'),
    "agent.state_dir",
    '"/var/lib/iggy/"',
    /not agent\.data_dir itself/,
  );
  assertRefused(
    agent('state_dir = "/var/lib/iggy/tierd"\n'),
    "agent.state_dir",
    '"/var/lib/iggy/tierd"',
    /outside agent\.data_dir \(\/var\/lib\/iggy\)/,
  );
  // Relative paths resolve against the file's directory first.
  assertRefused(
    '[agent]\ndata_dir = "broker"\nstate_dir = "broker/../broker/state"\n',
    "agent.state_dir",
    '"broker/../broker/state"',
    /outside agent\.data_dir \(\/srv\/tierd\/broker\)/,
  );
  assertRefused(
    agent('state_dir = "/var/lib/tierd"\n[tiered_storage.cache]\npath = "/var/lib/iggy/cache"\n'),
    "tiered_storage.cache.path",
    '"/var/lib/iggy/cache"',
    /outside agent\.data_dir/,
  );
  assertRefused(
    agent('[tiered_storage]\nbackend = "fs"\n[tiered_storage.fs]\npath = "/var/lib/iggy/bucket"\n'),
    "tiered_storage.fs.path",
    '"/var/lib/iggy/bucket"',
    /outside agent\.data_dir/,
  );
  // Neighbours are fine: /var/lib/iggy-state is not inside /var/lib/iggy.
  parseConfig(
    agent('state_dir = "/var/lib/iggy-state"\n[tiered_storage.fs]\npath = "/var/lib/iggy2"\n'),
    SOURCE,
    {},
  );
});

Deno.test("every provider's prefix: no .. or . segment, no leading or trailing /", () => {
  for (const backend of ["s3", "gcs", "azure", "fs"]) {
    for (const prefix of ["../../escape", "a/../b", "./a", "/iggy", "iggy/", "a//b", "a b"]) {
      assertRefused(
        agent(`[tiered_storage.${backend}]\nprefix = ${JSON.stringify(prefix)}\n`),
        `tiered_storage.${backend}.prefix`,
        JSON.stringify(prefix),
        /a key prefix of letters.* \(.+\)$/,
      );
    }
    parseConfig(agent(`[tiered_storage.${backend}]\nprefix = "team-a/iggy.v2"\n`), SOURCE, {});
  }
  assertRefused(agent('cluster_id = ".."\n'), "agent.cluster_id", '".."', /path step/);
  assertRefused(agent('cluster_id = "a/b"\n'), "agent.cluster_id", '"a/b"', /key segment/);
  assert.equal(prefixProblem("iggy"), undefined);
});

Deno.test("bucket, container and account names follow each provider's rules", () => {
  assertRefused(
    agent('[tiered_storage.s3]\nbucket = "b/../c"\n'),
    "tiered_storage.s3.bucket",
    '"b/../c"',
    /an S3 bucket name.*\(it has a character other than/,
  );
  for (const bad of ["ab", "Upper", "a..b", "-ab", "ab-", "192.168.1.1", "a_b", "xn--ab"]) {
    assert.ok(s3BucketProblem(bad), bad);
  }
  for (const good of ["iggy-tier", "my.tier.bucket", "abc", "a".repeat(63)]) {
    assert.equal(s3BucketProblem(good), undefined, good);
  }
  assertRefused(
    agent('[tiered_storage.gcs]\nbucket = "my/bucket"\n'),
    "tiered_storage.gcs.bucket",
    '"my/bucket"',
    /a GCS bucket name/,
  );
  for (const bad of ["ab", "goog-x", "my-google-b", "a..b", "Ab", "_ab", `${"a".repeat(64)}`]) {
    assert.ok(gcsBucketProblem(bad), bad);
  }
  for (const good of ["iggy_tier", "iggy-tier", `${"a".repeat(63)}.${"b".repeat(63)}`]) {
    assert.equal(gcsBucketProblem(good), undefined, good);
  }
  assertRefused(
    agent('[tiered_storage.azure]\ncontainer = "Tier--A"\n'),
    "tiered_storage.azure.container",
    '"Tier--A"',
    /an Azure container name/,
  );
  assertRefused(
    agent('[tiered_storage.azure]\naccount = "my-account"\n'),
    "tiered_storage.azure.account",
    '"my-account"',
    /an Azure storage account name/,
  );
  assert.ok(azureContainerProblem("a--b"));
  assert.equal(azureContainerProblem("iggy-tier"), undefined);
  assert.equal(azureAccountProblem("devstoreaccount1"), undefined);
  // Unset names are left to the backend rules (required only when that backend is enabled).
  parseConfig(agent(), SOURCE, {});
});

Deno.test("an Azure key that is not base64 is refused at load, from the file or the env", () => {
  const az = agent("[tiered_storage.azure]\n");
  assertRefused(
    `${az}shared_key = "not base64!"\n`,
    "tiered_storage.azure.shared_key",
    '"***"',
    /base64.*\(it has a character outside the base64 alphabet\)/,
  );
  assertRefused(
    `${az}shared_key = "abc"\n`,
    "tiered_storage.azure.shared_key",
    '"***"',
    /not a multiple of 4/,
  );
  assertRefused(az, "tiered_storage.azure.shared_key", '"***"', /base64/, {
    TIERD_AZURE_KEY: "key-from-env",
  });
  const e = refuse(`${az}shared_key = "s3cr3t!!"\n`);
  assert.ok(!e.message.includes("s3cr3t"), "the key is never quoted");
  assert.equal(base64Problem(" a2V5 \n"), undefined, "surrounding whitespace is ignored");
  parseConfig(`${az}shared_key = "a2V5"\n`, SOURCE, {});
});

Deno.test("api_token: no whitespace, and at least the logger's scrub length", () => {
  assertRefused(
    agent('api_token = "two words"\n'),
    "agent.api_token",
    '"***"',
    /whitespace/,
  );
  assertRefused(agent('api_token = "abc"\n'), "agent.api_token", '"***"', /shorter than 8/);
  assertRefused(agent(), "agent.api_token", '"***"', /whitespace/, { TIERD_API_TOKEN: "a\tb" });
  parseConfig(agent('api_token = "abcdefgh"\n'), SOURCE, {});
  parseConfig(agent('api_token = ""\n'), SOURCE, {});
  // The rule and the logger agree: a token of the minimum length is scrubbed, a shorter one not.
  const lines: string[] = [];
  const token = "t".repeat(MIN_SCRUBBED_LENGTH);
  const log = createLogger({
    secrets: [token, "x".repeat(MIN_SCRUBBED_LENGTH - 1)],
    write: (l) => void lines.push(l),
  });
  log.info("a store answered", { error: new Error(`saw ${token} and xxxxxxx`) });
  assert.ok(!lines[0].includes(token), lines[0]);
  assert.ok(lines[0].includes("xxxxxxx"), "shorter strings are not scrubbed, so they are refused");
});

Deno.test("keys nothing reads yet are refused when set: not supported yet", () => {
  for (
    const [key, value] of [["upload_piece_size", '"2 MiB"'], ["connection_idle_timeout", '"9 s"']]
  ) {
    assertRefused(
      agent(`[tiered_storage]\n${key} = ${value}\n`),
      `tiered_storage.${key}`,
      value,
      /not supported yet/,
    );
  }
  // Reported beside other problems, not instead of them.
  const both = refuse(agent('[tiered_storage]\nupload_piece_size = 1\npart_size = "1 KiB"\n'));
  assert.deepEqual(both.issues.map((i) => i.path).sort(), [
    "tiered_storage.part_size",
    "tiered_storage.upload_piece_size",
  ]);
});

Deno.test("host: a missing data dir, one without streams/, a state dir linked into it", async () => {
  const tmp = await tempDir("tierd-host");
  try {
    const config = (extra = "") =>
      parseConfig(testConfigText({ dir: tmp.path, extra }), join(tmp.path, "tierd.toml"), {});
    const messages = async (extra = "") =>
      (await hostIssues(config(extra))).map((i) => `${i.path} = ${i.value}: ${i.message}`);
    const broker = join(tmp.path, "broker");
    assert.deepEqual(await messages(), [
      `agent.data_dir = "${broker}": expected the broker's data directory (Iggy local_data); ` +
      "it does not exist",
    ]);
    await mkdir(broker);
    assert.match((await messages())[0], /holds no streams\/ directory/);
    await mkdir(join(broker, "streams"));
    assert.deepEqual(await messages(), []);
    // A state dir outside by name, inside through a symlink.
    await mkdir(join(broker, "tierd-state"));
    await symlink(join(broker, "tierd-state"), join(tmp.path, "linked"));
    const linked = parseConfig(
      testConfigText({ dir: tmp.path }).replace(`${tmp.path}/state`, `${tmp.path}/linked/state`),
      join(tmp.path, "tierd.toml"),
      {},
    );
    const issues = await hostIssues(linked);
    assert.equal(issues.length, 1, JSON.stringify(issues));
    assert.equal(issues[0].path, "agent.state_dir");
    assert.match(issues[0].message, /through symlinks it is .*broker\/tierd-state\/state/);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("CLI: config check exits 2 naming key and value; run refuses a missing data dir", async () => {
  const tmp = await tempDir("tierd-validate");
  try {
    const bad = join(tmp.path, "bad.toml");
    await writeFile(bad, `[agent]\ndata_dir = "broker"\nstate_dir = "broker"\n`);
    const check = await cli(["config", "check", "--config", bad]);
    assert.equal(check.code, 2);
    assert.match(check.stderr, /agent\.state_dir = "broker": expected a directory of tierd's own/);
    await writeFile(bad, `[agent]\ndata_dir = "broker"\n[tiered_storage.s3]\nbucket = "b/../c"\n`);
    const bucket = await cli(["config", "check", "--config", bad]);
    assert.equal(bucket.code, 2);
    assert.match(bucket.stderr, /tiered_storage\.s3\.bucket = "b\/\.\.\/c": expected an S3 bucket/);

    const config = join(tmp.path, "tierd.toml");
    await writeFile(config, testConfigText({ dir: tmp.path }));
    const warned = await cli(["config", "check", "--config", config]);
    assert.equal(warned.code, 0, "the file is fine");
    assert.match(warned.stdout, /: ok \(/);
    assert.match(warned.stderr, /warning: agent\.data_dir = ".*broker": .*does not exist.*refuses/);

    for (const args of [["run", "--once"], ["run"]]) {
      const run = await cliProcess([...args, "--config", config]);
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /agent\.data_dir = ".*broker": .*it does not exist/);
    }
    await mkdir(join(tmp.path, "broker"));
    const empty = await cliProcess(["run", "--once", "--config", config]);
    assert.equal(empty.code, 2, empty.stderr);
    assert.match(empty.stderr, /holds no streams\/ directory/);
    for await (const e of Deno.readDir(tmp.path)) {
      assert.notEqual(e.name, "state", "nothing was written before the refusal");
    }
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("an Iggy-compatible listener needs the broker it fronts", () => {
  const e = refuse(agent('[agent.iggy_http]\nlisten = "127.0.0.1:3001"\n'));
  assert.match(e.message, /agent\.broker\.http_url: expected .*agent\.iggy_http\.listen is set/);
  parseConfig(
    agent(
      '[agent.broker]\nhttp_url = "http://127.0.0.1:3000"\n[agent.iggy_http]\nlisten = "127.0.0.1:3001"\n',
    ),
    SOURCE,
    {},
  );
});
