// tierd beside the real Iggy 0.8.0 and 0.9.0-edge.5 servers, once
// with the fs store and once with MinIO: messages sent over the server's HTTP API are copied
// byte-identical, evicted through DeleteSegments while the server keeps writing, read back
// through tierd equal to what was sent and to the server's own answers, and the server restarts
// with the evicted prefix while tierd logs in again and goes on evicting. Without the servers
// (`../shared/iggy`, or `TIERD_IGGY_DIR`) or `libhwloc15` the suite says why in one line and is
// ignored; under `CI=true` that is a failure.
import assert from "node:assert/strict";
import { minioAvailable, startMinioReady } from "../fixtures/_agent.ts";
import {
  findIggyFor,
  IGGY_ROOT,
  IGGY_VERSIONS,
  type IggyServer,
  type IggyVersion,
  startIggy,
} from "../fixtures/iggy.ts";
import type { MinioServer } from "../fixtures/minio.ts";
import { tempDir } from "../_util.ts";
import {
  checkEveryOffset,
  checkMixedRead,
  checkObjects,
  checkServerStats,
  expectLoggedInAgain,
  expectPolledAsSent,
  expectSamePoll,
  type PartitionFiles,
  partitionFiles,
  pollAll,
} from "./_iggy_checks.ts";
import type { PolledMessage } from "./_iggy_http.ts";
import { StepRunner, waitUntil } from "./_iggy_steps.ts";
import { type BrokerCall, type BrokerTap, startBrokerTap } from "./_iggy_tap.ts";
import { startTierd, type Tierd, type TierdPartition } from "./_iggy_tierd.ts";
import { TopicUnderTest } from "./_iggy_topic.ts";
import { ActiveSegmentWatch, logStarts, SegmentKeeper } from "./_iggy_watch.ts";
import { Workload } from "./_iggy_workload.ts";

const PARTITIONS = 2;
/** Local retention of the topic: about three of its 1 MiB segments stay local. */
const RETENTION = "3 MiB";
const RETENTION_BYTES = 3 * 1024 * 1024;
/** Segments each partition must have evicted before the writer stops. */
const MIN_REMOTE = 3;
/** Distinct active segments the watch must see per partition while the server writes. */
const MIN_ACTIVES = 3;

const availability = await findIggyFor("Iggy e2e (test/e2e/iggy_servers_test.ts)");

for (const version of IGGY_VERSIONS) {
  for (const storeKind of ["fs", "minio"] as const) {
    Deno.test({
      name: `tierd beside a real Iggy ${version} server, ${storeKind} store`,
      ignore: !availability.ok,
      fn: (t) => scenario(t, version, storeKind),
    });
  }
}

/**
 * Eviction has settled for what was written so far: every sealed local segment is verified in
 * the store, local retention holds (or only the active segment is left), and tierd's count of
 * local and remote segments matches the broker's directory.
 */
async function settled(
  tierd: Tierd,
  topic: TopicUnderTest,
  keeper: SegmentKeeper,
): Promise<TierdPartition[] | undefined> {
  await keeper.scan();
  const parts = await tierd.partitions();
  for (let p = 0; p < PARTITIONS; p++) {
    const view = parts.find((x) => x.partition === p);
    const local = await logStarts(topic.partitionDir(p));
    const evicted = [...keeper.kept(p).keys()].filter((s) => !local.includes(s)).length;
    if (
      !view || view.segments.local !== local.length || view.segments.remote !== evicted ||
      view.segments.uploaded !== local.length - 1 ||
      (Number(view.local_bytes) > RETENTION_BYTES && local.length > 1)
    ) return undefined;
  }
  return parts;
}

/** The last lines of a log, for a failure report. */
const tail = (text: string, lines = 40) => text.split("\n").slice(-lines).join("\n");

