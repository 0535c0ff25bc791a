// Configs that would break the sidecar contract are refused, each problem naming its key path
// and value: tierd's directories inside the broker's or where wiping one would wipe another (as
// written and through symlinks), key prefixes and cluster ids that climb
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

// ---- tierd's own directories kept apart ------------------------------------------------------

type Dir = "state" | "cache" | "fs";
const KEY: Record<Dir, string> = {
  state: "agent.state_dir",
  cache: "tiered_storage.cache.path",
  fs: "tiered_storage.fs.path",
};
const LAYOUT: Record<Dir, string> = { state: "state", cache: "cache", fs: "store" };
const DIRS: Dir[] = ["state", "cache", "fs"];

/** The TOML for tierd's three directories (an fs backend unless told), beside the broker's. */
function dirsToml(d: Record<Dir, string>, backend = "fs"): string {
  return agent(`state_dir = "${d.state}"\n`) + `[tiered_storage]\nbackend = "${backend}"\n` +
    `[tiered_storage.fs]\npath = "${d.fs}"\n[tiered_storage.cache]\npath = "${d.cache}"\n`;
}

/**
 * Every way to place `moved` against `fixed` (inside, the same, a sibling sharing its name as a
 * prefix), and what tierd must say: the key reported and the key named as the other directory,
 * or nothing. The cache inside the state dir is the default layout and fine.
 */
function placements(root: string) {
  const out: {
    name: string;
    moved: Dir;
    fixed: Dir;
    dirs: Record<Dir, string>;
    refused?: { at: Dir; other: Dir; same: boolean };
  }[] = [];
  for (const moved of DIRS) {
    for (const fixed of DIRS) {
      if (moved === fixed) continue;
      const base = (d: Dir) => `${root}/${LAYOUT[d]}`;
      const at = (path: string) => {
        const dirs = { state: base("state"), cache: base("cache"), fs: base("fs") };
        dirs[moved] = path;
        return dirs;
      };
      const inside = !(moved === "cache" && fixed === "state");
      out.push({
        name: `${moved} inside ${fixed}`,
        moved,
        fixed,
        dirs: at(`${base(fixed)}/sub`),
        refused: inside ? { at: moved, other: fixed, same: false } : undefined,
      });
      // An equal pair is reported once, at the directory that must move.
      const equalAt: Dir = moved === "fs" || fixed === "fs" ? "fs" : "cache";
      out.push({
        name: `${moved} equal to ${fixed}`,
        moved,
        fixed,
        dirs: at(base(fixed)),
        refused: { at: equalAt, other: equalAt === moved ? fixed : moved, same: true },
      });
      out.push({
        name: `${moved} a sibling of ${fixed} by name`,
        moved,
        fixed,
        dirs: at(`${base(fixed)}2`),
      });
    }
  }
  return out;
}

Deno.test("tierd's directories as written: none where wiping one would wipe another", () => {
  for (const { name, dirs, refused } of placements("/x")) {
    const toml = dirsToml(dirs);
    if (refused === undefined) {
      parseConfig(toml, SOURCE, {});
      continue;
    }
    const e = refuse(toml);
    assert.deepEqual(e.issues.map((i) => i.path), [KEY[refused.at]], `${name}:\n${e.message}`);
    assertRefused(
      toml,
      KEY[refused.at],
      JSON.stringify(dirs[refused.at]),
      refused.same
        ? new RegExp(`a directory of its own, not ${KEY[refused.other]} itself: .*would`)
        : new RegExp(
          `a directory outside ${KEY[refused.other]} \\(${dirs[refused.other]}\\): .*would`,
        ),
    );
  }
});

