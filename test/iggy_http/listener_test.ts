// The Iggy-compatible listener over a scenario partition (a prefix evicted to a SimStore) with a
// stand-in broker that answers polls of the offsets it still has in the broker's JSON: polls below
// its first offset come from tierd and continue with the broker's own poll; a refused token reads
// nothing from the store; auto-commit stores the offset with the client's token; a store outage
// answers 503 + Retry-After; everything else passes through byte for byte, bodies streamed. A
// partition whose state is not known yet (the agent opens or rebuilds it, or its directory no
// longer fits its journal) answers 503 in the broker's shape, and its polls never reach the broker.
import assert from "node:assert/strict";
import { copyFile, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { codecFor } from "../../src/format/codecs.ts";
import type { Message } from "../../src/format/types.ts";
import { createIggyHttp, type IggyHttp } from "../../src/iggy_http/app.ts";
import { serve } from "../../src/http/serve.ts";
import { ReadBudget } from "../../src/read/read_budget.ts";
import type { PolledMessage } from "../../src/iggy_front/remote_read.ts";
import { messageJson, polledJson } from "../../src/iggy_http/polled_json.ts";
import { generatePartition, partitionDir } from "../../src/format/generate.ts";
import type { ReadContextOptions } from "../../src/read/context.ts";
import { JournalStateReader } from "../../src/read/state_source.ts";
import { buildScenario, type Scenario } from "../read/_scenario.ts";

const GOOD = "Bearer good-token";

/** Every message of the scenario, with its stored checksum (first 8 bytes of its header). */
function allMessages(s: Scenario, format: "iggy-0.8" | "iggy-0.9"): PolledMessage[] {
  const codec = codecFor(format);
  const out: PolledMessage[] = [];
  for (const r of s.records) {
    const info = [...codec.walk(r.bytes, {
      file: "x",
      startOffset: r.firstOffset,
      expectedOffset: r.firstOffset,
      verify: false,
    })][0];
    for (const m of codec.messages(r.bytes, info, "x")) {
      const header = format === "iggy-0.8" ? 64 : 48;
      const checksum = new DataView(r.bytes.buffer).getBigUint64(
        m.payload.byteOffset - header,
        true,
      );
      out.push({ message: m as Message, checksum });
    }
  }
  return out;
}

interface Broker {
  url: string;
  calls: { method: string; path: string; auth: string | null; body: string }[];
  close(): Promise<void>;
}

/** A broker that has the offsets from `first` on. */
function fakeBroker(messages: PolledMessage[], first: bigint): Broker {
  const calls: Broker["calls"] = [];
  const current = messages.at(-1)!.message.offset;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const auth = req.headers.get("authorization");
    const body = req.body ? await req.text() : "";
    calls.push({ method: req.method, path: url.pathname + url.search, auth, body });
    if (auth !== GOOD) return new Response(null, { status: 401 });
    if (req.method === "POST") {
      return new Response(`got ${body.length}`, { status: 201, headers: { "x-broker": "yes" } });
    }
    if (req.method === "PUT") return new Response(null, { status: 204 });
    if (url.pathname.endsWith("/consumer-offsets")) {
      return Response.json({
        id: 404,
        code: "not_found",
        reason: "Resource not found",
        field: null,
      }, { status: 404 });
    }
    if (url.pathname.endsWith("/messages")) {
      if (!/^\/streams\/(0|orders)\/topics\/(0|events)\//.test(url.pathname)) {
        return Response.json({ id: 404, code: "not_found", reason: "x", field: null }, {
          status: 404,
        });
      }
      const p = url.searchParams;
      const count = Number(p.get("count") ?? 10);
      const from = p.get("kind") === "first" ? first : BigInt(p.get("value") ?? 0);
      const start = from < first ? first : from;
      const picked = messages.filter((m) => m.message.offset >= start).slice(0, count);
      const text = polledJson(Number(p.get("partition_id") ?? 0), current, picked.map(messageJson));
      return new Response(text, { headers: { "content-type": "application/json" } });
    }
    const named = /^\/streams\/([^/]+)(?:\/topics\/([^/]+))?$/.exec(url.pathname);
    if (named) {
      // Stream "orders" (id 0) holds topic "events" (id 0); nothing else is known.
      const known = named[2] === undefined ? ["0", "orders"] : ["0", "events"];
      const name = named[2] ?? named[1];
      if (!known.includes(name)) {
        return Response.json({ id: 404, code: "not_found", reason: "x", field: null }, {
          status: 404,
        });
      }
      return Response.json({ id: 0, name: known[1], size: 1 });
    }
    return new Response(new Uint8Array([0, 1, 2, 255]), { headers: { "x-other": "1" } });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    calls,
    close: () => server.shutdown(),
  };
}

