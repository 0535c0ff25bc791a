// tierd's binary front (`[agent.iggy_tcp]`) beside the real Iggy 0.8.0 server: PollMessages
// answers recorded from the broker over TCP before eviction (offsets, timestamps, first, last,
// next, across segment boundaries, streams and topics by id and by name) are answered by the
// front after the eviction byte for byte; `next` + auto-commit resolves and stores the offset
// through the broker on the client's own session; a connection that never logged in reads
// nothing (the broker's own refusal); a broken frame closes only its own connection.
// Without the servers the suite says why and is ignored (a failure under CI=true).
import assert from "node:assert/strict";
import { selfSigned } from "../_tls.ts";
import { freePort } from "../fixtures/_agent.ts";
import { findIggyFor, IGGY_ROOT, type IggyServer, startIggy } from "../fixtures/iggy.ts";
import { tempDir } from "../_util.ts";
import {
  COMMAND,
  decodeConsumerOffset,
  encodeGetConsumerOffsetRequest,
  encodeStoreConsumerOffsetRequest,
  type Identifier,
  type PollingKind,
  type PollMessagesRequest,
} from "../../src/iggy_tcp/wire.ts";
import { decodePolled08 } from "../../src/iggy_tcp/polled_08.ts";
import { RawIggyTcp } from "./_iggy_tcp_raw.ts";
import { StepRunner, waitUntil } from "./_iggy_steps.ts";
import { startTierd, type Tierd } from "./_iggy_tierd.ts";
import { TopicUnderTest } from "./_iggy_topic.ts";
import { logStarts } from "./_iggy_watch.ts";
import { Workload } from "./_iggy_workload.ts";

const availability = await findIggyFor("Iggy TCP e2e (test/e2e/iggy_tcp_test.ts)");

Deno.test({
  name: "tierd's binary front beside a real Iggy 0.8.0 server",
  ignore: !availability.ok,
  fn: (t) => scenario08(t),
});

Deno.test({
  name: "the binary front speaks TLS to its clients and to a real Iggy 0.8.0 server with TLS",
  ignore: !availability.ok,
  fn: (t) => tlsBothSides(t),
});

const tail = (text: string, lines = 40) => text.split("\n").slice(-lines).join("\n");
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

/** One recorded poll: the request and the broker's answer frame before the eviction. */
interface Recorded {
  label: string;
  req: PollMessagesRequest;
  before: Uint8Array;
  start?: bigint;
}

function pollsToRecord(
  ids: { stream: Identifier; topic: Identifier },
  segments: bigint[],
  timestamps: bigint[],
): { label: string; req: PollMessagesRequest }[] {
  const q = (kind: PollingKind, value: bigint, count: number, consumer = 1) => ({
    label: `${kind} ${value} ×${count} (consumer ${consumer})`,
    req: {
      consumer: { kind: "consumer" as const, id: { kind: "numeric" as const, id: consumer } },
      streamId: ids.stream,
      topicId: ids.topic,
      partitionId: 0,
      strategy: { kind, value },
      count,
      autoCommit: false,
    },
  });
  const out = [
    q("offset", 0n, 10),
    q("offset", 1n, 1),
    q("offset", 5n, 100),
    q("offset", 41n, 5),
    q("offset", 46n, 5),
    q("offset", 0n, 300),
    q("first", 0n, 7),
    q("last", 0n, 5),
    q("next", 0n, 9, 4242),
  ];
  for (const s of segments.slice(1)) out.push(q("offset", s, 4), q("offset", s - 3n, 10));
  for (const ts of timestamps) out.push(q("timestamp", ts, 6), q("timestamp", ts + 1n, 3));
  return out;
}

