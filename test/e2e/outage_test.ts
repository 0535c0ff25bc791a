// Store outages under the real agent (`tierd run`, continuous, eviction on): MinIO is SIGKILLed
// while the agent copies a backlog — once with a multipart part in flight and back within the
// segment upload deadline, once for longer than it — and restarted on the same port and data.
// While it is down the agent retries, the floor stays, nothing is evicted; the upload stall shows
// and clears; afterwards everything is copied, byte for byte, and nothing is left pending.
// Skipped loudly without MinIO (failed in CI).
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { initHashes } from "../../src/hash.ts";
import {
  type AgentProcess,
  freePort,
  type LogLine,
  minioAvailable,
  minioStore,
  runTierd,
  s3ConfigText,
  s3Env,
  spawnTierd,
  startMinioReady,
} from "../fixtures/_agent.ts";
import type { MinioServer } from "../fixtures/minio.ts";
import { tempDir } from "../_util.ts";
import { BrokerOracle, settle, uploadHistory } from "./_oracle.ts";
import { startS3Tap } from "./_s3_tap.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
const STREAM = 7;
const TOPIC = 3;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What must not change while the store is down. */
interface Frozen {
  floors: bigint[];
  /** Per partition: the end of the longest copied prefix, the most the floor may catch up to. */
  reachable: bigint[];
  logs: string[];
  copied: number;
}

async function freeze(oracle: BrokerOracle): Promise<Frozen> {
  const out: Frozen = { floors: [], reachable: [], logs: [], copied: 0 };
  for (const p of oracle.partitions) {
    const { state } = await oracle.journal(p);
    out.floors.push(state.floor);
    out.logs.push([...await oracle.brokerLogs(p)].sort().join(","));
    let reachable = state.floor;
    for (const s of oracle.chain(p)) {
      if (state.segments.get(0n)?.get(s.start)?.state !== "COPY_SEGMENT_FINISHED") break;
      if (s.endOffset > reachable) reachable = s.endOffset;
    }
    out.reachable.push(reachable);
    for (const m of state.segments.values()) {
      for (const r of m.values()) if (r.state === "COPY_SEGMENT_FINISHED") out.copied++;
    }
  }
  return out;
}

