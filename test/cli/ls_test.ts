// `tierd gen`, `tierd run --once` and `tierd ls` as an operator sees them: gen and run --once
// report progress on stderr (one line per segment when stderr is not a terminal); ls prints a
// summary per topic with headers and human sizes, `--segments` every segment, `--json` the rows.
// ls asks neither the broker nor the store, so it needs none of their credentials.
import assert from "node:assert/strict";
import { rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { generatePartition } from "../../src/format/generate.ts";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";
import { cli, cliProcess } from "./_cli.ts";

Deno.test("gen, run --once and ls: progress lines, a topic summary, segments, JSON", async () => {
  const tmp = await tempDir("tierd-ls");
  try {
    const broker = join(tmp.path, "broker");
    const gen = await cliProcess([
      "gen",
      "--format=iggy-0.9",
      `--data-dir=${broker}`,
      "--stream=1",
      "--topic=2",
      "--partition=0",
      "--messages=2000",
      "--segment-size=64KiB",
    ]);
    assert.equal(gen.code, 0, gen.stderr);
    const genLines = gen.stderr.trim().split("\n");
    assert.match(genLines[0], /^gen 1\/2\/0: \d+\/2000 messages, [\d.]+ KiB, .*\/s.*: wrote /);
    assert.match(genLines.at(-2)!, /^gen 1\/2\/0: 2000\/2000 messages/);
    assert.match(genLines.at(-1)!, /^gen: \d+ segments, [\d.]+ KiB \(\d+ bytes\)/);
    const quiet = await cliProcess([
      "gen",
      "--format=iggy-0.8",
      `--data-dir=${broker}`,
      "--stream=1",
      "--topic=2",
      "--partition=1",
      "--messages=1000",
      "--segment-size=32KiB",
      "-q",
    ]);
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.equal(quiet.stderr.trim().split("\n").length, 1, quiet.stderr);

    const config = join(tmp.path, "tierd.toml");
    await writeFile(config, testConfigText({ dir: tmp.path, topics: [{ stream: 1, topic: 2 }] }));

    const before = await cli(["ls", "--config", config]);
    assert.equal(before.code, 0, before.stderr);
    const [head, row] = before.stdout.trim().split("\n");
    assert.match(head, /^STREAM\s+TOPIC\s+PARTITIONS\s+SEGMENTS\s+LOCAL\s+REMOTE\s+EVICTED/);
    assert.match(head, /TO COPY\s+DANGLING\s+LOST\s+HOLES\s+LOCAL SIZE\s+REMOTE SIZE$/);
    const cells = row.trim().split(/\s{2,}/);
    assert.deepEqual(cells.slice(0, 3), ["1", "2", "2"]);
    const segments = Number(cells[3]);
    assert.equal(cells[7], String(segments - 2), "every sealed segment waits for its copy");
    assert.equal(cells[10], "0", "no hole");
    assert.match(cells[11], /^[\d.]+ (KiB|MiB)$/, "human sizes");
    assert.equal(cells[12], "0 B");

    const once = await cliProcess(["run", "--once", "--config", config]);
    assert.equal(once.code, 0, once.stderr);
    const copies = once.stderr.split("\n").filter((l) => l.startsWith("run --once: copy: "));
    assert.equal(copies.length, segments - 2, once.stderr);
    assert.match(copies[0], /: 1\/\d+ segments, [\d.]+ KiB of [\d.]+ KiB, .*\/s.*: copied /);
    assert.match(copies.at(-1)!, new RegExp(`: ${segments - 2}/${segments - 2} segments`));

    const after = await cli(["ls", "--config", config]);
    const afterCells = after.stdout.trim().split("\n")[1].trim().split(/\s{2,}/);
    assert.equal(afterCells[5], String(segments - 2), "REMOTE");
    assert.equal(afterCells[7], "0", "TO COPY");
    assert.match(afterCells[11], /^[\d.]+ (KiB|MiB)$/);

    const long = await cli(["ls", "--config", config, "--segments", "--partition", "1"]);
    assert.equal(long.code, 0, long.stderr);
    const lines = long.stdout.trim().split("\n");
    assert.match(
      lines[0],
      /^1\/2\/1 {2}incarnation [0-9a-f]{16} {2}generation 0 {2}tiered_up_to_offset \d+$/,
    );
    assert.match(lines[1], /^\s+START\s+END\s+STATE\s+LOCATION\s+SIZE$/);
    assert.match(lines[2], /^\s+0\s+\d+\s+COPY_SEGMENT_FINISHED\s+local\+remote\s+[\d.]+ KiB$/);
    assert.match(lines.at(-1)!, /LOCAL \(active\)\s+local\s+[\d.]+ (B|KiB)$/);
    assert.ok(!long.stdout.includes("1/2/0"), "--partition filters");

    const json = await cli(["ls", "--config", config, "--json"]);
    const rows = JSON.parse(json.stdout) as Record<string, unknown>[];
    assert.equal(rows.length, segments);
    assert.deepEqual(Object.keys(rows[0]), [
      "partition",
      "start",
      "end",
      "state",
      "location",
      "bytes",
    ]);
    assert.equal(typeof rows[0].bytes, "number");

    // Only tierd's state knows a partition (a state-only restore; the broker dropped it): still
    // listed, every copy remote.
    await rename(join(broker, "streams/1/topics/2/partitions/1"), join(tmp.path, "moved"));
    const stateOnly = await cli(["ls", "--config", config, "--segments", "--partition", "1"]);
    assert.equal(stateOnly.code, 0, stateOnly.stderr);
    const only = stateOnly.stdout.trim().split("\n");
    assert.match(only[0], /^1\/2\/1 {2}incarnation [0-9a-f]{16} /);
    assert.ok(only.length > 2, stateOnly.stdout);
    for (const l of only.slice(2)) assert.match(l, /COPY_SEGMENT_FINISHED\s+remote\s/);

    const none = await cli(["ls", "--config", config, "--stream", "9"]);
    assert.match(none.stdout, /^no tiered partitions under /);
    const bad = await cli(["ls", "--config", config, "--stream", "x"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--stream must be a non-negative integer, got "x"/);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("ls needs neither the broker's password nor the store's keys; config check still does", async () => {
  const tmp = await tempDir("tierd-ls-creds");
  try {
    await generatePartition({
      format: "iggy-0.9",
      dataDir: join(tmp.path, "broker"),
      stream: 4,
      topic: 1,
      partition: 0,
      messages: 300,
      segmentSize: 16 * 1024,
    });
    // As on a host whose agent gets its secrets from the service's environment: the broker's
    // password and the store's keys are not in this shell, and the broker is not even running.
    const config = join(tmp.path, "tierd.toml");
    await writeFile(
      config,
      `[agent]
data_dir = "broker"
state_dir = "state"
evict_via = "broker"
read_auth = "token"

[agent.broker]
http_url = "http://127.0.0.1:1"
username = "iggy"

[tiered_storage]
enabled = true
backend = "s3"

[tiered_storage.s3]
bucket = "tiered"
credentials_source = "static"

[[topic]]
stream = 4
topic = 1
`,
    );
    const env = ["TIERD_BROKER_PASSWORD", "TIERD_BROKER_TOKEN", "TIERD_S3_SECRET_KEY"];
    assert.deepEqual(env.filter((name) => Deno.env.get(name)), [], "set in this test's env");

    const ls = await cli(["ls", "--config", config, "--segments"]);
    assert.equal(ls.code, 0, ls.stderr);
    assert.equal(ls.stderr, "");
    const lines = ls.stdout.trim().split("\n");
    assert.match(lines[0], /^4\/1\/0 {2}incarnation - {2}generation 0 {2}tiered_up_to_offset -1$/);
    assert.match(lines.at(-1)!, /LOCAL \(active\)\s+local\s/);
    assert.ok(lines.length > 3, ls.stdout);

    // The agent does need them: the config is refused for what it will call.
    const check = await cli(["config", "check", "--config", config]);
    assert.equal(check.code, 2, check.stdout + check.stderr);
    const said = check.stdout + check.stderr;
    assert.match(said, /agent\.broker\.password: expected username and password/);
    assert.match(said, /agent\.read_token: expected a token/);
    assert.match(said, /tiered_storage\.s3\.access_key: expected an access key/);
  } finally {
    await tmp.cleanup();
  }
});
