// tierd's Iggy-compatible listener (`[agent.iggy_http]`) beside the real Iggy 0.8.0 and
// 0.9.0-edge.5 servers: polls recorded from the broker before eviction (offsets, timestamps,
// counts, first/next/last, across segment boundaries) are answered by tierd's listener after the
// eviction JSON-equal (apart from `current_offset`); polls of offsets the broker still has are
// forwarded byte-identical; an unmodified Iggy SDK client (the Rust `iggy` crate over HTTP) reads
// the partition from offset 0 with a consumer group and auto-commit, and its stored offset is
// right in the broker; a wrong token reads nothing. Without the servers the suite says why and is
// ignored (a failure under CI=true).
import assert from "node:assert/strict";
import { freePort } from "../fixtures/_agent.ts";
import {
  findIggyFor,
  IGGY_ROOT,
  IGGY_VERSIONS,
  type IggyServer,
  type IggyVersion,
  startIggy,
} from "../fixtures/iggy.ts";
import { tempDir } from "../_util.ts";
import { IggyHttp, parseJsonExact } from "./_iggy_http.ts";
import { fnv1a64, sdkClient, sdkPollWithToken, sdkReadWithGroup } from "./_iggy_sdk.ts";
import { StepRunner, waitUntil } from "./_iggy_steps.ts";
import { startTierd, type Tierd } from "./_iggy_tierd.ts";
import { TopicUnderTest } from "./_iggy_topic.ts";
import { logStarts } from "./_iggy_watch.ts";
import { Workload } from "./_iggy_workload.ts";

const availability = await findIggyFor("Iggy HTTP e2e (test/e2e/iggy_http_test.ts)");

for (const version of IGGY_VERSIONS) {
  Deno.test({
    name: `tierd's Iggy HTTP listener beside a real Iggy ${version} server`,
    ignore: !availability.ok,
    fn: (t) => scenario(t, version),
  });
}

/** One recorded poll: its query and the broker's answer before the eviction. */
interface Recorded {
  query: string;
  before: string;
  /** Offset of the first message the broker answered. */
  start?: bigint;
  last?: bigint;
}

const tail = (text: string, lines = 40) => text.split("\n").slice(-lines).join("\n");