async function withListener(
  fn: (
    o: { s: Scenario; iggy: IggyHttp; broker: Broker; messages: PolledMessage[]; first: bigint },
  ) => Promise<void>,
  context: (s: Scenario) => Partial<ReadContextOptions> = () => ({}),
) {
  const s = await buildScenario({
    format: "iggy-0.9",
    before: 60,
    after: 30,
    segmentSize: 1500,
    payloadSize: 40,
    messagesPerBatch: 3,
    evict: 2,
  });
  const messages = allMessages(s, "iggy-0.9");
  const first = s.records.find((r) => !r.evicted)!.firstOffset;
  const broker = fakeBroker(messages, first);
  const iggy = createIggyHttp({
    read: s.context(context(s)),
    brokerUrl: broker.url,
    authCacheTtlMs: 0,
  });
  try {
    await fn({ s, iggy, broker, messages, first });
  } finally {
    iggy.close();
    await broker.close();
    await s.cleanup();
  }
}

const poll = (query: string, auth: string | null = GOOD) =>
  new Request(`http://tierd/streams/0/topics/0/messages?${query}`, {
    headers: auth ? { authorization: auth } : {},
  });

Deno.test("a poll below the broker's first offset is tierd's, continued with the broker's poll", async () => {
  await withListener(async ({ iggy, broker, messages, first }) => {
    assert.ok(first > 10n, `the broker starts at ${first}`);
    const count = messages.length - 1; // to the end: through the broker's local segments
    const res = await iggy.fetch(poll(`partition_id=0&kind=offset&value=1&count=${count}`));
    assert.equal(res.status, 200);
    const want = polledJson(
      0,
      messages.at(-1)!.message.offset,
      messages.slice(1, 1 + count).map(messageJson),
    );
    assert.equal(await res.text(), want);
    // tierd answers its copies (the broker's first local segment too, which may be going) and
    // the broker the rest, from an offset it still has.
    const continued = broker.calls.map((c) => /kind=offset&value=(\d+)&/.exec(c.path)?.[1])
      .filter((v) => v !== undefined).map(BigInt);
    assert.ok(continued.some((v) => v >= first), "the rest came from the broker's own poll");
    assert.ok(broker.calls.every((c) => c.auth === GOOD), "always with the client's token");

    const firstKind = await iggy.fetch(poll("kind=first&count=3"));
    assert.equal(
      await firstKind.text(),
      polledJson(0, messages.at(-1)!.message.offset, messages.slice(0, 3).map(messageJson)),
    );
    const next = await iggy.fetch(poll("kind=next&count=2&consumer_id=9"));
    assert.equal(
      await next.text(),
      polledJson(0, messages.at(-1)!.message.offset, messages.slice(0, 2).map(messageJson)),
    );
  });
});

Deno.test("a poll of every message holds its records and a piece of its answer, never the whole JSON", async () => {
  const budget = new ReadBudget(64 * 1024 * 1024);
  await withListener(async ({ iggy, broker, messages }) => {
    const everything = "partition_id=0&kind=offset&value=0&count=4294967295";
    const res = await iggy.fetch(poll(everything));
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-length"), null, "streamed as it is made");
    // Held while the answer is being sent: the reads' reservations and one piece of the answer.
    const held = budget.bytes - budget.free;
    assert.ok(held > 2 * 1024 * 1024, `${held} bytes held: the records and a piece`);
    const want = polledJson(
      0,
      messages.at(-1)!.message.offset,
      messages.map(messageJson),
    );
    assert.equal(await res.text(), want, "the whole answer, as the broker writes it");
    assert.equal(budget.free, budget.bytes, "all given back once sent");
    // The broker's part was asked for no more messages than the poll's bytes hold.
    const counts = broker.calls.map((c) => /[?&]count=(\d+)/.exec(c.path)?.[1]).filter((v) =>
      v !== undefined
    ).map(Number);
    // (32 MiB at the ~100 bytes of each message tierd read: a few hundred thousand at most.)
    assert.ok(counts.length > 0 && counts.every((n) => n <= 1_000_000), `counts ${counts}`);
  }, () => ({ budget }));
});

