// deploy/ against the real agent: `tierd run` on an fs store under a fake systemd
// (NOTIFY_SOCKET, WATCHDOG_USEC) — READY=1 when /readyz turns 200, watchdog pings, a SIGHUP that
// applies a new local retention live (segments get evicted) and refuses a part_size change,
// STOPPING=1 on SIGTERM — and its live /metrics scrape, which promtool must accept and which must
// hold every metric the Grafana dashboard and the alert rules query. Then promtool on the rules
// and their unit tests, and the systemd unit's settings (and `systemd-analyze verify` where it
// exists). promtool missing: skipped loudly, failed in CI.
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type AgentProcess, freePort, ROOT, runTierd, spawnTierd } from "../fixtures/_agent.ts";
import { onPath } from "../fixtures/_server.ts";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";
import { startNotifyReceiver } from "../runtime/_notify_receiver.ts";
import { dashboardExpressions, metricNames, ruleExpressions, scrapedNames } from "./_promql.ts";
import { findPromtool, promtool } from "./_promtool.ts";

const DEPLOY = join(ROOT, "deploy");
const DASHBOARD = join(DEPLOY, "grafana/tierd-dashboard.json");
const RULES = join(DEPLOY, "prometheus/tierd-alerts.yml");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function configText(dir: string, listen: string, topic: string): string {
  return testConfigText({ dir, topics: [] })
    .replace("[agent]\n", `[agent]\nlisten = "${listen}"\n`)
    .replace('log_level = "error"', 'log_level = "info"') +
    `\n[[topic]]\nstream = 1\ntopic = 1\n${topic}`;
}

async function poll<T>(what: string, ms: number, f: () => Promise<T | undefined>): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out: ${what}`);
    await sleep(200);
  }
}

Deno.test("the live agent: sd_notify, SIGHUP reload, and a scrape promtool and deploy/ accept", async (t) => {
  const tmp = await tempDir("tierd-deploy");
  const rx = await startNotifyReceiver();
  const listen = `127.0.0.1:${freePort()}`;
  const base = `http://${listen}`;
  let agent: AgentProcess | undefined;
  try {
    const gen = await runTierd([
      "gen",
      "--format=iggy-0.9",
      `--data-dir=${tmp.path}/broker`,
      "--stream=1",
      "--topic=1",
      "--partition=0",
      "--messages=2000",
      "--segment-size=64KiB",
      "--seed=5",
    ]);
    assert.equal(gen.code, 0, gen.stderr);
    const configPath = join(tmp.path, "tierd.toml");
    await writeFile(configPath, configText(tmp.path, listen, ""));
    agent = spawnTierd(["run", "--config", configPath], {
      NOTIFY_SOCKET: rx.socket,
      WATCHDOG_USEC: "1000000",
    });
    const running = agent;

    await t.step("READY=1 goes out when /readyz turns 200, then watchdog pings", async () => {
      const ready = await rx.waitFor((m) => m.startsWith("READY=1\n"), 60_000);
      assert.match(ready, /STATUS=store probe passed, 1 partition journals replayed/);
      const res = await fetch(`${base}/readyz`);
      assert.equal(res.status, 200, await res.text());
      await rx.waitFor((m) => m === "WATCHDOG=1\n", 10_000);
      await running.waitFor((l) => l.msg === "first pass done", 60_000);
    });

    let scrape = "";
    await t.step(
      "the scrape holds every metric the dashboard and the alert rules query",
      async () => {
        scrape = await (await fetch(`${base}/metrics`)).text();
        const exported = scrapedNames(scrape);
        for (const name of ["tierd_remote_copy_lag_bytes", "process_cpu_seconds_total"]) {
          assert.ok(exported.has(name), `${name} exported`);
        }
        assert.match(
          scrape,
          /^tierd_uploads_total\{stream="1",topic="1",outcome="failed"\} 0$/m,
          "zero-initialised for each tiered topic",
        );
        assert.match(
          scrape,
          /^tierd_store_requests_total\{op="put_part",outcome="throttled"\} 0$/m,
        );
        const dashboard = JSON.parse(await readFile(DASHBOARD, "utf8"));
        const queried = new Map<string, string>();
        for (const e of dashboardExpressions(dashboard)) {
          for (const n of metricNames(e)) queried.set(n, `dashboard: ${e}`);
        }
        for (const e of ruleExpressions(await readFile(RULES, "utf8"))) {
          for (const n of metricNames(e)) queried.set(n, `rules: ${e}`);
        }
        assert.ok(queried.size >= 25, `only ${queried.size} metrics queried`);
        const unknown = [...queried].filter(([n]) => !exported.has(n));
        assert.deepEqual(unknown, [], "queried but not exported");
      },
    );

    await t.step("promtool check metrics accepts the live scrape", async () => {
      const bin = await findPromtool("promtool check metrics");
      if (!bin) return;
      const r = await promtool(bin, ["check", "metrics"], { stdin: scrape });
      console.error(`promtool check metrics: exit ${r.code}${r.output ? `: ${r.output}` : ""}`);
      assert.equal(r.code, 0, r.output);
    });

    await t.step(
      "SIGHUP applies a new local retention live and refuses a part_size change",
      async () => {
        const before = await (await fetch(`${base}/v1/partitions`)).json();
        assert.equal(before[0].segments.remote, 0, "nothing evicted without a local retention");
        const from = running.lines.length;
        await writeFile(
          configPath,
          configText(tmp.path, listen, `local_retention_size = "64 KiB"\n`).replace(
            'part_size = "8 MiB"',
            'part_size = "16 MiB"',
          ),
        );
        running.kill("SIGHUP");
        const applied = await running.waitFor(
          (l) => l.msg === "config reload: applied",
          30_000,
          from,
        );
        assert.equal(applied.key, "topic[stream=1,topic=1].local_retention_size");
        const refused = await running.waitFor(
          (l) => l.msg === "config reload: refused, the running value stays",
          30_000,
          from,
        );
        assert.equal(refused.key, "tiered_storage.part_size");
        const remote = await poll("segments evicted after the reload", 60_000, async () => {
          const parts = await (await fetch(`${base}/v1/partitions`)).json();
          return parts[0].segments.remote > 0 ? parts[0].segments.remote : undefined;
        });
        assert.ok(remote > 0);
      },
    );

    await t.step("SIGTERM: STOPPING=1 and a clean exit", async () => {
      running.kill("SIGTERM");
      const status = await running.status;
      assert.equal(status.code, 0, running.output().slice(-2000));
      await rx.waitFor((m) => m.startsWith("STOPPING=1\n"), 10_000);
      agent = undefined;
    });
  } finally {
    agent?.kill("SIGKILL");
    await agent?.status;
    await rx.stop();
    await tmp.cleanup();
  }
});

