// Unmodified Iggy SDK clients over TCP (test/e2e/_iggy_clients.ts: the Rust `iggy` crate, Python
// `apache-iggy`, Java `org.apache.iggy:iggy`) read through tierd's binary front
// (`[agent.iggy_tcp]`) beside the real Iggy 0.8.0 and 0.9.0-edge.5 servers, after tierd has
// evicted most of a 2-partition topic: every message from offset 0 comes back exactly as sent
// (offset, id, timestamp, payload) in every read mode — from an offset, first, from a timestamp
// of an evicted message, next with auto-commit as a named consumer (its stored offset in the
// broker ends at the last offset) — with streams and topics by id and by name, and two members of
// a consumer group, the second joining mid-read, read every message once between them, the
// group's stored offsets ending at each partition's last offset; a member leaving mid-read leaves
// nothing skipped or read twice (0.8 hands its partition back to the other member at once; 0.9
// does not within the read, straight to the broker too). Each client reads the same over HTTP
// through the Iggy HTTP listener (no SDK joins a group over HTTP), streams and topics by name.
// tierd's own records API (read_auth = "iggy") reads for credentials the broker accepts for that
// partition and refuses the rest: none, wrong ones, and a user without permission on the stream. tierd's metrics show the evicted offsets were
// answered from the bucket. Without the servers the suite says why and is ignored (a failure
// under CI=true); a client whose toolchain is missing is skipped the same way, and one whose SDK
// cannot speak a server's protocol (Java on 0.9) is named and left out.
import assert from "node:assert/strict";
import { unavailable } from "../fixtures/_server.ts";
import {
  findIggyFor,
  IGGY_VERSIONS,
  type IggyServer,
  type IggyVersion,
  startIggy,
} from "../fixtures/iggy.ts";
import {
  CLIENT_KINDS,
  type ClientKind,
  type ClientMessage,
  type ClientRead,
  type ClientReadOptions,
  clientSupport,
  IggyClientError,
  prepareClient,
  readWithClient,
} from "./_iggy_clients.ts";
import { type SentMessage, TopicUnderTest } from "./_iggy_topic.ts";
import { Workload } from "./_iggy_workload.ts";
import { freePort } from "../fixtures/_agent.ts";
import { tempDir } from "../_util.ts";
import { waitUntil } from "./_iggy_steps.ts";
import { startTierd, type Tierd } from "./_iggy_tierd.ts";
import { logStarts } from "./_iggy_watch.ts";

const availability = await findIggyFor("Iggy TCP clients e2e (test/e2e/iggy_tcp_clients_test.ts)");

/** Messages sent (about 6 MiB per partition: several 1 MiB segments each). */
const MESSAGES = 1400;
/** Member A's pace in the group read: 10 messages a poll, a poll every 100 ms (~3 s in all). */
const GROUP_PACE = { batch: 10, pollIntervalMs: 100, idleMs: 1500 };
/** Member B joins once A has read this many. */
const JOIN_AFTER = 60;

for (const version of IGGY_VERSIONS) {
  Deno.test({
    name:
      `unmodified Iggy SDK clients read evicted data through tierd's binary front, Iggy ${version}`,
    ignore: !availability.ok,
    fn: (t) => scenario(t, version),
  });
}

