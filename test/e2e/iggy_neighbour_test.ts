// tierd as a good neighbour to the real Iggy 0.8.0 and 0.9.0-edge.5 servers (issue 12):
//
// - a stored consumer offset below the end of the oldest sealed segment: tierd does not hammer
//   DeleteSegments (counted through the tap), says why once at warn level, shows it in
//   `tierd_eviction_blocked` and on the status page, and evicts once the offset moves on;
// - `evict_via = "auto"` without `[agent.broker]`: nothing is unlinked while the server runs
//   (its HTTP API answers, and it holds its files open); once it is stopped the files go, and
//   it boots again with the evicted prefix.
//
// Skipped with one line when the servers cannot run here (failed under `CI=true`), like
// iggy_servers_test.ts, whose fixture and helpers it shares.
import assert from "node:assert/strict";
import { join } from "node:path";
import { FsStore } from "../../providers/fs/store.ts";
import { parseConfig } from "../../src/config/load.ts";
import { initHashes } from "../../src/hash.ts";
import { createLogger } from "../../src/log.ts";
import { BrokerPresence, scanOpenFiles } from "../../src/tier/broker_presence.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import {
  findIggyFor,
  IGGY_VERSIONS,
  type IggyServer,
  type IggyVersion,
  startIggy,
} from "../fixtures/iggy.ts";
import { parseExposition, sampleValue } from "../metrics/_exposition.ts";
import { tempDir } from "../_util.ts";
import type { LogLine } from "../_model/tier_harness.ts";
import { StepRunner, waitUntil } from "./_iggy_steps.ts";
import { type BrokerTap, startBrokerTap } from "./_iggy_tap.ts";
import { startTierd, type Tierd } from "./_iggy_tierd.ts";
import { TopicUnderTest } from "./_iggy_topic.ts";
import { logStarts } from "./_iggy_watch.ts";
import { Workload } from "./_iggy_workload.ts";

await initHashes();

/** The consumer whose offset holds segments back. */
const CONSUMER = 7;
/** How long the blocked agent is watched; "a handful a minute" scaled to it. */
const WATCH_MS = 30_000;
const MAX_DELETES_IN_WATCH = 3;

const availability = await findIggyFor("Iggy neighbour e2e (test/e2e/iggy_neighbour_test.ts)");

for (const version of IGGY_VERSIONS) {
  Deno.test({
    name: `beside a real Iggy ${version}: a blocking consumer offset is not hammered, and is shown`,
    ignore: !availability.ok,
    fn: (t) => blockedByConsumer(t, version),
  });
  Deno.test({
    name: `beside a real Iggy ${version}: evict_via = auto never unlinks while it runs`,
    ignore: !availability.ok,
    fn: (t) => autoBesideRunningBroker(t, version),
  });
}

const tail = (text: string, lines = 40) => text.split("\n").slice(-lines).join("\n");

/** A topic of one partition with at least `segments` segments on disk. */
async function filledTopic(
  broker: IggyServer,
  version: IggyVersion,
  messages: number,
  segments: number,
): Promise<TopicUnderTest> {
  const topic = await TopicUnderTest.create(broker, 1);
  await topic.sendAll(new Workload(version === "0.8.0" ? 8 : 9).batches(messages, 1));
  await topic.flushed();
  const starts = await logStarts(topic.partitionDir(0));
  assert.ok(starts.length >= segments, `${starts.length} segments`);
  return topic;
}

/** `tierd_eviction_blocked{…partition 0, reason}` from tierd's /metrics (undefined: no series). */
async function blockedGauge(agent: Tierd, topic: TopicUnderTest, reason: string) {
  const text = await (await fetch(`${agent.baseUrl}/metrics`)).text();
  return sampleValue(parseExposition(text), "tierd_eviction_blocked", {
    stream: String(topic.stream),
    topic: String(topic.topic),
    partition: "0",
    reason,
  });
}