Deno.test("promtool accepts the alert rules and passes their unit tests", async () => {
  const bin = await findPromtool("promtool check rules / test rules");
  if (!bin) return;
  const cwd = join(DEPLOY, "prometheus");
  const check = await promtool(bin, ["check", "rules", "tierd-alerts.yml"], { cwd });
  console.error(`promtool check rules: ${check.output.trim()}`);
  assert.equal(check.code, 0, check.output);
  assert.match(check.output, /SUCCESS: 25 rules found/);
  const test = await promtool(bin, ["test", "rules", "tierd-alerts_test.yml"], { cwd });
  console.error(`promtool test rules: ${test.output.trim()}`);
  assert.equal(test.code, 0, test.output);
});

Deno.test("the systemd unit: notify, watchdog, restart, hardening, state and cache writable only", async () => {
  const text = await readFile(join(DEPLOY, "systemd/tierd.service"), "utf8");
  const keys = new Map<string, string[]>();
  for (const line of text.split("\n")) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (m) keys.set(m[1], [...keys.get(m[1]) ?? [], m[2]]);
  }
  const one = (k: string) => keys.get(k)?.join(" ");
  assert.equal(one("Type"), "notify");
  assert.ok(Number.parseInt(one("WatchdogSec") ?? "") > 0);
  assert.equal(one("Restart"), "on-failure");
  assert.equal(one("ExecReload"), "/bin/kill -HUP $MAINPID");
  assert.equal(one("ProtectSystem"), "strict");
  assert.equal(one("NoNewPrivileges"), "yes");
  assert.equal(one("ReadWritePaths"), "/var/lib/tierd /var/cache/tierd");
  assert.equal(keys.get("MemoryDenyWriteExecute"), undefined, "the JIT needs W+X pages");
  assert.match(one("ExecStart")!, /tierd run --config /);
  const analyze = await onPath("systemd-analyze");
  if (!analyze) {
    console.error("systemd-analyze not installed: the unit's syntax is not verified here");
    return;
  }
  const tmp = await tempDir("tierd-unit");
  try {
    const unit = join(tmp.path, "tierd.service");
    await writeFile(unit, text.replaceAll("/usr/local/bin/tierd", "/bin/true"));
    const out = await new Deno.Command(analyze, { args: ["verify", unit], stdin: "null" }).output();
    const said = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, said);
    assert.equal(said.trim(), "", `systemd-analyze verify complained:\n${said}`);
  } finally {
    await tmp.cleanup();
  }
});
