// `tierd read` runs the read path without the server: raw bytes on stdout, JSON with --json,
// exit 2 for bad flags and 1 with the message for a failed read.
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { FsStore } from "../../providers/fs/store.ts";
import { testConfigText } from "../_config.ts";
import { buildScenario, expectedRead } from "./_scenario.ts";

const MAIN = fileURLToPath(new URL("../../main.ts", import.meta.url));

async function tierd(args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: out.stdout, stderr: new TextDecoder().decode(out.stderr) };
}

Deno.test("tierd read: raw bytes, JSON, and errors", async () => {
  const s = await buildScenario({
    format: "iggy-0.9",
    configFormat: "auto",
    before: 40,
    after: 10,
    segmentSize: 1024,
    payloadSize: 32,
    messagesPerBatch: 2,
    evict: 2,
    store: (config) => new FsStore({ root: config.tiered_storage.fs.path }),
  });
  try {
    const configPath = `${s.dir}/tierd.toml`;
    await writeFile(configPath, testConfigText({ dir: s.dir }));
    const ids = ["--config", configPath, "--stream", "0", "--topic", "0", "--partition", "0"];

    const raw = await tierd(["read", ...ids, "--offset", "3", "--max-bytes", "2000"]);
    assert.equal(raw.code, 0, raw.stderr);
    const expected = expectedRead(s.records, { offset: 3n }, 2000)!;
    assert.deepEqual(raw.stdout, expected.bytes);
    assert.match(raw.stderr, new RegExp(`next_offset=${expected.nextOffset} `));
    assert.match(raw.stderr, /source=(remote|mixed)/);

    const json = await tierd([
      "read",
      ...ids,
      "--timestamp",
      "0",
      "--max-bytes",
      "1 KiB",
      "--json",
    ]);
    assert.equal(json.code, 0, json.stderr);
    const body = JSON.parse(new TextDecoder().decode(json.stdout));
    assert.equal(body.first_offset, "0");
    assert.equal(body.messages[0].offset, "0");

    const both = await tierd(["read", ...ids, "--offset", "0", "--timestamp", "0"]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /exactly one of --offset and --timestamp/);
    const bad = await tierd(["read", ...ids, "--offset=-1"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--offset must be a non-negative decimal integer/);
    const huge = await tierd(["read", ...ids, "--offset", "0", "--max-bytes", "10 GiB"]);
    assert.equal(huge.code, 2);
    assert.match(huge.stderr, /--max-bytes must be between 1 and/);
    const past = await tierd(["read", ...ids, "--offset", "1000000"]);
    assert.equal(past.code, 1);
    assert.match(past.stderr, /no record at or after offset 1000000/);
  } finally {
    await s.cleanup();
  }
});

Deno.test("tierd read … | head: the reader going away ends tierd quietly, exit 0", async () => {
  const dir = await Deno.makeTempDir({ prefix: "tierd-epipe-" });
  try {
    const gen = await tierd([
      "gen",
      "--format=iggy-0.8",
      `--data-dir=${dir}/broker`,
      "--stream=0",
      "--topic=0",
      "--partition=0",
      "--messages=3000",
      "--payload-size=1000",
      "--segment-size=8MiB",
    ]);
    assert.equal(gen.code, 0, gen.stderr);
    const configPath = `${dir}/tierd.toml`;
    await writeFile(configPath, testConfigText({ dir }));
    const ids = ["--config", configPath, "--stream", "0", "--topic", "0", "--partition", "0"];
    // Megabytes of output: far more than a pipe holds, so writes meet the closed pipe.
    for (const extra of [[], ["--json"]]) {
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          MAIN,
          "read",
          ...ids,
          "--offset",
          "0",
          "--max-bytes",
          "4 MiB",
          ...extra,
        ],
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const reader = child.stdout.getReader();
      const first = await reader.read();
      assert.ok(first.value && first.value.length > 0);
      await reader.cancel(); // closes the pipe, like `head -c 10` exiting
      const status = await child.status;
      const stderr = new TextDecoder().decode(await new Response(child.stderr).arrayBuffer());
      assert.equal(status.code, 0, `exit ${status.code} after the reader left: ${stderr}`);
      assert.doesNotMatch(stderr, /EPIPE|Broken pipe|error/i);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