async function scenario(t: Deno.TestContext, version: IggyVersion): Promise<void> {
  if (!availability.ok) return;
  const kinds: { kind: ClientKind; sdk: string }[] = [];
  for (const kind of CLIENT_KINDS) {
    const support = await clientSupport(kind, version);
    if (support.ok) kinds.push({ kind, sdk: support.sdk });
    else if (support.reason.startsWith("no ")) {
      unavailable(`the ${kind} Iggy client (test/e2e/iggy_tcp_clients_test.ts)`, support.reason);
    } else console.error(`Iggy ${version}: no ${kind} client: ${support.reason}`);
  }
  // Builds and installs run while the broker starts and fills (minutes cold, a check when warm).
  for (const { kind } of kinds) prepareClient(kind, version).catch(() => {});
  let server: IggyServer | undefined;
  let tierd: Tierd | undefined;
  let failed = false;
  const step = async (name: string, fn: () => Promise<void>) => {
    if (!await t.step(name, fn)) failed = true;
  };
  const tmp = await tempDir(`tierd-iggy-tcp-clients-${version}`);
  try {
    server = await startIggy(availability.binaries[version]);
    const topic = await TopicUnderTest.create(server, 2);
    await topic.sendAll(new Workload(version === "0.8.0" ? 31 : 32).batches(MESSAGES, 2));
    await topic.flushed();
    const sent = [0, 1].map((p) => [...topic.sent.get(p)!.values()]);
    assert.equal(sent[0].length + sent[1].length, MESSAGES);
    const digests = await payloadDigests(sent.flat());

    // Where the broker starts a timestamp poll of an evicted message, asked before the eviction
    // (0.8 lands where its index search stops, 0.9 at the first batch at or after it).
    const at = sent[0][100].polled.timestamp;
    const atRes = await fetch(
      `${server.httpUrl}/streams/${topic.stream}/topics/${topic.topic}/messages?` +
        `consumer_id=1&partition_id=0&kind=timestamp&value=${at}&count=1`,
      { headers: { authorization: `Bearer ${topic.client.token}` } },
    );
    const atStart = BigInt(
      (await atRes.text()).match(/"offset":(\d+)/)?.[1] ?? "-1",
    );
    assert.ok(atStart >= 0n && atStart <= 100n, `the broker starts timestamp ${at} at ${atStart}`);

    const front = `127.0.0.1:${freePort()}`;
    const httpFront = `127.0.0.1:${freePort()}`;
    const ops = `127.0.0.1:${freePort()}`;
    const agent = tierd = await startTierd({
      dir: tmp.path,
      dataDir: server.dataDir,
      brokerUrl: server.httpUrl,
      store: { kind: "fs", path: `${tmp.path}/store` },
      stream: topic.stream,
      topic: topic.topic,
      localRetention: "2 MiB",
      agentConfig: `read_auth = "iggy"\nops_listen = "${ops}"\n`,
      extraConfig: `\n[agent.iggy_tcp]\nlisten = "${front}"\n` +
        `broker_address = "${server.tcpAddress}"\n[agent.iggy_http]\nlisten = "${httpFront}"\n`,
    });
    const brokerFirst: bigint[] = [0n, 0n];
    let previous = "";
    await waitUntil("eviction of both partitions to settle", 120_000, async () => {
      const state: string[] = [];
      let settled = true;
      for (const p of [0, 1]) {
        const local = await logStarts(topic.partitionDir(p));
        const view = (await agent.partitions()).find((v) => v.partition === p);
        const [first] = await topic.client.poll(topic.stream, topic.topic, p, 0n, 1);
        state.push(`${local}|${view?.segments.remote}|${first?.offset}`);
        settled &&= view !== undefined && local.length <= 4 && first?.offset === local[0] &&
          view.segments.remote >= 2;
        brokerFirst[p] = first?.offset ?? 0n;
      }
      // Settled, and the same at two looks in a row: no eviction under way.
      const now = state.join(";");
      const stable = settled && now === previous;
      previous = now;
      return stable || undefined;
    });
    assert.ok(
      brokerFirst.every((f, p) => f > sent[p][100].offset),
      `the broker's first offsets are ${brokerFirst}: offset 100 and below are tierd's alone`,
    );
    /** Polls a listener answered from the bucket, by its metrics. */
    const fromBucket = async (listener: "tcp" | "http" = "tcp") => {
      const text = await (await fetch(`${agent.baseUrl}/metrics`)).text();
      const m = new RegExp(
        `tierd_iggy_polls_total\\{listener="${listener}",source="tierd"\\} (\\d+)`,
      )
        .exec(text);
      return Number(m?.[1] ?? 0);
    };
    const base = {
      broker: version,
      server: front,
      stream: topic.stream,
      topic: topic.topic,
      timeoutMs: 120_000,
    };
    const named = { ...base, stream: "tierd-e2e", topic: "events" };
    const last = (p: number) => sent[p].at(-1)!.offset;
    const check = (read: ClientRead, expected: SentMessage[], what: string) =>
      assertSame(read.messages, expected, digests, what);
    // A stored offset as the broker has it, read by the Rust client (apache-iggy has no call for
    // it). Without cargo (a skip reported above) the checks fall back to what Rust and Java read
    // back themselves, and Python's are not checked.
    const haveRust = kinds.some((k) => k.kind === "rust");
    const assertStored = async (
      who: { consumer: string } | { group: string },
      partition: number,
      reads: ClientRead[],
    ) => {
      const what = `${JSON.stringify(who)}'s stored offset in partition ${partition}`;
      if (haveRust) {
        const read = await readWithClient({
          ...base,
          server: server!.tcpAddress, // the broker's own answer
          kind: "rust",
          mode: "stored",
          partition,
          ...who,
        });
        assert.equal(read.summary.stored.get(partition), last(partition), what);
      }
      for (const read of reads.filter((r) => r.summary.client !== "python")) {
        const own = read.summary.stored;
        if (own.has(partition)) {
          assert.equal(own.get(partition), last(partition), `${what}, as read back`);
        }
      }
    };

    await step(
      "tierd's records API asks the broker who may read (read_auth = iggy); ops apart",
      async () => {
        await topic.client.createUser("no-reader", "no-reader-pw");
        const records = (auth?: string) =>
          fetch(
            `${agent.baseUrl}/v1/streams/${topic.stream}/topics/${topic.topic}/partitions/0/` +
              `records?offset=0&max_bytes=65536`,
            { headers: auth ? { authorization: auth } : {} },
          );
        const basic = (user: string, password: string) => `Basic ${btoa(`${user}:${password}`)}`;
        const none = await records();
        assert.equal(none.status, 401, "no credentials");
        assert.match(none.headers.get("www-authenticate") ?? "", /Basic/);
        await none.body?.cancel();
        for (const bad of ["Bearer not-a-token", basic("iggy", "wrong-password")]) {
          const refused = await records(bad);
          assert.equal(refused.status, 401, bad);
          await refused.body?.cancel();
        }
        const nobody = await records(basic("no-reader", "no-reader-pw"));
        assert.equal(nobody.status, 403, "a user without permission on the stream");
        assert.equal((await nobody.json()).error, "forbidden");
        // Probes and metrics alone on the ops listener; nothing of the data API there.
        const metricsText = await (await fetch(`http://${ops}/metrics`)).text();
        assert.match(metricsText, /tierd_iggy_polls_total/);
        const opsRecords = await fetch(
          `http://${ops}/v1/streams/${topic.stream}/topics/${topic.topic}/partitions/0/records?offset=0`,
          { headers: { authorization: basic("iggy", "iggy") } },
        );
        assert.equal(opsRecords.status, 404, "no records on the ops listener");
        await opsRecords.body?.cancel();
        for (const auth of [basic("iggy", "iggy"), `Bearer ${topic.client.token}`]) {
          const ok = await records(auth);
          assert.equal(ok.status, 200, `${auth.split(" ")[0]}: ${ok.status}`);
          assert.equal(ok.headers.get("x-tierd-first-offset"), "0");
          assert.ok(Number(ok.headers.get("x-tierd-records")) > 0);
          await ok.body?.cancel();
        }
      },
    );

    for (const { kind, sdk } of kinds) {
      await step(`${kind} (${sdk}): offset, first, timestamp and next`, async () => {
        const before = await fromBucket();
        const from = sent[0][37];
        // apache-iggy 0.8.0 polls as the SDK's consumer 0 whatever it is told.
        const consumer = kind === "python" && version === "0.8.0" ? "0" : `next-${kind}`;
        const [offset, first, timestamp, next] = await Promise.all([
          readWithClient({ ...named, kind, mode: "offset", offset: from.offset }),
          readWithClient({ ...base, kind, mode: "first", partition: 1, batch: 50 }),
          readWithClient({ ...base, kind, mode: "timestamp", timestamp: at }),
          readWithClient({ ...named, kind, mode: "next", consumer, end: last(0), batch: 25 }),
        ]);
        check(offset, sent[0].slice(37), "offset 37 of partition 0 by name");
        check(first, sent[1], "first of partition 1 by id");
        check(timestamp, sent[0].filter((m) => m.offset >= atStart), `timestamp ${at}`);
        check(next, sent[0], `next as consumer ${consumer}`);
        await assertStored({ consumer }, 0, [next]);
        assert.ok(
          await fromBucket() >= before + 4,
          "evicted offsets were answered from the bucket",
        );
      });

      await step(
        `${kind} (${sdk}) over HTTP through the Iggy HTTP listener: offset, first, timestamp ` +
          `and next, by name and by id`,
        async () => {
          const before = await fromBucket("http");
          const http = { transport: "http" as const, server: `http://${httpFront}` };
          // Partition 1 for `next`: apache-iggy 0.8.0's consumer 0 already read partition 0.
          const consumer = kind === "python" && version === "0.8.0" ? "0" : `next-http-${kind}`;
          const [offset, first, timestamp, next] = await Promise.all([
            readWithClient({ ...named, ...http, kind, mode: "offset", offset: 0n, batch: 50 }),
            readWithClient({ ...base, ...http, kind, mode: "first", partition: 1, batch: 50 }),
            readWithClient({ ...named, ...http, kind, mode: "timestamp", timestamp: at }),
            readWithClient({
              ...named,
              ...http,
              kind,
              mode: "next",
              consumer,
              partition: 1,
              end: last(1),
              batch: 25,
            }),
          ]);
          for (const read of [offset, first, timestamp, next]) {
            assert.equal(read.summary.transport, "http", `${read.summary.mode} ran over HTTP`);
          }
          check(offset, sent[0], "partition 0 from offset 0 over HTTP by name");
          check(first, sent[1], "first of partition 1 over HTTP by id");
          check(timestamp, sent[0].filter((m) => m.offset >= atStart), `timestamp ${at} by name`);
          check(next, sent[1], `next as consumer ${consumer} over HTTP by name`);
          await assertStored({ consumer }, 1, [next]);
          assert.ok(
            await fromBucket("http") >= before + 4,
            "evicted offsets were answered from the bucket by the HTTP listener",
          );
        },
      );

      await step(
        `${kind} (${sdk}): a consumer group of two, the second joining mid-read`,
        async () => {
          const group = `group-${kind}`;
          const member: ClientReadOptions = {
            ...base,
            kind,
            mode: "group",
            group,
            count: MESSAGES,
            ...GROUP_PACE,
          };
          let second: Promise<ClientRead> | undefined;
          let readBeforeJoin = 0;
          const first = await readWithClient({
            ...member,
            onMessage: () => {
              if (++readBeforeJoin === JOIN_AFTER) {
                second = readWithClient({ ...member, stream: "tierd-e2e", topic: "events" });
                second.catch(() => {}); // awaited below, once A is done
              }
            },
          });
          assert.ok(second, `member A read ${first.messages.length} messages, B never started`);
          const late = await second;
          assert.ok(late.messages.length > 0, "the member that joined mid-read got a partition");
          const both = [...first.messages, ...late.messages];
          const key = (m: { partition: number; offset: bigint }) => `${m.partition}/${m.offset}`;
          const seen = new Map<string, number>();
          for (const m of both) seen.set(key(m), (seen.get(key(m)) ?? 0) + 1);
          const twice = [...seen].filter(([, n]) => n > 1).map(([k]) => k);
          assert.deepEqual(twice, [], "messages read by both members (or twice)");
          const byPartition = (p: number) =>
            both.filter((m) => m.partition === p).sort((a, b) => Number(a.offset - b.offset));
          for (const p of [0, 1]) {
            assertSame(byPartition(p), sent[p], digests, `partition ${p} across both members`);
            assert.ok(byPartition(p)[0].offset < brokerFirst[p], "evicted offsets were read");
            // Not the members' own read-backs: each read them when it stopped, maybe before the
            // other member's last commit in a partition both read.
            await assertStored({ group }, p, []);
          }
        },
      );
    }

    if (kinds.some((k) => k.kind === "rust")) {
      await step(
        "rust: a group member leaving mid-read: nothing skipped or read twice",
        async () => {
          const group = "group-leaving";
          const member: ClientReadOptions = {
            ...base,
            kind: "rust",
            mode: "group",
            group,
            count: MESSAGES,
            ...GROUP_PACE,
          };
          // B takes one message a poll and leaves after 30: every message it was handed (and its
          // auto-commit stored) is one it printed, so the two members' reads must tile the topic.
          let leaver: Promise<ClientRead> | undefined;
          let seenByA = 0;
          const stayer = await readWithClient({
            ...member,
            onMessage: () => {
              if (++seenByA === JOIN_AFTER) {
                leaver = readWithClient({ ...member, count: 30, batch: 1, pollIntervalMs: 20 });
                leaver.catch(() => {});
              }
            },
          });
          assert.ok(leaver, "member B never started");
          const left = await leaver;
          assert.equal(left.messages.length, 30, "B read 30 messages, then left");
          const both = [...stayer.messages, ...left.messages];
          const key = (m: { partition: number; offset: bigint }) => `${m.partition}/${m.offset}`;
          assert.equal(new Set(both.map(key)).size, both.length, "no message read twice");
          for (const p of [0, 1]) {
            const read = both.filter((m) => m.partition === p).sort((a, b) =>
              Number(a.offset - b.offset)
            );
            if (version === "0.8.0") {
              assertSame(read, sent[p], digests, `partition ${p} across both members`);
              await assertStored({ group }, p, []);
            } else {
              // The 0.9 broker does not hand a departed member's partition back within the
              // read (the same straight to the broker): what was read is a gapless prefix.
              assertSame(read, sent[p].slice(0, read.length), digests, `partition ${p}: prefix`);
            }
          }
        },
      );

      await step("rust as a user without permission on the stream reads nothing", async () => {
        await topic.client.createUser("nobody", "nobody-pw");
        const before = await fromBucket();
        const err = await readWithClient({
          ...base,
          kind: "rust",
          mode: "offset",
          offset: 0n,
          username: "nobody",
          password: "nobody-pw",
          timeoutMs: 60_000,
        }).then(() => undefined, (e) => e);
        assert.ok(err instanceof IggyClientError, "the poll is refused");
        assert.equal(await fromBucket(), before, "nothing was answered from the bucket");
      });
    }
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    if (failed) {
      const tail = (tierd?.agent.output() ?? "").split("\n").slice(-80).join("\n");
      console.error(`tierd's log (tail):\n${tail}`);
    }
    await tierd?.stop().catch(() => {});
    await server?.cleanup();
    await tmp.cleanup();
  }
}

/** Hex SHA-256 of each sent payload, by its partition and offset. */
async function payloadDigests(sent: SentMessage[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const m of sent) {
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(m.payload)));
    const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
    out.set(`${m.partition}/${m.offset}`, hex);
  }
  return out;
}

/** The read messages are the expected ones, in order, with their ids, timestamps and payloads. */
function assertSame(
  read: ClientMessage[],
  expected: SentMessage[],
  digests: Map<string, string>,
  what: string,
): void {
  const offsets = (ms: { offset: bigint }[]) => ms.map((m) => m.offset);
  assert.deepEqual(offsets(read), offsets(expected), `${what}: offsets read`);
  read.forEach((m, i) => {
    const want = expected[i];
    const at = `${what}: partition ${want.partition} offset ${want.offset}`;
    assert.equal(m.partition, want.partition, `${at}: partition`);
    assert.equal(m.id, want.id, `${at}: id`);
    assert.equal(m.timestamp, want.polled.timestamp, `${at}: timestamp`);
    assert.equal(m.payloadLength, want.payload.length, `${at}: payload length`);
    assert.equal(
      m.payloadSha256,
      digests.get(`${want.partition}/${want.offset}`),
      `${at}: payload`,
    );
  });
}