async function scenario(
  t: Deno.TestContext,
  version: IggyVersion,
  storeKind: "fs" | "minio",
): Promise<void> {
  if (!availability.ok) return;
  if (storeKind === "minio" && !(await minioAvailable(`Iggy ${version} e2e with MinIO`))) return;
  const steps = new StepRunner(t);
  const tmp = await tempDir(`tierd-iggy-e2e-${version}`);
  let minio: MinioServer | undefined;
  let server: IggyServer | undefined;
  let tap: BrokerTap | undefined;
  let tierd: Tierd | undefined;
  let keeper: SegmentKeeper | undefined;
  try {
    if (storeKind === "minio") minio = await startMinioReady();
    const broker = server = await startIggy(availability.binaries[version]);
    const topic = await TopicUnderTest.create(broker, PARTITIONS);
    const dirs = new Map(Array.from({ length: PARTITIONS }, (_, p) => [p, topic.partitionDir(p)]));
    const workload = new Workload(version === "0.8.0" ? 8 : 9);

    await steps.run("send a few thousand messages of 1 B to 60 KB and one over 1 MiB", async () => {
      await topic.sendAll(workload.batches(2400, PARTITIONS, { big: true }));
      await topic.flushed();
      for (let p = 0; p < PARTITIONS; p++) {
        for (const m of topic.sent.get(p)!.values()) {
          expectPolledAsSent(m.polled, m, `partition ${p} offset ${m.offset}`);
        }
        const segments = await logStarts(topic.partitionDir(p));
        assert.ok(segments.length >= 5, `partition ${p} has ${segments.length} segments`);
      }
    });

    const brokerTap = tap = startBrokerTap(broker.httpUrl);
    const kept = keeper = new SegmentKeeper(dirs);
    await kept.scan(); // segments sealed so far are quiet already: tierd may evict them at once
    kept.start();
    const agent = tierd = await startTierd({
      dir: tmp.path,
      dataDir: broker.dataDir,
      brokerUrl: brokerTap.url,
      store: storeKind === "fs"
        ? { kind: "fs", path: `${tmp.path}/store` }
        : { kind: "s3", minio: minio! },
      stream: topic.stream,
      topic: topic.topic,
      localRetention: RETENTION,
    });

    const callsBeforeRestart: BrokerCall[] = [];
    await steps.run("tierd evicts through DeleteSegments, never the active segment", async () => {
      const watch = new ActiveSegmentWatch(agent.store, dirs, agent.keyPrefix);
      watch.start();
      const started = Date.now();
      try {
        for (;;) {
          await topic.sendAll(workload.batches(24, PARTITIONS));
          const parts = await agent.partitions();
          const remote = Math.min(...parts.map((p) => p.segments.remote));
          const actives = Math.min(
            ...[...dirs.keys()].map((p) => watch.report.activesSeen.get(p)?.size ?? 0),
          );
          if (parts.length === PARTITIONS && remote >= MIN_REMOTE && actives >= MIN_ACTIVES) break;
          if (Date.now() - started > 120_000) {
            throw new Error(
              `after 120 s of writing: ${JSON.stringify(parts)}; active segments seen ${actives}`,
            );
          }
        }
      } finally {
        await watch.stop();
      }
      assert.deepEqual(watch.report.violations, [], "the active segment was in the store");
      assert.ok(watch.report.checks >= 10, `${watch.report.checks} checks of the active segment`);
      await topic.flushed();
      await waitUntil("eviction to settle", 60_000, () => settled(agent, topic, kept));
      callsBeforeRestart.push(...brokerTap.calls);
      assert.ok(
        brokerTap.calls.some((c) => c.method === "DELETE"),
        "tierd asked the broker to delete segments",
      );
      assert.deepEqual(
        brokerTap.calls.filter((c) => c.status !== 200 && c.status !== 204),
        [],
        "every call to the broker succeeded",
      );
    });

    await steps.run(
      "tierd logs in to the broker once and keeps its JWT",
      // Partitions that evict at the same time share one login (found by this suite: each used
      // to start its own).
      () => {
        const logins = callsBeforeRestart.filter((c) => c.path === "/users/login");
        assert.equal(logins.length, 1, JSON.stringify(callsBeforeRestart.map((c) => c.path)));
      },
    );

    const files = new Map<number, PartitionFiles>();
    await steps.run("every copied object equals the broker's bytes", async () => {
      for (let p = 0; p < PARTITIONS; p++) {
        const f = await partitionFiles(topic, kept, p);
        files.set(p, f);
        assert.equal(await checkObjects(agent, p, f), f.sealed.size, `partition ${p}: in store`);
      }
    });

    const serverNow = new Map<number, Map<bigint, PolledMessage>>();
    await steps.run(
      "the server serves the offsets it kept and its stats match its files",
      async () => {
        for (const [p, f] of files) {
          const firstLocal = f.local[0];
          assert.ok(firstLocal > 0n, `partition ${p}: a prefix was evicted`);
          const polled = await pollAll(topic, p, firstLocal);
          assert.equal(BigInt(polled.size), topic.nextOffset(p) - firstLocal);
          for (const [offset, m] of polled) {
            expectSamePoll(
              m,
              topic.sent.get(p)!.get(offset)!.polled,
              `partition ${p} at ${offset}`,
            );
          }
          serverNow.set(p, polled);
          // An evicted offset is answered from the first one the server kept, never invented.
          const fromZero = await topic.client.poll(topic.stream, topic.topic, p, 0n, 3);
          assert.deepEqual(fromZero.map((m) => m.offset), [0n, 1n, 2n].map((i) => firstLocal + i));
        }
        await checkServerStats(topic, files);
      },
    );

    await steps.run("every offset reads back through tierd, raw and JSON", async () => {
      for (const [p, f] of files) {
        const offsets = [...topic.sent.get(p)!.keys()];
        const report = await checkEveryOffset(agent, topic, p, f, offsets, serverNow.get(p)!);
        assert.equal(report.reads, offsets.length);
        assert.ok(report.sources.remote > 0 && report.sources.local > 0, JSON.stringify(report));
      }
    });

    await steps.run("a read spans the store and the broker's files", async () => {
      for (const [p, f] of files) await checkMixedRead(agent, p, f);
    });

    await steps.run(
      "the server restarts with the evicted prefix; tierd logs in again",
      async () => {
        const startsBefore = await Promise.all([...dirs.values()].map(logStarts));
        const oldToken = topic.client.token!;
        const remoteBefore = await agent.partitions();
        const callsBefore = brokerTap.calls.length;
        await broker.restart();
        assert.deepEqual(await Promise.all([...dirs.values()].map(logStarts)), startsBefore);
        const stale = await topic.client.request("GET", `/streams/${topic.stream}`, oldToken);
        await stale.body?.cancel();
        assert.equal(stale.status, 401, "the JWT from before the restart is refused");
        assert.notEqual(await topic.client.login(IGGY_ROOT.username, IGGY_ROOT.password), oldToken);
        await checkServerStats(topic, files);
        for (const [p, f] of files) {
          for (const [offset, m] of await pollAll(topic, p, f.local[0])) {
            expectSamePoll(
              m,
              topic.sent.get(p)!.get(offset)!.polled,
              `partition ${p} at ${offset}`,
            );
          }
        }

        const ends = [...dirs.keys()].map((p) => topic.nextOffset(p));
        const watch = new ActiveSegmentWatch(agent.store, dirs, agent.keyPrefix);
        watch.start();
        try {
          await topic.sendAll(workload.batches(900, PARTITIONS));
          await topic.flushed();
          await waitUntil("eviction after the restart", 60_000, async () => {
            const now = await settled(agent, topic, kept);
            return now?.every((x) =>
                x.segments.remote >
                  remoteBefore.find((y) => y.partition === x.partition)!.segments.remote
              )
              ? now
              : undefined;
          });
        } finally {
          await watch.stop();
        }
        assert.deepEqual(watch.report.violations, [], "the active segment was in the store");
        expectLoggedInAgain(callsBeforeRestart, brokerTap.calls.slice(callsBefore));

        for (let p = 0; p < PARTITIONS; p++) {
          const f = await partitionFiles(topic, kept, p);
          files.set(p, f);
          assert.equal(await checkObjects(agent, p, f), f.sealed.size, `partition ${p}: in store`);
          const fresh = await pollAll(topic, p, f.local[0]);
          const offsets = [...topic.sent.get(p)!.keys()].filter((o) => o >= ends[p]);
          await checkEveryOffset(agent, topic, p, f, offsets, fresh);
          await checkMixedRead(agent, p, f);
        }
        await checkServerStats(topic, files);
      },
    );

    await steps.run(
      "tierd's log names the object keys it copied",
      // With Iggy's default password `iggy`, tierd's own text (keys, the prefix `iggy`, paths)
      // stays readable: only foreign text is scrubbed, and only of distinctive secrets.
      () => {
        const copied = agent.agent.lines.filter((l) => l.msg === "segment copied");
        assert.ok(copied.length > 0);
        for (const l of copied) assert.match(String(l.key), /^iggy\/local\/\d+\/\d+\/\d+\//);
        assert.ok(!agent.agent.output().includes("***"), "nothing in the log was scrubbed");
      },
    );

    await steps.run("tierd stops cleanly and logged no error", async () => {
      await kept.stop();
      assert.equal(await agent.stop(), 0, tail(agent.agent.output()));
      assert.deepEqual(agent.agent.lines.filter((l) => l.level === "error"), []);
      // No consumer holds anything back here: eviction never waited (0.9 deletes a little after
      // it answers DeleteSegments, which must not read as "the broker kept them").
      assert.deepEqual(
        agent.agent.lines.filter((l) => String(l.msg).startsWith("eviction blocked")),
        [],
      );
    });
  } finally {
    if (steps.failed) {
      console.error(`tierd's log (tail):\n${tail(tierd?.agent.output() ?? "")}`);
      console.error(`Iggy ${version}'s log (tail):\n${tail(server?.log() ?? "")}`);
    }
    await keeper?.stop().catch(() => {});
    await tierd?.stop().catch(() => {});
    await tap?.close();
    await server?.cleanup();
    await minio?.stop();
    await tmp.cleanup();
  }
}
