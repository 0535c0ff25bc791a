// Issue 10's damage table, the second-instance row, through the real CLI: while a `tierd run`
// holds the state dir, `tierd run --once` and `tierd restore` refuse with exit 2 naming the
// holder's pid, read-only commands still work, and the running agent goes on serving every
// offset; once the holder is SIGKILLed the kernel has dropped the lock and `run --once` runs.
// (The compiled binary, whose lock goes through Bun's FFI flock, is checked in binary_test.ts.)
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { LOCK_FILE } from "../../src/runtime/state_lock.ts";
import { runTierd } from "../fixtures/_agent.ts";
import { assertEverythingReadable, recoveryRig, runAgent } from "./_recovery.ts";

Deno.test("a second instance on the same state dir exits 2 naming the holder's pid; the holder goes on serving", async () => {
  const rig = await recoveryRig({ format: "iggy-0.8", store: { kind: "fs" } });
  try {
    const agent = await runAgent(rig);
    let killed = false;
    try {
      const pid = agent.process.pid;
      const lock = await readFile(join(rig.config.agent.state_dir, LOCK_FILE), "utf8");
      assert.match(lock, new RegExp(`^pid ${pid}, tierd run, since `));
      for (const args of [["run", "--once"], ["run"], ["restore"]]) {
        const second = await runTierd([...args, "--config", rig.configPath], rig.env);
        assert.equal(second.code, 2, `${args.join(" ")}: ${second.stderr}`);
        assert.match(
          second.stderr,
          new RegExp(`in use by another tierd \\(pid ${pid}, tierd run,`),
        );
        assert.ok(second.stderr.includes(rig.config.agent.state_dir), second.stderr);
        assert.equal(second.stderr.trim().split("\n").length, 1, "one line");
      }
      // Read-only commands do not need the lock.
      const ls = await runTierd(["ls", "--config", rig.configPath, "--segments"], rig.env);
      assert.equal(ls.code, 0, ls.stderr);
      assert.match(ls.stdout, /COPY_SEGMENT_FINISHED/);
      const check = await runTierd(["config", "check", "--config", rig.configPath], rig.env);
      assert.equal(check.code, 0, check.stderr);
      // The holder was not disturbed: every offset, no loss.
      await assertEverythingReadable(rig, agent.api);
      // A SIGKILL leaves no stale lock: the kernel dropped it with the process.
      agent.process.kill("SIGKILL");
      killed = true;
      await agent.process.status;
      const after = await runTierd(["run", "--once", "--config", rig.configPath], rig.env);
      assert.equal(after.code, 0, after.stderr);
      const now = await readFile(join(rig.config.agent.state_dir, LOCK_FILE), "utf8");
      assert.doesNotMatch(now, new RegExp(`^pid ${pid},`));
    } finally {
      if (!killed) await agent.stop();
    }
  } finally {
    await rig.cleanup();
  }
});