async function scenario08(t: Deno.TestContext): Promise<void> {
  if (!availability.ok) return;
  const steps = new StepRunner(t);
  const tmp = await tempDir("tierd-iggy-tcp-0.8");
  let server: IggyServer | undefined;
  let tierd: Tierd | undefined;
  const open: RawIggyTcp[] = [];
  const connect = async (address: string, login = true) => {
    const c = await RawIggyTcp.connect(address);
    open.push(c);
    if (login) await c.login(IGGY_ROOT.username, IGGY_ROOT.password);
    return c;
  };
  try {
    const broker = server = await startIggy(availability.binaries["0.8.0"]);
    const topic = await TopicUnderTest.create(broker, 1);
    const byId = {
      stream: { kind: "numeric" as const, id: topic.stream },
      topic: { kind: "numeric" as const, id: topic.topic },
    };
    const byName = {
      stream: { kind: "name" as const, name: "tierd-e2e" },
      topic: { kind: "name" as const, name: "events" },
    };
    const recorded: Recorded[] = [];
    let segments: bigint[] = [];

    await steps.run(
      "write a dozen 1 MiB segments and record the broker's TCP answers",
      async () => {
        await topic.sendAll(new Workload(23).batches(1400, 1, { big: true }));
        await topic.flushed();
        segments = await logStarts(topic.partitionDir(0));
        assert.ok(segments.length >= 8, `${segments.length} segments`);
        const sent = topic.sent.get(0)!;
        const ts = (o: bigint) => sent.get(o)!.polled.timestamp;
        const timestamps = [0n, 37n, segments[2] - 2n, segments[3] + 1n].map(ts);
        const direct = await connect(broker.tcpAddress);
        for (const { label, req } of pollsToRecord(byId, segments, timestamps)) {
          const answer = await direct.poll(req);
          assert.equal(answer.status, 0, `${label}: status ${answer.status}`);
          const { messages } = decodePolled08(answer.payload);
          assert.ok(messages.length > 0, `${label}: the broker answered messages`);
          recorded.push({
            label,
            req,
            before: answer.bytes.slice(),
            start: messages[0].message.offset,
          });
        }
      },
    );

    const front = `127.0.0.1:${freePort()}`;
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
        extraConfig:
          `\n[agent.iggy_tcp]\nlisten = "${front}"\nbroker_address = "${broker.tcpAddress}"\n`,
      });
      await waitUntil("eviction to settle", 90_000, async () => {
        const local = await logStarts(topic.partitionDir(0));
        const view = (await agent.partitions()).find((p) => p.partition === 0);
        const [first] = await topic.client.poll(topic.stream, topic.topic, 0, 0n, 1);
        return view !== undefined && local.length <= 5 && first?.offset === local[0] &&
            view.segments.remote === segments.length - local.length
          ? local
          : undefined;
      });
      const [first] = await topic.client.poll(topic.stream, topic.topic, 0, 0n, 1);
      firstLocal = first.offset;
      assert.ok(firstLocal >= segments[3], `the broker's first offset is ${firstLocal}`);
    });

    await steps.run(
      "recorded polls through the front: byte for byte as before the eviction",
      async () => {
        const via = await connect(front);
        const counts = { tierd: 0, forwarded: 0 };
        for (const r of recorded) {
          const answer = await via.poll(r.req);
          assert.equal(answer.status, 0, `${r.label}: status ${answer.status}`);
          if (r.start! < firstLocal) counts.tierd++;
          else counts.forwarded++;
          assert.equal(hex(answer.bytes), hex(r.before), `${r.label}: the answer`);
        }
        assert.ok(counts.tierd >= 10 && counts.forwarded >= 3, JSON.stringify(counts));
      },
    );

    await steps.run("streams and topics by name: the same answers as by id", async () => {
      const via = await connect(front);
      for (const r of recorded.filter((r) => r.start! < firstLocal).slice(0, 6)) {
        const answer = await via.poll({ ...r.req, streamId: byName.stream, topicId: byName.topic });
        assert.equal(hex(answer.bytes), hex(r.before), `${r.label} by name`);
      }
      const unknown = await via.poll({
        ...recorded[0].req,
        streamId: { kind: "name", name: "no-such-stream" },
      });
      const direct = await connect(broker.tcpAddress);
      const brokers = await direct.poll({
        ...recorded[0].req,
        streamId: { kind: "name", name: "no-such-stream" },
      });
      assert.notEqual(unknown.status, 0, "an unknown name is an error");
      assert.equal(hex(unknown.bytes), hex(brokers.bytes), "the broker's own error");
    });

    await steps.run(
      "next + auto-commit: the stored offset is resolved and stored through the broker",
      async () => {
        const via = await connect(front);
        const target = {
          consumer: { kind: "consumer" as const, id: { kind: "numeric" as const, id: 77 } },
          streamId: byId.stream,
          topicId: byId.topic,
          partitionId: 0,
        };
        const stored = await via.call(
          COMMAND.STORE_CONSUMER_OFFSET,
          encodeStoreConsumerOffsetRequest("iggy-0.8", { ...target, offset: 40n }),
        );
        assert.equal(stored.status, 0);
        for (const expected of ["offset 41 ×5", "offset 46 ×5"]) {
          const answer = await via.poll({
            ...target,
            strategy: { kind: "next", value: 0n },
            count: 5,
            autoCommit: true,
          });
          const before = recorded.find((r) => r.label.startsWith(expected))!;
          assert.equal(hex(answer.bytes), hex(before.before), `next after ${expected}`);
        }
        const direct = await connect(broker.tcpAddress);
        const offset = await direct.call(
          COMMAND.GET_CONSUMER_OFFSET,
          encodeGetConsumerOffsetRequest(target),
        );
        assert.equal(
          decodeConsumerOffset(offset.payload)?.storedOffset,
          50n,
          "stored in the broker",
        );
      },
    );

    await steps.run(
      "a connection that never logged in reads nothing: the broker's refusal",
      async () => {
        const anonymous = await connect(front, false);
        const direct = await connect(broker.tcpAddress, false);
        const evicted = recorded.find((r) => r.start! < firstLocal)!;
        const via = await anonymous.poll(evicted.req);
        const own = await direct.poll(evicted.req);
        assert.notEqual(via.status, 0);
        assert.equal(via.status, own.status, "the broker's own status");
        assert.equal(via.payload.length, 0, "no messages");
      },
    );

    await steps.run(
      "a user without permission on the stream reads nothing: the broker's refusal",
      async () => {
        await topic.client.createUser("nobody", "nobody-pw");
        const via = await connect(front, false);
        const direct = await connect(broker.tcpAddress, false);
        await via.login("nobody", "nobody-pw");
        await direct.login("nobody", "nobody-pw");
        const evicted = recorded.find((r) => r.start! < firstLocal)!;
        const own = await direct.poll(evicted.req);
        const answer = await via.poll(evicted.req);
        assert.notEqual(own.status, 0, "the broker refuses the user");
        assert.equal(hex(answer.bytes), hex(own.bytes), "the broker's own refusal, no messages");
        for (const name of [byName, byId]) {
          const named = await via.poll({
            ...evicted.req,
            streamId: name.stream,
            topicId: name.topic,
          });
          assert.notEqual(named.status, 0, "by name too");
          assert.equal(named.payload.length, 0);
        }
      },
    );

    await steps.run("a broken frame closes its own connection only", async () => {
      const broken = await connect(front);
      const healthy = await connect(front);
      const bad = new Uint8Array([2, 0, 0, 0, 100, 0, 0, 0]); // length 2 < the 4 of a code
      assert.equal(await broken.sendRaw(bad, 5000), undefined, "no answer; the connection ends");
      await waitUntil(
        "the broken connection to close",
        5000,
        () => Promise.resolve(broken.closed || undefined),
      );
      const answer = await healthy.poll(recorded[0].req);
      assert.equal(hex(answer.bytes), hex(recorded[0].before), "the other connection reads on");
    });

    await steps.run("the broker going away closes its clients' connections", async () => {
      const via = await connect(front);
      await broker.stop();
      await waitUntil(
        "the front to close the client's connection",
        10_000,
        () => Promise.resolve(via.closed || undefined),
      );
      await broker.restart();
    });

    await steps.run("the front's metrics count polls answered from the bucket", async () => {
      const text = await (await fetch(`${tierd!.baseUrl}/metrics`)).text();
      const polls = /tierd_iggy_polls_total\{listener="tcp",source="tierd"\} (\d+)/.exec(text);
      assert.ok(polls && Number(polls[1]) >= 10, `polls from the bucket: ${polls?.[1]}`);
      assert.match(text, /tierd_iggy_errors_total\{listener="tcp",kind="client_frame"\} [1-9]/);
      assert.ok(
        tierd!.agent.output().includes("a client session reads evicted data"),
        "an info line for the first evicted read of a session",
      );
    });
  } finally {
    for (const c of open) c.close();
    if (steps.failed) {
      console.error(`tierd's log (tail):\n${tail(tierd?.agent.output() ?? "")}`);
      console.error(`Iggy 0.8.0's log (tail):\n${tail(server?.log() ?? "")}`);
    }
    await tierd?.stop().catch(() => {});
    await server?.cleanup();
    await tmp.cleanup();
  }
}

