// The broker's connection as the front uses it, against a stand-in broker on a real loopback
// socket that answers in chunks of any size: answers passed on to the client arrive there whole,
// in order and unchanged, and only when the check accepted them (judged on exactly the head it
// asked for, or the whole answer when shorter); an answer the check refused comes back whole with
// nothing passed; plain requests in between keep their answers; and a broker that goes away in
// the middle of an answer fails the request instead of leaving it waiting.
import assert from "node:assert/strict";
import net from "node:net";
import fc from "fast-check";
import { concatBytes } from "../../src/base/bytes.ts";
import { BrokerLink, BrokerLinkClosed, type Passed } from "../../src/iggy_tcp/broker_link.ts";
import { encodeResponse08 } from "../../src/iggy_tcp/wire.ts";

/** A stand-in broker: each connection waits for `script` and then writes what it says. */
async function standInBroker() {
  const sockets: net.Socket[] = [];
  const server = net.createServer((socket) => {
    socket.on("error", () => {});
    socket.on("data", () => {}); // requests are not read: the test says what to answer
    sockets.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    /** The newest connection. */
    latest: () => sockets.at(-1)!,
    /**
     * Writes `bytes` in chunks of the given sizes, a turn of the event loop apart (after 40
     * chunks, the rest 64 KiB at a time).
     */
    async write(socket: net.Socket, bytes: Uint8Array, sizes: number[]) {
      let at = 0;
      for (let i = 0; at < bytes.length; i++) {
        const n = i < 40 ? Math.max(1, sizes[i % sizes.length]) : 65_536;
        socket.write(bytes.subarray(at, at + n));
        at += n;
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const connect = (port: number) =>
  BrokerLink.connect({ host: "127.0.0.1", port }, "response-0.8", {
    maxFrameBytes: 1 << 20,
    timeoutMs: 5_000,
  });

/** An answer with a payload of `size` bytes whose first byte says whether to pass it. */
function answer(size: number, pass: boolean, seed: number): Uint8Array {
  const payload = new Uint8Array(size);
  for (let i = 0; i < size; i++) payload[i] = (seed + i * 31) & 0xff;
  if (size > 0) payload[0] = pass ? 1 : 0;
  return encodeResponse08(0, payload);
}

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

Deno.test("answers passed on arrive whole and in order, only when the check accepts their head", async () => {
  const broker = await standInBroker();
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            kind: fc.constantFrom("plain", "passing"),
            size: fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 200_000 })),
            pass: fc.boolean(),
            headBytes: fc.integer({ min: 0, max: 64 }),
          }),
          { minLength: 1, maxLength: 6 },
        ),
        fc.array(fc.integer({ min: 1, max: 70_000 }), { minLength: 1, maxLength: 5 }),
        async (asks, sizes) => {
          const link = await connect(broker.port);
          try {
            const answers = asks.map((a, i) => answer(a.size, a.pass, i));
            const sunk = asks.map(() => [] as Uint8Array[]);
            const heads: Uint8Array[][] = asks.map(() => []);
            const pending = asks.map((a, i) =>
              a.kind === "plain"
                ? link.request(new Uint8Array([i])).then((f) =>
                  ({ frame: f }) as Passed<
                    "response-0.8"
                  >
                )
                : link.requestPassing(new Uint8Array([i]), {
                  headBytes: a.headBytes,
                  check: (head) => {
                    heads[i].push(head.slice());
                    // A payload-less answer passes; otherwise its first payload byte decides.
                    return head.length <= 8 || head[8] === 1;
                  },
                  sink: (chunk) => sunk[i].push(chunk.slice()),
                })
            );
            await new Promise((resolve) => setTimeout(resolve, 5));
            await broker.write(broker.latest(), concatBytes(answers), sizes);
            const results = await Promise.all(pending);
            results.forEach((r, i) => {
              const a = asks[i];
              const whole = answers[i];
              const passes = a.kind === "passing" && (a.size === 0 || a.headBytes <= 8 || a.pass);
              if (passes) {
                assert.deepEqual(r, { passed: whole.length }, `answer ${i} passed on`);
                assert.equal(
                  hex(concatBytes(sunk[i])),
                  hex(whole),
                  `answer ${i} as the client got it`,
                );
              } else {
                assert.ok("frame" in r, `answer ${i} came back whole`);
                assert.equal(hex(r.frame.bytes), hex(whole), `answer ${i}`);
                assert.deepEqual(sunk[i], [], `nothing of answer ${i} was passed on`);
              }
              if (a.kind === "passing") {
                assert.equal(heads[i].length, 1, `answer ${i} judged once`);
                const want = whole.subarray(0, Math.min(a.headBytes, whole.length));
                assert.equal(hex(heads[i][0]), hex(want), `answer ${i} judged on its head`);
              }
            });
          } finally {
            link.close();
          }
        },
      ),
      { numRuns: 40 },
    );
  } finally {
    await broker.close();
  }
});

Deno.test("a broker that goes away in the middle of a passed answer fails the request", async () => {
  const broker = await standInBroker();
  try {
    const link = await connect(broker.port);
    const sunk: Uint8Array[] = [];
    const pending = link.requestPassing(new Uint8Array([1]), {
      headBytes: 0,
      check: () => true,
      sink: (chunk) => sunk.push(chunk),
    });
    const next = link.request(new Uint8Array([2]));
    const failures = Promise.allSettled([pending, next]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const whole = answer(100_000, true, 7);
    await broker.write(broker.latest(), whole.subarray(0, 30_000), [10_000]);
    broker.latest().destroy();
    for (const r of await failures) {
      assert.ok(r.status === "rejected" && r.reason instanceof BrokerLinkClosed, String(r));
    }
    assert.ok(concatBytes(sunk).length <= 30_000, "no more was passed than the broker sent");
    assert.ok(link.closed);
  } finally {
    await broker.close();
  }
});
