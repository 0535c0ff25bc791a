// Reads cannot take the host down: 24 concurrent 64 MiB reads keep the agent's peak RSS under
// 768 MiB, because a raw answer is streamed a window at a time (and reads reserve those windows
// from one node-wide memory budget: over it they wait, then get 503 + Retry-After) — and every
// one of them is answered whole and in order.
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { codecFor } from "../../src/format/codecs.ts";
import { initHashes } from "../../src/hash.ts";
import { freePort, spawnTierd } from "../fixtures/_agent.ts";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";

const MiB = 1024 * 1024;
const READS = 24;

/** The first offset of each record in `bytes`, every record's checksum verified. */
function offsetsOf(bytes: Uint8Array, start: number): number[] {
  const walk = codecFor("iggy-0.8").walk(bytes, {
    file: "answer",
    startOffset: 0n,
    expectedOffset: BigInt(start),
  });
  return [...walk].map((r) => Number(r.firstOffset));
}

/** Peak resident memory of a process, from `/proc/PID/status` (VmHWM). */
async function peakRss(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]);
  return kb * 1024;
}

Deno.test("24 concurrent 64 MiB reads keep the agent's RSS under 768 MiB", async () => {
  await initHashes();
  const tmp = await tempDir("tierd-readmem");
  try {
    const gen = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL("../../main.ts", import.meta.url).pathname,
        "gen",
        "--format=iggy-0.8",
        `--data-dir=${tmp.path}/broker`,
        "--stream=0",
        "--topic=0",
        "--partition=0",
        "--messages=2200",
        "--payload-size=65000",
        "--segment-size=48MiB",
      ],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.equal(gen.code, 0, new TextDecoder().decode(gen.stderr));
    const port = freePort();
    const configPath = `${tmp.path}/tierd.toml`;
    await writeFile(
      configPath,
      testConfigText({ dir: tmp.path }).replace(
        "[agent]\n",
        `[agent]\nlisten = "127.0.0.1:${port}"\nread_memory_budget = "256 MiB"\n`,
      ),
    );
    const agent = spawnTierd(["run", "--config", configPath]);
    try {
      const url = `http://127.0.0.1:${port}`;
      for (let i = 0; i < 300; i++) {
        const ok = await fetch(`${url}/healthz`).then((r) => r.text()).catch(() => "");
        if (ok === "ok") break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const before = await peakRss(agent.pid);
      let refused = 0;
      const read = async (i: number): Promise<number> => {
        const offset = i * 40; // overlapping 64 MiB windows over ~140 MiB of records
        for (;;) {
          const res = await fetch(
            `${url}/v1/streams/0/topics/0/partitions/0/records?offset=${offset}&max_bytes=${
              64 * MiB
            }`,
          );
          if (res.status === 503) {
            refused++;
            assert.ok(Number(res.headers.get("retry-after")) >= 1);
            await res.body?.cancel();
            await new Promise((r) => setTimeout(r, 200));
            continue;
          }
          if (res.status !== 200) assert.fail(`HTTP ${res.status}: ${await res.text()}`);
          const bytes = new Uint8Array(await res.arrayBuffer());
          assert.equal(res.headers.get("x-tierd-first-offset"), String(offset));
          // Iggy 0.8 records are single messages: each answer's records are contiguous offsets.
          const next = Number(res.headers.get("x-tierd-next-offset"));
          assert.equal(next - offset, Number(res.headers.get("x-tierd-records")));
          assert.deepEqual(
            offsetsOf(bytes, offset),
            Array.from({ length: next - offset }, (_, k) => offset + k),
          );
          return bytes.length;
        }
      };
      const sizes = await Promise.all(Array.from({ length: READS }, (_, i) => read(i)));
      assert.ok(sizes.every((n) => n > 48 * MiB), `every read got its window: ${sizes}`);
      const peak = await peakRss(agent.pid);
      console.log(
        `peak RSS ${(peak / MiB).toFixed(0)} MiB (before the reads ${(before / MiB).toFixed(0)} ` +
          `MiB); ${refused} answers were 503 + Retry-After while the budget was spent`,
      );
      assert.ok(peak < 768 * MiB, `peak RSS ${(peak / MiB).toFixed(0)} MiB`);
      agent.kill("SIGTERM");
      assert.equal((await agent.status).code, 0);
    } finally {
      try {
        agent.kill("SIGKILL");
      } catch {
        // gone
      }
      await agent.status;
    }
  } finally {
    await tmp.cleanup();
  }
});
