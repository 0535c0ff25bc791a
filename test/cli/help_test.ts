// `--help`/`-h` on any command prints that command's usage, listing every flag, and does
// nothing else (exit 0); unknown flags and bad values stay usage errors (exit 2) that print the
// command's usage on stderr.
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type Command, commandUsage, parseCommand, UsageError } from "../../src/cli/args.ts";
import { COMMANDS } from "../../src/cli/main.ts";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";
import { cli, cliProcess } from "./_cli.ts";

/** A command that records whether it ran. */
function spy(): { command: Command; ran: () => number } {
  let runs = 0;
  return {
    ran: () => runs,
    command: {
      spec: {
        name: "spy",
        summary: "records its runs",
        flags: {
          config: { type: "string", value: "F", help: "a config" },
          once: { type: "boolean", help: "once" },
          count: { type: "string", value: "N", help: "a number", required: true },
        },
      },
      run() {
        runs++;
        return Promise.resolve(0);
      },
    },
  };
}

Deno.test("--help and -h anywhere print the usage and never run the command", async () => {
  const s = spy();
  for (
    const args of [
      ["--help"],
      ["-h"],
      ["--once", "--help"],
      ["--count", "3", "-h"],
      ["--bogus", "--help"], // help wins over a flag the command does not know
      ["--config=x.toml", "--once", "-h"],
    ]
  ) {
    const r = await cli(["spy", ...args], [s.command]);
    assert.equal(r.code, 0, args.join(" "));
    assert.match(r.stdout, /^usage: tierd spy /, args.join(" "));
    assert.equal(r.stderr, "");
  }
  const viaHelp = await cli(["help", "spy"], [s.command]);
  assert.equal(viaHelp.code, 0);
  assert.match(viaHelp.stdout, /^usage: tierd spy /);
  assert.equal(s.ran(), 0, "the command ran");

  // After "--", "--help" is an argument, not a request for help.
  assert.throws(() => parseCommand(s.command.spec, ["--", "--help"]), UsageError);
});

Deno.test("unknown flags, missing values and stray arguments are usage errors (exit 2)", async () => {
  const s = spy();
  for (
    const [args, message] of [
      [["--bogus"], /unknown flag --bogus/],
      [["-z"], /unknown flag -z/],
      [["--config"], /--config/],
      [["--once=yes"], /--once/],
      [["extra"], /unexpected argument "extra"/],
    ] as const
  ) {
    const r = await cli(["spy", ...args], [s.command]);
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.stderr, message);
    assert.match(r.stderr, /usage: tierd spy /, "the command's usage follows the error");
  }
  assert.equal(s.ran(), 0);
  const ok = await cli(["spy", "--count", "3"], [s.command]);
  assert.equal(ok.code, 0);
  assert.equal(s.ran(), 1);
});

Deno.test("every command's usage lists every flag it accepts, with -h/--help", () => {
  for (const { spec } of COMMANDS) {
    const usage = commandUsage(spec);
    assert.match(usage, new RegExp(`^usage: tierd ${spec.name} `), spec.name);
    for (const [name, flag] of Object.entries(spec.flags)) {
      assert.ok(usage.includes(`--${name}`), `${spec.name}: --${name} missing from\n${usage}`);
      assert.ok(usage.includes(flag.help.split(" ")[0]), `${spec.name} --${name}: no help`);
      if (flag.short) assert.ok(usage.includes(`-${flag.short}, --${name}`), `${spec.name}`);
    }
    assert.ok(usage.includes("-h, --help"), spec.name);
    for (const line of usage.split("\n")) {
      assert.ok(line.length <= 100, `${spec.name}: a line over 100 columns: ${line}`);
    }
  }
  const restore = commandUsage(COMMANDS.find((c) => c.spec.name === "restore")!.spec);
  for (const flag of ["--config", "--stream", "--topic", "--partition", "--cluster-id"]) {
    assert.ok(restore.includes(flag), flag);
  }
  assert.ok(restore.includes("--with-data"));
});

Deno.test("the real commands: --help does nothing, even where the command would fail or act", async () => {
  const tmp = await tempDir("tierd-help");
  try {
    // A config whose run would copy (and, with local retention 0, evict) — but help runs nothing.
    const config = join(tmp.path, "tierd.toml");
    await writeFile(config, testConfigText({ dir: tmp.path }));
    const missing = join(tmp.path, "nope.toml");
    for (
      const args of [
        ["run", "--config", config, "--help"],
        ["run", "--once", "--config", config, "--help"],
        ["run", "--once", "-h"],
        ["probe", "--config", missing, "--help"],
        ["config", "check", "--config", missing, "-h"],
        ["config", "--help"],
        ["ls", "--config", missing, "--help"],
        ["gen", "--help"],
        ["read", "--help"],
        ["restore", "--with-data", "--config", config, "--help"],
      ]
    ) {
      const r = await cli(args);
      assert.equal(r.code, 0, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stdout, new RegExp(`^usage: tierd ${args[0]} `));
    }
    // Nothing was created: no state dir, no lock, no journal.
    const names = [];
    for await (const e of Deno.readDir(tmp.path)) names.push(e.name);
    assert.deepEqual(names, ["tierd.toml"]);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("tierd with no command, an unknown one, help and --version", async () => {
  const none = await cli([]);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /commands:/);
  const unknown = await cli(["frobnicate"]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown command "frobnicate"/);
  const help = await cli(["--help"]);
  assert.equal(help.code, 0);
  for (const { spec } of COMMANDS) assert.match(help.stdout, new RegExp(`\\n  ${spec.name} `));
  const version = await cli(["--version"]);
  assert.equal(version.code, 0);
  assert.match(version.stdout, /^\d+\.\d+\.\d+/);
});

Deno.test("as a process: run --help exits 0 at once; a bad flag exits 2", async () => {
  const help = await cliProcess(["run", "--once", "--help"]);
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /usage: tierd run \[--config F\] \[--once\]/);
  const bad = await cliProcess(["run", "--onse"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /unknown flag --onse/);
});
