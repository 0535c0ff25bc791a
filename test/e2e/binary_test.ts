// The single binary, used as an operator would: build dist/tierd with Bun, then `--help`,
// `gen`, `config check`, `config show`, `run --once` and `ls`, and check the objects it wrote; and
// a second instance on a held state dir refused (the Bun flock path of the state dir lock).
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { FsStore } from "../../providers/fs/store.ts";

import { initHashes } from "../../src/hash.ts";
import { fromUserMetadata } from "../../src/layout/object_metadata.ts";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";
import { freePort } from "../fixtures/_server.ts";
import { buildTierdBinary } from "../fixtures/_agent.ts";

function run(bin: string, args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(bin, args, { encoding: "utf8", env: { ...process.env, ...env } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

Deno.test("the compiled binary generates, validates and copies segments", async () => {
  await initHashes();
  const tmp = await tempDir("tierd-bin");
  try {
    const bin = join(tmp.path, "tierd");
    buildTierdBinary(bin);

    // Help in the binary: every command's usage, nothing done.
    for (const args of [["--help"], ["run", "--help"], ["run", "--once", "-h"], ["ls", "-h"]]) {
      const help = run(bin, args);
      assert.equal(help.code, 0, `${args.join(" ")}: ${help.stderr}`);
      assert.match(help.stdout, args[0] === "--help" ? /commands:/ : /^usage: tierd /);
    }

    const broker = join(tmp.path, "broker");
    for (const [partition, format] of [[0, "iggy-0.8"], [1, "iggy-0.9"]] as const) {
      const gen = run(bin, [
        "gen",
        `--format=${format}`,
        `--data-dir=${broker}`,
        "--stream=1",
        "--topic=2",
        `--partition=${partition}`,
        "--messages=1500",
        "--segment-size=64KiB",
        "--seed=3",
      ]);
      assert.equal(gen.code, 0, gen.stderr);
      assert.match(gen.stderr, /segments/);
    }

    const configPath = join(tmp.path, "tierd.toml");
    await writeFile(
      configPath,
      testConfigText({ dir: tmp.path, topics: [{ stream: 1, topic: 2 }] }) +
        `\n[tiered_storage.s3]\nsecret_key = "s3cr3t-never-shown"\n`,
    );
    const check = run(bin, ["config", "check", "--config", configPath]);
    assert.equal(check.code, 0, check.stderr);
    assert.match(check.stdout, /ok/);
    const show = run(bin, ["config", "show", "--config", configPath]);
    assert.equal(show.code, 0, show.stderr);
    assert.ok(!show.stdout.includes("s3cr3t-never-shown"), "config show leaks a secret");

    const bad = join(tmp.path, "bad.toml");
    await writeFile(bad, `[tiered_storage.cache]\nchunk_size = "3 MiB 7"\n`);
    const badCheck = run(bin, ["config", "check", "--config", bad]);
    assert.equal(badCheck.code, 2);
    assert.match(badCheck.stderr, /tiered_storage\.cache\.chunk_size/);

    const once = run(bin, ["run", "--once", "--config", configPath]);
    assert.equal(once.code, 0, once.stderr);
    assert.ok(!once.stderr.includes("s3cr3t-never-shown"));

    // Every sealed segment of both partitions is in the store, byte for byte.
    const store = new FsStore({ root: join(tmp.path, "store") });
    const objects = await listBounded(store, "iggy/local/1/2/");
    for (const partition of [0, 1]) {
      const dir = join(broker, `streams/1/topics/2/partitions/${partition}`);
      const logs = (await readdir(dir)).filter((f) => f.endsWith(".log")).sort();
      const sealed = logs.slice(0, -1);
      assert.ok(sealed.length >= 2);
      for (const name of sealed) {
        for (const ext of [".log", ".index"]) {
          const file = name.replace(".log", ext);
          const obj = objects.find((o) =>
            o.key.startsWith(`iggy/local/1/2/${partition}/`) && o.key.endsWith(file)
          );
          assert.ok(obj, `no object for partition ${partition} ${file}`);
          const got = await store.get(obj.key);
          assert.deepEqual(got.bytes, new Uint8Array(await readFile(join(dir, file))));
          if (ext === ".log") {
            const meta = fromUserMetadata(obj.key, (await store.head(obj.key)).metadata);
            assert.equal(meta.format, partition === 0 ? "iggy-0.8" : "iggy-0.9");
            assert.equal(meta.size, got.bytes.length);
          }
        }
      }
      const active = logs.at(-1)!;
      assert.ok(
        !objects.some((o) =>
          o.key.startsWith(`iggy/local/1/2/${partition}/`) && o.key.endsWith(active)
        ),
      );
    }

    const ls = run(bin, ["ls", "--config", configPath]);
    assert.equal(ls.code, 0, ls.stderr);
    assert.match(ls.stdout, /^STREAM +TOPIC +PARTITIONS +SEGMENTS/);
    const segments = run(bin, [
      "ls",
      "--config",
      configPath,
      "--segments",
      "--stream=1",
      "--topic=2",
      "--partition=1",
    ]);
    assert.equal(segments.code, 0, segments.stderr);
    assert.match(segments.stdout, /COPY_SEGMENT_FINISHED/);
    assert.match(segments.stdout, /LOCAL \(active\)/);

    const usage = run(bin, ["frobnicate"]);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /unknown command/);

    // One agent per state dir, through Bun's FFI flock: while `tierd run` holds it, `run --once`
    // exits 2 naming the holder's pid; after a SIGKILL the kernel has released it.
    const agentConfig = join(tmp.path, "agent.toml");
    await writeFile(
      agentConfig,
      (await readFile(configPath, "utf8")).replace(
        "[agent]\n",
        `[agent]\nlisten = "127.0.0.1:${freePort()}"\n`,
      ),
    );
    const holder = new Deno.Command(bin, {
      args: ["run", "--config", agentConfig],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      const lockFile = join(tmp.path, "state", "tierd.lock");
      const held = `pid ${holder.pid}, tierd run,`;
      for (let i = 0; !(await readFile(lockFile, "utf8").catch(() => "")).startsWith(held); i++) {
        assert.ok(i < 200, "the agent never took the state dir lock");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const second = run(bin, ["run", "--once", "--config", configPath]);
      assert.equal(second.code, 2, second.stderr);
      assert.match(
        second.stderr,
        new RegExp(`in use by another tierd \\(pid ${holder.pid}, tierd run,`),
      );
    } finally {
      holder.kill("SIGKILL");
      await holder.status;
    }
    const free = run(bin, ["run", "--once", "--config", configPath]);
    assert.equal(free.code, 0, free.stderr);
  } finally {
    await tmp.cleanup();
  }
});
