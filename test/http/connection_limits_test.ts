// An unauthenticated client cannot knock the agent over: 700 half-open requests under
// `ulimit -n 512` (a common service limit) leave it serving, each half-open connection is
// closed after the header timeout, and the tier worker goes on copying meanwhile.
import assert from "node:assert/strict";
import net from "node:net";
import { writeFile } from "node:fs/promises";
import { freePort, spawnTierd } from "../fixtures/_agent.ts";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";

const HALF_OPEN = 700;

Deno.test("700 half-open connections under ulimit -n 512 leave the agent serving", async () => {
  const tmp = await tempDir("tierd-conns");
  try {
    const port = freePort();
    const gen = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL("../../main.ts", import.meta.url).pathname,
        "gen",
        "--format=iggy-0.9",
        `--data-dir=${tmp.path}/broker`,
        "--stream=0",
        "--topic=0",
        "--partition=0",
        "--messages=2000",
        "--segment-size=64KiB",
      ],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.equal(gen.code, 0, new TextDecoder().decode(gen.stderr));
    const configPath = `${tmp.path}/tierd.toml`;
    await writeFile(
      configPath,
      testConfigText({ dir: tmp.path }).replace(
        "[agent]\n",
        `[agent]\nlisten = "127.0.0.1:${port}"\nhttp_header_timeout = "1 s"\n`,
      ).replace('log_level = "error"', 'log_level = "info"'),
    );
    const agent = spawnTierd(["run", "--config", configPath], {}, { openFiles: 512 });
    try {
      await agent.waitFor((l) => l.msg === "http api listening", 30_000);
      const sockets: net.Socket[] = [];
      let closedByServer = 0;
      for (let i = 0; i < HALF_OPEN; i++) {
        const s = net.connect(port, "127.0.0.1");
        s.on("error", () => {});
        s.on("close", () => closedByServer++);
        s.write("GET /healthz HTTP/1.1\r\nHost: tierd\r\n"); // and never the blank line
        sockets.push(s);
      }
      try {
        // A well-behaved client gets through while the flood lasts.
        let answered = false;
        for (let i = 0; i < 150 && !answered; i++) {
          const res = await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined);
          if (res?.ok) answered = (await res.text()) === "ok";
          else await res?.body?.cancel();
          if (!answered) await new Promise((r) => setTimeout(r, 200));
        }
        assert.ok(answered, "the agent answered /healthz during the flood");
        // Every half-open connection is closed by the server, not held open indefinitely.
        for (let i = 0; i < 150 && closedByServer < HALF_OPEN; i++) {
          await new Promise((r) => setTimeout(r, 200));
        }
        assert.equal(closedByServer, HALF_OPEN, "half-open connections closed after the timeout");
        // The worker kept working: the sealed segments were copied.
        await agent.waitFor((l) => l.msg === "segment copied", 30_000);
        const partitions = await (await fetch(`http://127.0.0.1:${port}/v1/partitions`)).json();
        assert.ok(partitions[0].segments.uploaded > 0, JSON.stringify(partitions));
        assert.doesNotMatch(agent.output(), /Too many open files/i);
      } finally {
        for (const s of sockets) s.destroy();
      }
      agent.kill("SIGTERM");
      const status = await agent.status;
      assert.equal(status.code, 0, agent.output().slice(-2000));
    } finally {
      try {
        agent.kill("SIGKILL");
      } catch {
        // already gone
      }
      await agent.status;
    }
  } finally {
    await tmp.cleanup();
  }
});