async function blockedByConsumer(t: Deno.TestContext, version: IggyVersion): Promise<void> {
  if (!availability.ok) return;
  const steps = new StepRunner(t);
  const tmp = await tempDir(`tierd-iggy-neighbour-${version}`);
  let server: IggyServer | undefined;
  let tap: BrokerTap | undefined;
  let tierd: Tierd | undefined;
  try {
    const broker = server = await startIggy(availability.binaries[version]);
    const topic = await filledTopic(broker, version, 1200, 5);
    const dir = topic.partitionDir(0);
    const starts = await logStarts(dir);
    // Inside the oldest segment: the broker keeps every segment, the first one included.
    const held = 5n;
    assert.ok(starts[1] - 1n > held);
    await topic.client.storeOffset(topic.stream, topic.topic, 0, CONSUMER, held);

    const brokerTap = tap = startBrokerTap(broker.httpUrl);
    const agent = tierd = await startTierd({
      dir: tmp.path,
      dataDir: broker.dataDir,
      brokerUrl: brokerTap.url,
      store: { kind: "fs", path: join(tmp.path, "store") },
      stream: topic.stream,
      topic: topic.topic,
      localRetention: "1 MiB",
    });
    const warning = `eviction blocked by consumer offset ${held}: segment ${starts[0]} ends ` +
      "after it, and the broker keeps it for its consumers";

    await steps.run("tierd copies every sealed segment, then waits and says why", async () => {
      await waitUntil("the copies and the block", 60_000, async () => {
        const [p] = await agent.partitions();
        const ok = p?.segments.uploaded === starts.length - 1 &&
          await blockedGauge(agent, topic, "consumer_offset") === 1;
        return ok ? p : undefined;
      });
      const warned = agent.agent.lines.filter((l) => l.msg === warning);
      assert.equal(warned.length, 1, JSON.stringify(agent.agent.lines.slice(-10)));
      assert.equal(warned[0].level, "warn");
      assert.equal(warned[0].consumer_offset, String(held));
      const page = await (await fetch(`${agent.baseUrl}/`)).text();
      assert.ok(page.includes(`eviction blocked by consumer offset ${held}`), page);
    });

    await steps.run(
      `no more than ${MAX_DELETES_IN_WATCH} DeleteSegments calls in ${WATCH_MS / 1000} s`,
      async () => {
        const from = brokerTap.calls.length;
        const started = Date.now();
        while (Date.now() - started < WATCH_MS) {
          // The broker keeps working meanwhile (its log, state and metadata change).
          await topic.sendAll(new Workload(version === "0.8.0" ? 8 : 9).batches(2, 1));
          await new Promise((r) => setTimeout(r, 1_000));
        }
        const deletes = brokerTap.calls.slice(from).filter((c) => c.method === "DELETE");
        assert.ok(
          deletes.length <= MAX_DELETES_IN_WATCH,
          `${deletes.length} DeleteSegments calls: ${JSON.stringify(deletes)}`,
        );
        assert.deepEqual((await logStarts(dir)).slice(0, starts.length - 1), starts.slice(0, -1));
        assert.equal(agent.agent.lines.filter((l) => l.msg === warning).length, 1, "said once");
      },
    );

    await steps.run(
      "the consumer moves on: eviction finishes and the block is lifted",
      async () => {
        await topic.flushed();
        const end = topic.nextOffset(0) - 1n;
        await topic.client.storeOffset(topic.stream, topic.topic, 0, CONSUMER, end);
        await waitUntil("eviction down to the local retention", 60_000, async () => {
          const [p] = await agent.partitions();
          return p && p.segments.remote > 0 && Number(p.local_bytes) <= 2 * 1024 * 1024 &&
              await blockedGauge(agent, topic, "consumer_offset") === undefined
            ? p
            : undefined;
        });
        const deletes = brokerTap.calls.filter((c) => c.method === "DELETE");
        assert.ok(deletes.length > 0 && deletes.every((c) => c.status === 204));
        assert.ok((await logStarts(dir))[0] > starts[0], "the oldest segments left the broker");
        assert.equal(
          agent.agent.lines.filter((l) => l.msg === "eviction no longer blocked").length,
          1,
        );
      },
    );

    await steps.run("tierd stops cleanly and logged no error", async () => {
      assert.equal(await agent.stop(), 0, tail(agent.agent.output()));
      assert.deepEqual(agent.agent.lines.filter((l) => l.level === "error"), []);
    });
  } finally {
    if (steps.failed) {
      console.error(`tierd's log (tail):\n${tail(tierd?.agent.output() ?? "")}`);
      console.error(`Iggy ${version}'s log (tail):\n${tail(server?.log() ?? "")}`);
    }
    await tierd?.stop().catch(() => {});
    await tap?.close();
    await server?.cleanup();
    await tmp.cleanup();
  }
}