async function get(
  url: string,
  token?: string,
): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** A poll answer without `current_offset` (the broker's own), exact numbers kept. */
function withoutCurrent(text: string): unknown {
  const json = parseJsonExact(text) as Record<string, unknown>;
  delete json.current_offset;
  return json;
}

function offsetsOf(text: string): bigint[] {
  const json = parseJsonExact(text) as { messages: { header: { offset: number | bigint } }[] };
  return json.messages.map((m) => BigInt(m.header.offset));
}

/** The polls to record: across every segment boundary, by every kind. */
function pollQueries(segments: bigint[], timestamps: bigint[]): string[] {
  const q = (kind: string, value: bigint | number, count: number, extra = "") =>
    `consumer_id=1&partition_id=0&kind=${kind}&value=${value}&count=${count}&auto_commit=false${extra}`;
  const out = [
    q("offset", 0, 10),
    q("offset", 1, 1),
    q("offset", 5, 100),
    q("offset", 41, 5),
    q("offset", 46, 5),
    q("offset", 0, 300),
    q("first", 0, 7),
    q("last", 0, 5),
    q("next", 0, 9).replace("consumer_id=1", "consumer_id=4242"),
    "kind=offset&value=3", // every other parameter left to its default
  ];
  for (const s of segments.slice(1)) {
    out.push(q("offset", s, 4), q("offset", s - 1n, 1));
    if (s >= 3n) out.push(q("offset", s - 3n, 10));
  }
  for (const ts of timestamps) out.push(q("timestamp", ts, 6), q("timestamp", ts + 1n, 3));
  return out;
}

async function scenario(t: Deno.TestContext, version: IggyVersion): Promise<void> {
  if (!availability.ok) return;
  const steps = new StepRunner(t);
  const tmp = await tempDir(`tierd-iggy-http-${version}`);
  let server: IggyServer | undefined;
  let tierd: Tierd | undefined;
  try {
    const broker = server = await startIggy(availability.binaries[version]);
    const topic = await TopicUnderTest.create(broker, 1);
    const workload = new Workload(version === "0.8.0" ? 18 : 19);
    const messagesUrl = `${broker.httpUrl}/streams/${topic.stream}/topics/${topic.topic}/messages`;
    const recorded: Recorded[] = [];
    let segments: bigint[] = [];

    await steps.run("write a dozen 1 MiB segments and record the broker's answers", async () => {
      // The SDK client's build runs meanwhile (minutes when cold, a hash check when cached).
      sdkClient().catch(() => {});
      await topic.sendAll(workload.batches(1400, 1, { big: true }));
      await topic.flushed();
      segments = await logStarts(topic.partitionDir(0));
      assert.ok(segments.length >= 8, `${segments.length} segments`);
      const sent = topic.sent.get(0)!;
      const ts = (o: bigint) => sent.get(o)!.polled.timestamp;
      const timestamps = [0n, 37n, segments[2] - 2n, segments[3] + 1n, segments[4] + 7n].map(ts);
      for (const query of pollQueries(segments, timestamps)) {
        const res = await get(`${messagesUrl}?${query}`, topic.client.token);
        assert.equal(res.status, 200, `${query}: ${res.text.slice(0, 300)}`);
        const offsets = offsetsOf(res.text);
        recorded.push({ query, before: res.text, start: offsets[0], last: offsets.at(-1) });
      }
      assert.ok(recorded.every((r) => r.start !== undefined), "every recorded poll has messages");
    });

    const iggyPort = freePort();
    const iggyUrl = `http://127.0.0.1:${iggyPort}`;
    const iggyMessages = `${iggyUrl}/streams/${topic.stream}/topics/${topic.topic}/messages`;
    let firstLocal = 0n;
    await steps.run("tierd evicts all but the last few segments", async () => {
      const agent = tierd = await startTierd({
        dir: tmp.path,
        dataDir: broker.dataDir,
        brokerUrl: broker.httpUrl,
        store: { kind: "fs", path: `${tmp.path}/store` },
        stream: topic.stream,
        topic: topic.topic,
        localRetention: "3 MiB",
        extraConfig: `\n[agent.iggy_http]\nlisten = "127.0.0.1:${iggyPort}"\n`,
      });
      let previous = "";
      await waitUntil("eviction to settle", 90_000, async () => {
        const local = await logStarts(topic.partitionDir(0));
        const view = (await agent.partitions()).find((p) => p.partition === 0);
        const [first] = await topic.client.poll(topic.stream, topic.topic, 0, 0n, 1);
        const now = JSON.stringify({
          local: local.map(String),
          view: view?.segments,
          first: String(first?.offset),
        });
        const settled = view !== undefined && local.length <= 5 && first?.offset === local[0] &&
          view.segments.remote === segments.length - local.length && now === previous;
        previous = now;
        return settled ? local : undefined;
      });
      const [first] = await topic.client.poll(topic.stream, topic.topic, 0, 0n, 1);
      firstLocal = first.offset;
      assert.ok(firstLocal >= segments[3], `the broker's first offset is ${firstLocal}`);
    });

    await steps.run(
      "recorded polls: JSON-equal from tierd below the broker's first offset, byte-identical above",
      async () => {
        const counts = { tierd: 0, spanning: 0, forwarded: 0 };
        for (const r of recorded) {
          const via = await get(`${iggyMessages}?${r.query}`, topic.client.token);
          assert.equal(via.status, 200, `${r.query} through tierd: ${via.text.slice(0, 300)}`);
          if (r.start! < firstLocal) {
            counts.tierd++;
            if (r.last! >= firstLocal) counts.spanning++;
            assert.deepEqual(
              withoutCurrent(via.text),
              withoutCurrent(r.before),
              `${r.query}: tierd's answer`,
            );
            const json = parseJsonExact(via.text) as { current_offset: number | bigint };
            assert.equal(
              BigInt(json.current_offset),
              topic.nextOffset(0) - 1n,
              `${r.query}: current_offset`,
            );
          } else {
            counts.forwarded++;
            const direct = await get(`${messagesUrl}?${r.query}`, topic.client.token);
            assert.equal(via.text, direct.text, `${r.query}: forwarded byte for byte`);
            assert.deepEqual(
              withoutCurrent(via.text),
              withoutCurrent(r.before),
              `${r.query}: as before`,
            );
          }
        }
        assert.ok(
          counts.tierd >= 10 && counts.spanning >= 1 && counts.forwarded >= 5,
          JSON.stringify(counts),
        );
      },
    );

    await steps.run(
      "next resolves the stored offset and auto_commit stores it, through the broker",
      async () => {
        const offsets = `${iggyUrl}/streams/${topic.stream}/topics/${topic.topic}/consumer-offsets`;
        const put = await fetch(offsets, {
          method: "PUT",
          headers: {
            authorization: `Bearer ${topic.client.token}`,
            "content-type": "application/json",
          },
          body: JSON.stringify({ consumer_id: "77", partition_id: 0, offset: 40 }),
        });
        await put.body?.cancel();
        assert.ok(put.ok, `PUT consumer-offsets through tierd: ${put.status}`);
        const q = "consumer_id=77&partition_id=0&kind=next&value=0&count=5&auto_commit=true";
        for (const expected of ["value=41&count=5", "value=46&count=5"]) {
          const via = await get(`${iggyMessages}?${q}`, topic.client.token);
          const before = recorded.find((r) => r.query.includes(`kind=offset&${expected}`))!;
          assert.deepEqual(
            withoutCurrent(via.text),
            withoutCurrent(before.before),
            `next after ${expected}`,
          );
        }
        const stored = await get(
          `${offsets}?consumer_id=77&partition_id=0`.replace(iggyUrl, broker.httpUrl),
          topic.client.token,
        );
        assert.equal(
          BigInt((parseJsonExact(stored.text) as { stored_offset: number }).stored_offset),
          50n,
        );
      },
    );

    await steps.run(
      "a wrong or missing token reads nothing, answered as the broker answers it",
      async () => {
        const q = "consumer_id=1&partition_id=0&kind=offset&value=0&count=10";
        for (const token of ["not-a-jwt", `${topic.client.token}x`, undefined]) {
          const via = await get(`${iggyMessages}?${q}`, token);
          const direct = await get(`${messagesUrl}?${q}`, token);
          assert.equal(via.status, 401, `token ${token?.slice(0, 8)}: ${via.status}`);
          assert.equal(via.status, direct.status);
          assert.equal(via.text, direct.text, "the broker's own refusal");
          assert.ok(!via.text.includes('"messages"'));
        }
        assert.match(
          await sdkPollWithToken({
            url: iggyUrl,
            token: "not-a-jwt",
            stream: topic.stream,
            topic: topic.topic,
            partition: 0,
          }),
          /^error /,
        );
      },
    );

    await steps.run(
      "an unmodified Iggy SDK client reads the partition from 0 with a consumer group",
      async () => {
        const read = await sdkReadWithGroup({
          url: iggyUrl,
          username: IGGY_ROOT.username,
          password: IGGY_ROOT.password,
          stream: topic.stream,
          topic: topic.topic,
          partition: 0,
          group: "tierd-e2e-readers",
          count: 50,
        });
        const sent = topic.sent.get(0)!;
        assert.deepEqual(
          read.messages.map((m) => m.offset),
          [...sent.keys()],
          "every offset, in order",
        );
        for (const m of read.messages) {
          const s = sent.get(m.offset)!;
          const where = `SDK message ${m.offset}`;
          assert.equal(m.id, s.id, `${where}: id`);
          assert.equal(m.payloadLength, s.payload.length, `${where}: payload length`);
          assert.equal(m.payloadHash, fnv1a64(s.payload), `${where}: payload`);
          assert.equal(m.checksum, s.polled.checksum, `${where}: checksum`);
          assert.equal(m.timestamp, s.polled.timestamp, `${where}: timestamp`);
          assert.equal(m.originTimestamp, s.polled.originTimestamp, `${where}: origin_timestamp`);
          assert.equal(m.headers, s.headers.length, `${where}: headers`);
        }
        const last = topic.nextOffset(0) - 1n;
        assert.equal(read.stored, last, "the stored offset the SDK reads back");
        const direct = await get(
          `${broker.httpUrl}/streams/${topic.stream}/topics/${topic.topic}/consumer-offsets?consumer_id=${read.group}&partition_id=0`,
          topic.client.token,
        );
        assert.equal(direct.status, 200, direct.text);
        assert.equal(
          BigInt((parseJsonExact(direct.text) as { stored_offset: number }).stored_offset),
          last,
          "in the broker",
        );
      },
    );

    await steps.run("everything else is the broker's: login, topic details, produce", async () => {
      const client = new IggyHttp(iggyUrl);
      const token = await client.login(IGGY_ROOT.username, IGGY_ROOT.password);
      const details = `/streams/${topic.stream}/topics/${topic.topic}`;
      const direct = await get(broker.httpUrl + details, token);
      const via = await get(iggyUrl + details, token);
      assert.equal(via.status, 200);
      assert.equal(via.text, direct.text, "topic details forwarded");
      const before = topic.nextOffset(0);
      await client.send(topic.stream, topic.topic, 0, workload.batches(3, 1)[0].messages);
      await waitUntil("the produced messages", 10_000, async () => {
        const polled = await topic.client.poll(topic.stream, topic.topic, 0, before, 10);
        return polled.length === 3 ? polled : undefined;
      });
    });

    await steps.run("tierd stops cleanly and logged no error", async () => {
      assert.equal(await tierd!.stop(), 0, tail(tierd!.agent.output()));
      assert.deepEqual(tierd!.agent.lines.filter((l) => l.level === "error"), []);
    });
  } finally {
    if (steps.failed) {
      console.error(`tierd's log (tail):\n${tail(tierd?.agent.output() ?? "")}`);
      console.error(`Iggy ${version}'s log (tail):\n${tail(server?.log() ?? "")}`);
    }
    await tierd?.stop().catch(() => {});
    await server?.cleanup();
    await tmp.cleanup();
  }
}