Deno.test("a refused token reads nothing from the store and gets the broker's answer", async () => {
  await withListener(async ({ s, iggy }) => {
    const gets = s.store.requestCount("get");
    for (const auth of ["Bearer wrong", null]) {
      const res = await iggy.fetch(poll("kind=offset&value=0&count=10", auth));
      assert.equal(res.status, 401);
      assert.equal(await res.text(), "");
    }
    assert.equal(s.store.requestCount("get"), gets, "no store request for a refused client");
  });
});

Deno.test("auto_commit stores the last answered offset through the broker, with the client's token", async () => {
  await withListener(async ({ iggy, broker }) => {
    const res = await iggy.fetch(
      poll("consumer_id=5&partition_id=0&kind=offset&value=2&count=4&auto_commit=true"),
    );
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const put = broker.calls.find((c) => c.method === "PUT");
    assert.ok(put);
    assert.equal(put.auth, GOOD);
    assert.deepEqual(JSON.parse(put.body), { consumer_id: "5", partition_id: 0, offset: 5 });
    assert.ok(!broker.calls.some((c) => c.path.includes("auto_commit=true")), "no double commit");
  });
});

Deno.test("a store outage answers 503 with Retry-After in the broker's error shape", async () => {
  await withListener(async ({ s, iggy }) => {
    s.store.setFaults({ unavailable: true });
    const res = await iggy.fetch(poll("kind=offset&value=0&count=10"));
    assert.equal(res.status, 503);
    assert.ok(Number(res.headers.get("retry-after")) >= 1);
    const body = await res.json();
    assert.deepEqual(Object.keys(body), ["id", "code", "reason", "field"]);
    assert.equal(body.id, 503);
  });
});

Deno.test("everything else passes through byte for byte, request bodies streamed", async () => {
  await withListener(async ({ iggy, broker, first }) => {
    const local = await iggy.fetch(poll(`kind=offset&value=${first + 2n}&count=3`));
    const direct = await fetch(
      `${broker.url}/streams/0/topics/0/messages?kind=offset&value=${first + 2n}&count=3`,
      {
        headers: { authorization: GOOD },
      },
    );
    assert.equal(await local.text(), await direct.text());
    const big = "x".repeat(1_500_000);
    const produced = await iggy.fetch(
      new Request("http://tierd/streams/0/topics/0/messages", {
        method: "POST",
        headers: {
          authorization: GOOD,
          "content-type": "application/json",
          connection: "keep-alive",
        },
        body: new Blob([big]).stream(),
        duplex: "half",
      } as RequestInit),
    );
    assert.equal(produced.status, 201);
    assert.equal(produced.headers.get("x-broker"), "yes");
    assert.equal(await produced.text(), `got ${big.length}`);
    const other = await iggy.fetch(
      new Request("http://tierd/stats", { headers: { authorization: GOOD } }),
    );
    assert.deepEqual(new Uint8Array(await other.arrayBuffer()), new Uint8Array([0, 1, 2, 255]));
    const put = await iggy.fetch(
      new Request("http://tierd/x", {
        method: "PUT",
        headers: { authorization: GOOD },
        body: "{}",
      }),
    );
    assert.equal(put.status, 204);
    assert.equal(put.body, null);
    const unknown = await iggy.fetch(
      new Request("http://tierd/streams/nope/topics/0/messages?kind=offset&value=0&count=2", {
        headers: { authorization: GOOD },
      }),
    );
    assert.equal(unknown.status, 404, "a name the broker does not know gets the broker's 404");
    await unknown.body?.cancel();
  });
});

Deno.test("the path forwarded to the broker is the request line's, never Host's or an absolute-form authority", async () => {
  await withListener(async ({ iggy, broker }) => {
    const server = await serve(iggy, { hostname: "127.0.0.1", port: 0 });
    try {
      const send = async (target: string, host: string) => {
        const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
        try {
          await conn.write(
            new TextEncoder().encode(
              `GET ${target} HTTP/1.1\r\nhost: ${host}\r\nauthorization: ${GOOD}\r\n` +
                `connection: close\r\n\r\n`,
            ),
          );
          const text = await new Response(conn.readable).text();
          return Number(text.split(" ")[1]);
        } catch {
          return 0;
        }
      };
      broker.calls.length = 0;
      await send("/healthz", "x/users/1?");
      await send("http://evil.example/streams", "tierd");
      await send("http://evil.example", "tierd");
      assert.equal(await send("/healthz/%2e%2e/users/1", "tierd"), 400);
      assert.deepEqual(broker.calls.map((c) => c.path), ["/healthz", "/streams", "/"]);
    } finally {
      await server.close();
    }
  });
});