/** The config of an in-process tierd with `evict_via = "auto"` and no `[agent.broker]`. */
function autoConfigText(root: string, dataDir: string, topic: TopicUnderTest): string {
  return `
[agent]
data_dir = "${dataDir}"
state_dir = "${root}/state"
seal_quiescence = "1 s"
evict_via = "auto"

[tiered_storage]
enabled = true
backend = "fs"
upload_loop_backoff_max = "500 ms"

[tiered_storage.fs]
path = "${root}/store"

[tiered_storage.cache]
path = "${root}/cache"

[[topic]]
stream = ${topic.stream}
topic = ${topic.topic}
local_retention_size = "1 B"
`;
}

async function autoBesideRunningBroker(t: Deno.TestContext, version: IggyVersion): Promise<void> {
  if (!availability.ok) return;
  const steps = new StepRunner(t);
  const tmp = await tempDir(`tierd-iggy-auto-${version}`);
  let server: IggyServer | undefined;
  let worker: TierWorker | undefined;
  const lines: LogLine[] = [];
  try {
    const broker = server = await startIggy(availability.binaries[version]);
    const topic = await filledTopic(broker, version, 600, 3);
    const dir = topic.partitionDir(0);
    const starts = await logStarts(dir);
    const config = parseConfig(
      autoConfigText(tmp.path, broker.dataDir, topic),
      join(tmp.path, "tierd.toml"),
      {},
    );
    const store = new FsStore({ root: config.tiered_storage.fs.path });
    // The real detection, with answers kept only briefly so the test need not wait 5 s.
    const presence = new BrokerPresence({ dataDir: broker.dataDir, runningTtlMs: 200 });
    const agent = worker = new TierWorker({
      config,
      store,
      prefix: "iggy",
      logger: createLogger({ level: "debug", write: (l) => void lines.push(JSON.parse(l)) }),
      brokerWatch: presence,
    });

    await steps.run(
      "the running server is seen both ways: its HTTP API and its open files",
      async () => {
        const seen = await presence.check();
        assert.deepEqual(seen, {
          running: true,
          evidence: `its HTTP API answers at ${broker.httpUrl}`,
        });
        const scan = await scanOpenFiles(broker.dataDir);
        assert.match(scan.holder ?? "", /^process \d+ \(iggy-server/, JSON.stringify(scan));
      },
    );

    await steps.run("tierd copies, but unlinks nothing while the server runs", async () => {
      await new Promise((r) => setTimeout(r, 1_200)); // the sealed segments are quiet
      for (let i = 0; i < 3; i++) {
        const report = await agent.pass();
        assert.deepEqual(report.problems, []);
        assert.equal(report.evicted, 0);
        assert.equal(report.partitions[0].evictionBlocked?.reason, "broker_running");
      }
      const [p] = agent.partitions;
      assert.equal(p.evictionBlock?.evidence, `its HTTP API answers at ${broker.httpUrl}`);
      assert.deepEqual(await logStarts(dir), starts, "every segment is still the broker's");
      const warned = lines.filter((l) => l.msg === p.evictionBlock!.text);
      assert.equal(warned.length, 1);
      assert.equal(warned[0].level, "warn");
      const start = lines.filter((l) =>
        l.msg.startsWith("evict_via = auto without [agent.broker]")
      );
      assert.equal(start.length, 1);
      assert.equal(start[0].level, "info");
      assert.equal(start[0].checks, `${broker.httpUrl}/ping and files held open for writing`);
    });

    await steps.run(
      "once the server is stopped the files go; it boots with the evicted prefix",
      async () => {
        await broker.stop();
        await new Promise((r) => setTimeout(r, 300)); // past the kept "running" answer
        const report = await agent.pass();
        assert.deepEqual(report.problems, []);
        assert.equal(report.evicted, starts.length - 1);
        assert.equal(report.partitions[0].evictionBlocked, undefined);
        assert.deepEqual(await logStarts(dir), [starts.at(-1)]);
        assert.equal(lines.filter((l) => l.msg === "eviction no longer blocked").length, 1);
        await agent.close();
        worker = undefined;
        await store.close?.();
        await broker.restart();
        await topic.client.login("iggy", "iggy");
        const first = await topic.client.poll(topic.stream, topic.topic, 0, 0n, 1);
        assert.equal(first[0]?.offset, starts.at(-1), "served from the first offset it kept");
      },
    );
  } finally {
    if (steps.failed) {
      console.error(
        `tierd's log (tail):\n${lines.slice(-20).map((l) => JSON.stringify(l)).join("\n")}`,
      );
      console.error(`Iggy ${version}'s log (tail):\n${tail(server?.log() ?? "")}`);
    }
    await worker?.close().catch(() => {});
    await server?.cleanup();
    await tmp.cleanup();
  }
}