Deno.test("tierd's directories as written: each message says what would wipe what", () => {
  const line = (d: Record<Dir, string>) => refuse(dirsToml(d)).message.split("\n")[1].trim();
  const d = { state: "/x/state", cache: "/x/cache", fs: "/x/store" };
  assert.equal(
    line({ ...d, fs: "/x/state/bucket" }),
    'tiered_storage.fs.path = "/x/state/bucket": expected a directory outside agent.state_dir ' +
      "(/x/state): the fs store must not live where wiping the state dir (as before a tierd " +
      "restore, which rebuilds it from the bucket) would wipe the bucket",
  );
  assert.match(
    line({ ...d, fs: "/x/cache" }),
    /not tiered_storage\.cache\.path itself: .*deleting the cache .* would delete the bucket$/,
  );
  assert.match(line({ ...d, state: "/x/store/s" }), /cleaning the bucket would wipe the journals/);
  assert.match(line({ ...d, cache: "/x/store/c" }), /cleaning the bucket would wipe it$/);
  assert.match(
    line({ ...d, state: "/x/cache/s" }),
    /outside tiered_storage\.cache\.path \(\/x\/cache\): .*would delete the journals/,
  );
  assert.match(
    line({ ...d, cache: "/x/state" }),
    /cache\.path = "\/x\/state": expected a directory of its own, not agent\.state_dir itself: .*unset/,
  );
  // Relative paths compare after resolving against the file's directory.
  assertRefused(
    agent('state_dir = "tierd"\n') +
      '[tiered_storage]\nbackend = "fs"\n[tiered_storage.fs]\npath = "tierd/../tierd/store"\n',
    "tiered_storage.fs.path",
    '"tierd/../tierd/store"',
    /outside agent\.state_dir \(\/srv\/tierd\/tierd\)/,
  );
});

Deno.test("tierd's directories as written: the default layout, and fs.path unused by other backends", () => {
  // The cache defaults to {state_dir}/cache; the fs store beside the state dir.
  const config = parseConfig(
    agent('state_dir = "/x/state"\n') +
      '[tiered_storage]\nbackend = "fs"\n[tiered_storage.fs]\npath = "/x/store"\n',
    SOURCE,
    {},
  );
  assert.equal(config.tiered_storage.cache.path, "/x/state/cache");
  // A leftover fs.path with another backend is no directory of tierd's.
  for (const backend of ["s3", "sim"]) {
    parseConfig(
      dirsToml({ state: "/x/state", cache: "/x/state/c", fs: "/x/state" }, backend),
      SOURCE,
      {},
    );
  }
  // Without the fs store, the state and cache pairs still hold.
  assertRefused(
    dirsToml({ state: "/x/cache/state", cache: "/x/cache", fs: "/x/store" }, "sim"),
    "agent.state_dir",
    '"/x/cache/state"',
    /outside tiered_storage\.cache\.path/,
  );
});