/** `tierd_upload_stalled` from the agent's `/metrics`, or undefined when nothing serves it. */
async function scrapeStalled(listen: string): Promise<number | undefined> {
  try {
    const res = await fetch(`http://${listen}/metrics`, { signal: AbortSignal.timeout(2000) });
    const text = await res.text();
    if (!res.ok) return undefined;
    const m = /^tierd_upload_stalled(?:\{[^}]*\})? (\S+)$/m.exec(text);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

if (await minioAvailable("outage test against MinIO")) {
  Deno.test("a store outage stalls uploads, holds the floor and evictions, then recovers", async (t) => {
    await initHashes();
    const minio: MinioServer = (await startMinioReady())!;
    const tap = await startS3Tap(minio.endpoint);
    const tmp = await tempDir("tierd-outage");
    const store = minioStore(minio);
    const listen = `127.0.0.1:${freePort()}`;
    let agent: AgentProcess | undefined;
    const report: string[] = [];
    try {
      const oracle = new BrokerOracle(
        join(tmp.path, "broker"),
        join(tmp.path, "state"),
        STREAM,
        TOPIC,
        [
          { partition: 0, format: "iggy-0.9", payloadSize: 512, segmentSize: 256 * KiB },
          { partition: 1, format: "iggy-0.8", payloadSize: 8000, segmentSize: 11 * MiB },
        ],
      );
      const [small, big] = oracle.partitions;
      // A backlog: ~30 small segments and four that go multipart (three parts each).
      await oracle.append(small, 14_000, 1);
      await oracle.append(big, 5_600, 2);
      const configPath = join(tmp.path, "tierd.toml");
      await writeFile(
        configPath,
        s3ConfigText({
          dir: tmp.path,
          minio,
          endpoint: tap.endpoint,
          topics: [{ stream: STREAM, topic: TOPIC, localRetentionSize: "1 MiB" }],
          logLevel: "debug",
          uploadTimeout: "6 s",
          backoffMax: "1 s",
          listen,
        }),
      );
      const env = s3Env(minio);
      agent = spawnTierd(["run", "--config", configPath], env);
      const running = agent;
      await running.waitFor((l) => l.msg === "store probe ok", 30_000);
      // The HTTP API (if `tierd run` serves one) comes up just after the probe.
      let metrics = false;
      for (const until = Date.now() + 3000; !metrics && Date.now() < until; await sleep(100)) {
        metrics = await scrapeStalled(listen) !== undefined;
      }
      if (!metrics) {
        console.error(
          `\n!!!!! NOTE: tierd run serves no /metrics at ${listen}; ` +
            `the upload stall is checked on the structured log lines instead !!!!!\n`,
        );
      }

      /**
       * Kills MinIO when `trigger` first matches a request through the tap, keeps it down for
       * `downMs`, checks that nothing moved meanwhile, then restarts it.
       */
      const outage = async (
        name: string,
        how: "MinIO killed" | "network cut",
        trigger: (op: string, key: string) => boolean,
        downMs: number,
      ) => {
        let killedAt = 0;
        let from = 0;
        const down = new Promise<void>((resolve) =>
          tap.on((e) => {
            if (killedAt || e.phase !== "request" || !trigger(e.op, e.key)) return;
            killedAt = Date.now();
            from = running.lines.length;
            if (how === "MinIO killed") minio.kill();
            else tap.cut(true);
            resolve();
          })
        );
        await Promise.race([
          down,
          sleep(30_000).then(() => {
            throw new Error(`${name}: the trigger never came`);
          }),
        ]);
        tap.on(undefined);
        // Whatever the agent heard before the kill may still land; then nothing may move.
        await sleep(500);
        const before = await freeze(oracle);
        let stalledSeen = false;
        let now = before;
        try {
          while (Date.now() - killedAt < downMs) {
            await sleep(250);
            now = await freeze(oracle);
            // The floor may still catch up with copies verified before the store went (it
            // advances after the pass's copy phase), never past them.
            for (const [i, floor] of now.floors.entries()) {
              assert.ok(
                floor <= before.reachable[i],
                `${name}: partition ${i}: floor ${floor} passed ${before.reachable[i]}, ` +
                  `the end of what was copied before the store went down`,
              );
            }
            assert.deepEqual(now.logs, before.logs, `${name}: a segment was evicted while down`);
            assert.equal(now.copied, before.copied, `${name}: a copy finished while down`);
            if (metrics && await scrapeStalled(listen) === 1) stalledSeen = true;
          }
        } finally {
          if (how === "MinIO killed") await minio.restart();
          else tap.cut(false);
        }
        const restartIndex = running.lines.length;
        const during = running.lines.slice(from, restartIndex);
        const retries = during.filter((l) => l.msg === "store operation retried").length;
        assert.ok(retries > 0, `${name}: no retry logged while the store was down`);
        report.push(
          `${name} (${how}): down ${((Date.now() - killedAt) / 1000).toFixed(1)} s, ` +
            `${retries} retries logged, floors ${before.floors.join("/")} → ` +
            `${now.floors.join("/")} (copied prefix ended at ${before.reachable.join("/")})`,
        );
        return { from, during, stalledSeen, restartIndex };
      };

      await t.step("short outage mid multipart part: retries within the deadline", async () => {
        const copiedSoFar = () => running.lines.filter((l) => l.msg === "segment copied").length;
        const o = await outage(
          "outage 1",
          "MinIO killed",
          (op) => op === "UploadPart" && copiedSoFar() >= 4,
          1500,
        );
        await settle(oracle, running, 60_000);
        await oracle.checkInvariants(store, "after outage 1");
        const left = await store.listMultipartUploads("iggy/");
        assert.deepEqual(left, [], `uploads left open:\n${await uploadHistory(oracle, left)}`);
        const failed = running.lines.slice(o.from).filter((l) =>
          l.msg === "segment copy failed; dangling until cleaned up"
        ).length;
        report.push(
          `outage 1: ${failed} copies failed (the rest retried through); ` +
            `stall seen via metrics: ${metrics ? o.stalledSeen : "n/a"}`,
        );
      });

      await t.step("network cut mid multipart part: no upload is left open", async () => {
        // MinIO forgets incomplete uploads when it restarts; a store that stays up while the
        // network is gone keeps the upload the outage cut off, and the agent must not leak it.
        const mark = running.lines.length;
        await oracle.append(big, 2_800, 5);
        const o = await outage(
          "outage 2",
          "network cut",
          (op) => op === "UploadPart" && running.lines.length > mark,
          1500,
        );
        await settle(oracle, running, 60_000);
        await oracle.checkInvariants(store, "after outage 2");
        const failed = running.lines.slice(o.from).filter((l) =>
          l.msg === "segment copy failed; dangling until cleaned up"
        ).length;
        report.push(`outage 2: ${failed} copies failed (the rest retried through)`);
        const open = await store.listMultipartUploads("iggy/");
        assert.deepEqual(
          open,
          [],
          `an upload cut off by the outage was left open:\n${await uploadHistory(oracle, open)}\n` +
            running.lines.slice(o.from).filter((l) =>
              l.partition === `${STREAM}/${TOPIC}/1`
            )
              .map((l) => `${l.ts} ${l.msg} ${JSON.stringify(l.err ?? "").slice(0, 200)}`)
              .join("\n"),
        );
      });

      await t.step("long outage: copies fail, the stall rises and falls", async () => {
        // A fresh backlog so the agent is copying when the store goes.
        const mark = running.lines.length;
        await oracle.append(small, 4_000, 3);
        await oracle.append(big, 2_800, 4);
        const o = await outage(
          "outage 3",
          "MinIO killed",
          (op, key) => op === "PutObject" && key.endsWith(".log") && running.lines.length > mark,
          10_000,
        );
        const failedCopy = (l: LogLine) =>
          l.msg === "segment copy failed; dangling until cleaned up" ||
          (l.msg === "pass finished" && Number(l.failed) > 0);
        const rose = o.during.filter(failedCopy);
        assert.ok(rose.length > 0, "outage 3: no failed copy was logged while the store was down");
        await settle(oracle, running, 90_000);
        // A backlog written once the store is back is copied by a pass that fails nothing. (The
        // pass that spanned the restart may have copied everything left and still count the
        // attempts it made while the store was down; without new work no later pass logs.)
        await oracle.append(small, 4_000, 7);
        await settle(oracle, running, 90_000);
        if (metrics) {
          assert.ok(
            o.stalledSeen,
            "tierd_upload_stalled never rose to 1 while the store was down; the agent said:\n" +
              o.during.filter((l) => l.level !== "debug")
                .map((l) => `${l.ts} ${l.msg} ${JSON.stringify(l.err ?? l.failed ?? "")}`)
                .join("\n").slice(0, 4000),
          );
        }
        const after = running.lines.slice(o.restartIndex);
        const recovered = after.find((l) =>
          l.msg === "pass finished" && Number(l.failed) === 0 && Number(l.copied) > 0
        );
        assert.ok(
          recovered,
          "no successful pass was logged after the store came back; the agent said:\n" +
            after.filter((l) => l.level !== "debug")
              .map((l) =>
                `${l.ts} ${l.msg} ${
                  JSON.stringify({ copied: l.copied, failed: l.failed, err: l.err }).slice(0, 300)
                }`
              )
              .join("\n").slice(-4000),
        );
        if (metrics) {
          assert.equal(await scrapeStalled(listen), 0, "tierd_upload_stalled stayed up");
        }
        report.push(
          `outage 3: ${rose.length} failed-copy lines while down; ` +
            `stall ${metrics ? "via /metrics" : "via log lines"} rose and fell`,
        );
        await oracle.checkInvariants(store, "after outage 3");
      });

      await t.step("SIGTERM, then run --once finds nothing to do", async () => {
        const termAt = Date.now();
        running.kill("SIGTERM");
        const status = await running.status;
        agent = undefined;
        assert.equal(status.code, 0, running.output().slice(-2000));
        assert.ok(Date.now() - termAt < 10_000, "SIGTERM took too long");
        const once = await runTierd(["run", "--once", "--config", configPath], env);
        assert.equal(once.code, 0, once.stderr);
        const finished = once.lines.find((l) => l.msg === "pass finished");
        assert.equal(finished?.pending, 0, once.stderr);
        assert.equal(finished?.copied, 0, "run --once still had copies to make");
        assert.equal(finished?.failed, 0);
        oracle.forgetVerified();
        const final = await oracle.checkInvariants(store, "at the end");
        for (const p of oracle.partitions) {
          const { state } = await oracle.journal(p);
          for (const s of oracle.chain(p)) {
            assert.equal(
              state.segments.get(0n)?.get(s.start)?.state,
              "COPY_SEGMENT_FINISHED",
              `partition ${p.partition}: segment ${s.start} not copied`,
            );
          }
          const dangling = [...(state.segments.get(0n)?.values() ?? [])].filter((r) =>
            r.state === "DANGLING" || r.state === "DELETE_SEGMENT_STARTED"
          );
          assert.deepEqual(dangling, [], `partition ${p.partition}: dangling at the end`);
        }
        const left = await store.listMultipartUploads("iggy/");
        assert.deepEqual(left, [], `uploads left open:\n${await uploadHistory(oracle, left)}`);
        report.push(`end: ${final.copied} segments copied, ${final.evicted} evicted`);
      });
      console.error(report.join("\n"));
    } finally {
      agent?.kill("SIGKILL");
      await agent?.status;
      await tap.close();
      await minio.stop();
      await tmp.cleanup();
    }
  });
} else {
  Deno.test({ name: "outage test against MinIO (skipped: no MinIO)", ignore: true, fn() {} });
}