Deno.test("streams and topics named by name are resolved through the broker and read as their ids", async () => {
  await withListener(async ({ iggy, broker, messages }) => {
    const query = "kind=offset&value=0&count=5";
    const byName = await iggy.fetch(
      new Request(`http://tierd/streams/orders/topics/events/messages?${query}`, {
        headers: { authorization: GOOD },
      }),
    );
    assert.equal(byName.status, 200);
    const body = await byName.json();
    assert.deepEqual(
      body.messages.map((m: { header: { offset: number } }) => BigInt(m.header.offset)),
      messages.slice(0, 5).map((m) => m.message.offset),
      "the evicted offsets, from tierd",
    );
    const byId = await iggy.fetch(poll(query));
    assert.deepEqual(await byId.json(), body, "the same answer as by id");
    const asked = broker.calls.map((c) => c.path);
    assert(asked.includes("/streams/orders"), "the stream's name was asked of the broker");
    assert(asked.includes("/streams/orders/topics/events"), "and the topic's");
    assert(
      asked.some((p) => p.startsWith("/streams/orders/topics/events/messages?")),
      "the probe polls by the client's own names",
    );
    const anonymous = await iggy.fetch(
      new Request(`http://tierd/streams/orders/topics/events/messages?${query}`),
    );
    assert.equal(anonymous.status, 401, "no names are resolved for a client the broker refuses");
    await anonymous.body?.cancel();
  });
});

/** The checks of a poll tierd cannot answer yet: the broker's 503 shape, never forwarded. */
async function assertNotReadyYet(
  iggy: IggyHttp,
  broker: Broker,
  s: Scenario,
  query: string,
  why: RegExp,
): Promise<void> {
  const gets = s.store.requestCount("get");
  const calls = broker.calls.length;
  const res = await iggy.fetch(poll(query));
  const text = await res.text();
  assert.equal(res.status, 503, `${query}: ${res.status} ${text}`);
  assert.ok(Number(res.headers.get("retry-after")) >= 1, `${query}: retry-after`);
  const body = JSON.parse(text);
  assert.deepEqual(Object.keys(body), ["id", "code", "reason", "field"], text);
  assert.equal(body.id, 503);
  assert.equal(body.code, "partition_rebuilding", text);
  assert.match(body.reason, why, text);
  assert.deepEqual(broker.calls.slice(calls), [], `${query}: the poll reached the broker`);
  assert.equal(s.store.requestCount("get"), gets, `${query}: the store was read`);
}

Deno.test("a poll of a partition whose state is not known yet answers 503 in the broker's shape, not forwarded", async () => {
  const WHY = "the agent is rebuilding its state from the bucket";
  await withListener(
    async ({ s, iggy, broker, first }) => {
      assert.ok(s.evicted.length > 0 && first > 10n);
      for (
        const q of [
          "partition_id=0&kind=offset&value=1&count=5",
          "partition_id=0&kind=first&count=5",
          "partition_id=0&kind=next&count=5&consumer_id=9",
        ]
      ) await assertNotReadyYet(iggy, broker, s, q, new RegExp(WHY));
    },
    (s) => {
      const journals = new JournalStateReader(s.config.agent.state_dir);
      return {
        states: { state: (id) => journals.state(id), pending: () => WHY },
      };
    },
  );
});

Deno.test("a poll of a partition whose directory contradicts its journal (an evicted segment 0 back) answers 503, not forwarded", async () => {
  await withListener(async ({ s, iggy, broker }) => {
    assert.equal(s.evicted[0], 0n, "segment 0 is evicted");
    // The topic was deleted and recreated behind the agent's back: the directory holds a new
    // segment 0 (other bytes), where the journal says segment 0 was evicted.
    const other = join(s.dir, "recreated");
    await generatePartition({
      format: "iggy-0.9",
      dataDir: other,
      ...s.ids,
      messages: 10,
      segmentSize: 1500,
      payloadSize: 40,
      seed: 99,
    });
    const dir = partitionDir(s.config.agent.data_dir, s.ids);
    for (const name of await readdir(dir)) await rm(join(dir, name));
    const fresh = partitionDir(other, s.ids);
    for (const name of await readdir(fresh)) await copyFile(join(fresh, name), join(dir, name));
    assert.ok((await readdir(dir)).includes("00000000000000000000.log"));
    for (
      const q of [
        "partition_id=0&kind=offset&value=1&count=5",
        "partition_id=0&kind=first&count=5",
      ]
    ) {
      await assertNotReadyYet(iggy, broker, s, q, /no longer fits its journal|evicted/);
    }
  });
});