async function tlsBothSides(t: Deno.TestContext): Promise<void> {
  if (!availability.ok) return;
  const steps = new StepRunner(t);
  const tmp = await tempDir("tierd-iggy-tcp-tls");
  let server: IggyServer | undefined;
  let tierd: Tierd | undefined;
  const open: RawIggyTcp[] = [];
  try {
    const brokerCert = await selfSigned(tmp.path, "broker");
    const frontCert = await selfSigned(tmp.path, "front");
    await Deno.copyFile(frontCert.cert, `${tmp.path}/front-first.pem`);
    const broker = server = await startIggy(availability.binaries["0.8.0"], {
      editConfig: (text) =>
        text.replace(
          /\[tcp\.tls\]\n([^[]*?)enabled = false/,
          (_m, between) => `[tcp.tls]\n${between}enabled = true`,
        ).replace(/(\[tcp\.tls\][^[]*?)self_signed = true/, "$1self_signed = false")
          .replace(/(\[tcp\.tls\][^[]*?)cert_file = "[^"]*"/, `$1cert_file = "${brokerCert.cert}"`)
          .replace(/(\[tcp\.tls\][^[]*?)key_file = "[^"]*"/, `$1key_file = "${brokerCert.key}"`),
    });
    const topic = await TopicUnderTest.create(broker, 1);
    await topic.sendAll(new Workload(31).batches(30, 1));
    const front = `127.0.0.1:${freePort()}`;
    tierd = await startTierd({
      dir: tmp.path,
      dataDir: broker.dataDir,
      brokerUrl: broker.httpUrl,
      store: { kind: "fs", path: `${tmp.path}/store` },
      stream: topic.stream,
      topic: topic.topic,
      localRetention: "3 MiB",
      extraConfig: `\n[agent.iggy_tcp]\nlisten = "${front}"\n` +
        `broker_address = "${broker.tcpAddress}"\n` +
        `tls_cert = "${frontCert.cert}"\ntls_key = "${frontCert.key}"\n` +
        `broker_tls = true\nbroker_tls_ca = "${brokerCert.cert}"\n` +
        `broker_tls_domain = "localhost"\n`,
    });
    await steps.run(
      "a TLS client logs in and polls through the front as straight to the broker",
      async () => {
        const trust = (pem: string) => ({
          ca: Deno.readTextFileSync(pem),
          servername: "localhost",
        });
        const direct = await RawIggyTcp.connect(broker.tcpAddress, trust(brokerCert.cert));
        const via = await RawIggyTcp.connect(front, trust(frontCert.cert));
        open.push(direct, via);
        await direct.login(IGGY_ROOT.username, IGGY_ROOT.password);
        await via.login(IGGY_ROOT.username, IGGY_ROOT.password);
        const req: PollMessagesRequest = {
          consumer: { kind: "consumer", id: { kind: "numeric", id: 1 } },
          streamId: { kind: "numeric", id: topic.stream },
          topicId: { kind: "numeric", id: topic.topic },
          partitionId: 0,
          strategy: { kind: "offset", value: 0n },
          count: 30,
          autoCommit: false,
        };
        const a = await direct.poll(req);
        const b = await via.poll(req);
        assert.equal(a.status, 0);
        assert.equal(decodePolled08(a.payload).messages.length, 30);
        assert.equal(hex(b.bytes), hex(a.bytes));
      },
    );
    await steps.run("SIGHUP renews the front's certificate for new connections", async () => {
      const renewed = await selfSigned(tmp.path, "front-renewed");
      await Deno.copyFile(renewed.cert, frontCert.cert);
      await Deno.copyFile(renewed.key, frontCert.key);
      tierd!.agent.kill("SIGHUP");
      await waitUntil("tierd to say the certificate was reloaded", 20_000, () =>
        Promise.resolve(
          /tls certificate reloaded/.test(tierd!.agent.output()) || undefined,
        ));
      const trusting = (pem: string) =>
        RawIggyTcp.connect(front, { ca: pem, servername: "localhost" });
      const renewedPem = await Deno.readTextFile(renewed.cert);
      const via = await trusting(renewedPem);
      open.push(via);
      await via.login(IGGY_ROOT.username, IGGY_ROOT.password);
      const oldPem = await Deno.readTextFile(`${tmp.path}/front-first.pem`);
      await assert.rejects(trusting(oldPem), "a client trusting only the old certificate");
    });
    await steps.run("a client that will not speak TLS to the front gets no answer", async () => {
      const plain = await RawIggyTcp.connect(front);
      open.push(plain);
      const login = new Uint8Array([4, 0, 0, 0, 1, 0, 0, 0]); // a ping in the clear
      assert.equal(await plain.sendRaw(login, 3000), undefined);
    });
  } finally {
    for (const c of open) c.close();
    if (steps.failed) {
      console.error(`tierd's log (tail):\n${tail(tierd?.agent.output() ?? "")}`);
      console.error(`Iggy 0.8.0's log (tail):\n${tail(server?.log() ?? "")}`);
    }
    await tierd?.stop().catch(() => {});
    await server?.cleanup();
    await tmp.cleanup();
  }
}