Deno.test("host: tierd's directories apart as written but not through symlinks", async () => {
  const tmp = await tempDir("tierd-apart");
  try {
    const root = tmp.path;
    await mkdir(join(root, "broker", "streams"), { recursive: true });
    for (const d of DIRS) {
      await mkdir(join(root, LAYOUT[d], "sub"), { recursive: true });
      await mkdir(join(root, `${LAYOUT[d]}2`));
    }
    const real = await Deno.realPath(root);
    let n = 0;
    for (const { name, moved, fixed, dirs, refused } of placements(root)) {
      // The moved directory is written as a link to where the table places it: apart by name.
      const alias = join(root, `alias-${n++}`);
      await symlink(dirs[moved], alias);
      const text = testConfigText({ dir: root }).replace(
        `"${root}/${LAYOUT[moved]}"`,
        `"${alias}"`,
      );
      const issues = await hostIssues(parseConfig(text, join(root, "tierd.toml"), {}));
      if (refused === undefined) {
        assert.deepEqual(issues, [], name);
        continue;
      }
      assert.deepEqual(issues.map((i) => i.path), [KEY[refused.at]], name);
      const written = refused.at === moved ? alias : `${root}/${LAYOUT[refused.at]}`;
      assert.equal(issues[0].value, JSON.stringify(written), name);
      const target = `${real}/${LAYOUT[fixed]}`;
      const message = issues[0].message;
      const expected = refused.same
        ? `expected a directory of its own, not ${KEY[refused.other]} itself; through ` +
          `symlinks both are ${target}: `
        : `expected a directory outside ${KEY[refused.other]}; through symlinks it is ` +
          `${target}/sub, inside ${target}: `;
      assert.ok(message.startsWith(expected), `${name}: ${message}`);
      assert.match(message, /would (wipe|delete) /, name);
    }

    // The outer directory written as a link, the inner one by its real path.
    await symlink(join(root, "state"), join(root, "state-link"));
    const outerLinked = testConfigText({ dir: root })
      .replace(`"${root}/state"`, `"${root}/state-link"`)
      .replace(`"${root}/store"`, `"${root}/state/bucket"`);
    const issues = await hostIssues(parseConfig(outerLinked, join(root, "tierd.toml"), {}));
    assert.deepEqual(issues.map((i) => [i.path, i.value]), [
      ["tiered_storage.fs.path", JSON.stringify(`${root}/state/bucket`)],
    ]);
    assert.match(issues[0].message, /inside .*\/state: .*would wipe the bucket$/);

    // The default layout: the cache in {state_dir}/cache, the fs store beside the state dir.
    const defaults = testConfigText({ dir: root }).replace(`path = "${root}/cache"`, "");
    const config = parseConfig(defaults, join(root, "tierd.toml"), {});
    assert.equal(config.tiered_storage.cache.path, `${root}/state/cache`);
    assert.deepEqual(await hostIssues(config), []);
  } finally {
    await tmp.cleanup();
  }
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
    assert.doesNotMatch(warned.stderr, /tiered_storage\.enabled/);
    // A file that leaves tiering off is valid, but run refuses it: check says so.
    const off = join(tmp.path, "off.toml");
    await writeFile(
      off,
      testConfigText({ dir: tmp.path }).replace("enabled = true", "enabled = false"),
    );
    const offCheck = await cli(["config", "check", "--config", off]);
    assert.equal(offCheck.code, 0);
    assert.match(offCheck.stdout, /tiering disabled/);
    assert.match(
      offCheck.stderr,
      /warning: .*tiered_storage\.enabled is false \(tierd run refuses/,
    );

    for (const args of [["run", "--once"], ["run"]]) {
      const run = await cliProcess([...args, "--config", config]);
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /agent\.data_dir = ".*broker": .*it does not exist/);
    }
    // A [[topic]] the broker does not have is said (a typo, or a topic not created yet).
    await mkdir(join(tmp.path, "broker", "streams", "0", "topics", "1"), { recursive: true });
    const typo = await cli(["config", "check", "--config", config]);
    assert.equal(typo.code, 0);
    assert.match(
      typo.stderr,
      /warning: topic\[0\] \(stream 0, topic 0\): the broker has no such topic \(no .*streams\/0\/topics\/0\)/,
    );
    await mkdir(join(tmp.path, "broker", "streams", "0", "topics", "0"), { recursive: true });
    const fine = await cli(["config", "check", "--config", config]);
    assert.doesNotMatch(fine.stderr, /no such topic/);
    await Deno.remove(join(tmp.path, "broker"), { recursive: true });
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

Deno.test("CLI: config check refuses an fs store in the state dir; warns of one linked there", async () => {
  const tmp = await tempDir("tierd-apart-cli");
  try {
    const root = tmp.path;
    const path = join(root, "tierd.toml");
    await writeFile(
      path,
      testConfigText({ dir: root }).replace(`"${root}/store"`, `"${root}/state/bucket"`),
    );
    const check = await cli(["config", "check", "--config", path]);
    assert.equal(check.code, 2);
    assert.ok(
      check.stderr.includes(
        `tiered_storage.fs.path = "${root}/state/bucket": expected a directory outside ` +
          `agent.state_dir (${root}/state): the fs store must not live where wiping the state dir`,
      ),
      check.stderr,
    );

    // Apart as written, the same through a link: the file is fine, this host is not.
    await mkdir(join(root, "broker", "streams"), { recursive: true });
    await mkdir(join(root, "state"));
    await symlink(join(root, "state"), join(root, "bucket"));
    await writeFile(
      path,
      testConfigText({ dir: root }).replace(`"${root}/store"`, `"${root}/bucket"`),
    );
    const linked = await cli(["config", "check", "--config", path]);
    assert.equal(linked.code, 0, linked.stderr);
    assert.match(
      linked.stderr,
      /warning: tiered_storage\.fs\.path = ".*\/bucket": expected a directory of its own, not agent\.state_dir itself; through symlinks both are .*\/state: .*would wipe the bucket \(tierd run refuses to start\)/,
    );
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

Deno.test("an S3 storage class whose objects cannot be read at once is refused with the reason; SSE-KMS settings need sse = aws:kms", () => {
  for (const cls of ["GLACIER", "DEEP_ARCHIVE"]) {
    assertRefused(
      agent(`[tiered_storage.s3]\nstorage_class = "${cls}"\n`),
      "tiered_storage.s3.storage_class",
      `"${cls}"`,
      /cannot be read until restored.*GLACIER_IR/,
    );
  }
  assertRefused(
    agent('[tiered_storage.s3]\nstorage_class = "standard-ia"\n'),
    "tiered_storage.s3.storage_class",
    '"standard-ia"',
    /another class the store defines/,
  );
  const ok = parseConfig(
    agent(
      '[tiered_storage.s3]\nstorage_class = "GLACIER_IR"\nsse = "aws:kms"\n' +
        'sse_kms_key_id = "alias/tierd"\nsse_bucket_key = true\nsse_context = { team = "streams" }\n',
    ),
    SOURCE,
    {},
  );
  assert.equal(ok.tiered_storage.s3.storage_class, "GLACIER_IR");
  assert.deepEqual(ok.tiered_storage.s3.sse_context, { team: "streams" });
  const enabled = `[tiered_storage]\nenabled = true\nbackend = "s3"\n[tiered_storage.s3]\n` +
    `bucket = "tier-bucket"\n`;
  for (const [key, value] of [["sse_kms_key_id", '"k"'], ["sse_bucket_key", "true"]]) {
    assertRefused(
      agent(`${enabled}sse = "AES256"\n${key} = ${value}\n`),
      `tiered_storage.s3.${key}`,
      value,
      /unless sse = "aws:kms"/,
    );
  }
});

Deno.test("an Azure Archive tier is refused with the reason; a GCS KMS key must name a key", () => {
  assertRefused(
    agent('[tiered_storage.azure]\naccess_tier = "Archive"\n'),
    "tiered_storage.azure.access_tier",
    '"Archive"',
    /cannot be read until rehydrated/,
  );
  assertRefused(
    agent('[tiered_storage.azure]\naccess_tier = "cool"\n'),
    "tiered_storage.azure.access_tier",
    '"cool"',
    /one of "Hot", "Cool", "Cold"/,
  );
  assertRefused(
    agent('[tiered_storage.gcs]\nkms_key_name = "tierd-key"\n'),
    "tiered_storage.gcs.kms_key_name",
    '"tierd-key"',
    /projects\/P\/locations\/L\/keyRings\/R\/cryptoKeys\/K/,
  );
  const ok = parseConfig(
    agent(
      '[tiered_storage.gcs]\nstorage_class = "COLDLINE"\n' +
        'kms_key_name = "projects/p/locations/eu/keyRings/r/cryptoKeys/k"\n' +
        '[tiered_storage.azure]\naccess_tier = "Cold"\nencryption_scope = "scope1"\n',
    ),
    SOURCE,
    {},
  );
  assert.equal(ok.tiered_storage.gcs.storage_class, "COLDLINE");
  assert.equal(ok.tiered_storage.azure.access_tier, "Cold");
});

Deno.test("a topic's storage class follows its backend's rules", () => {
  const topic = (backend: string, cls: string) =>
    agent(
      `[tiered_storage]\nbackend = "${backend}"\n[[topic]]\nstream = 1\ntopic = 1\n` +
        `storage_class = "${cls}"\n`,
    );
  assertRefused(topic("s3", "GLACIER"), "topic[0].storage_class", '"GLACIER"', /until restored/);
  assertRefused(topic("azure", "Archive"), "topic[0].storage_class", '"Archive"', /rehydrated/);
  assertRefused(topic("gcs", "COLD"), "topic[0].storage_class", '"COLD"', /NEARLINE, COLDLINE/);
  assertRefused(topic("fs", "COLD"), "topic[0].storage_class", '"COLD"', /no storage classes/);
  for (const [backend, cls] of [["s3", "GLACIER_IR"], ["gcs", "COLDLINE"], ["azure", "Cool"]]) {
    assert.equal(parseConfig(topic(backend, cls), SOURCE, {}).topic[0].storage_class, cls);
  }
});
