// The download limits: the token bucket (fetch_bandwidth) on an injected clock, and the fetch
// gate (fetch_concurrency) that lets reads past readahead.
import assert from "node:assert/strict";
import { FetchGate } from "../../src/cache/fetch_gate.ts";
import { TokenBucket } from "../../src/cache/token_bucket.ts";
import { FakeClock } from "../_fake_clock.ts";

/** Lets resolved promises run their continuations. */
const ticks = async (n = 5) => {
  for (let i = 0; i < n; i++) await Promise.resolve();
};

Deno.test("the token bucket grants bytes at its rate, after the burst", async () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket(1000, { burst: 500, clock }); // 1000 B/s
  const granted: Array<[number, number]> = [];
  const take = (n: number, id: number) =>
    bucket.take(n).then(() => granted.push([id, clock.now()]));
  const all = Promise.all([take(500, 1), take(500, 2), take(1000, 3), take(250, 4)]);
  await ticks();
  assert.deepEqual(granted, [[1, 0]], "the burst goes at once");
  clock.advance(499);
  await ticks();
  assert.equal(granted.length, 1);
  clock.advance(1);
  await ticks();
  assert.deepEqual(granted.at(-1), [2, 500]);
  for (let i = 0; i < 8; i++) {
    clock.advance(250);
    await ticks();
  }
  await all;
  // 2250 bytes: 500 of burst, then 1750 at 1000 B/s → the last grant at 1750 ms, in call order.
  assert.deepEqual(granted, [[1, 0], [2, 500], [3, 1500], [4, 1750]]);
});

Deno.test("over any window the bucket grants at most burst + rate × time", async () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket(10_000, { burst: 1000, clock });
  let granted = 0;
  const pending: Promise<void>[] = [];
  for (let i = 0; i < 50; i++) pending.push(bucket.take(700).then(() => void (granted += 700)));
  for (let t = 0; t <= 4000; t += 100) {
    await ticks();
    assert.ok(granted <= 1000 + 10 * t + 700, `at ${t} ms: ${granted} bytes`);
    clock.advance(100);
  }
  await Promise.all(pending);
  assert.equal(granted, 35_000);
});

Deno.test("an unlimited bucket never waits; an aborted wait rejects", async () => {
  const clock = new FakeClock(0);
  await new TokenBucket(Infinity, { clock }).take(1 << 30);
  assert.equal(clock.pending, 0);
  const bucket = new TokenBucket(1, { burst: 0, clock });
  const ac = new AbortController();
  const wait = bucket.take(100, ac.signal);
  ac.abort(new Error("gave up"));
  await assert.rejects(wait, /gave up/);
});

Deno.test("the gate keeps to its limit and serves reads before readahead", async () => {
  const gate = new FetchGate(2);
  const order: string[] = [];
  const a = await gate.acquire("read").ready;
  const b = await gate.acquire("readahead").ready;
  const waiting = [
    gate.acquire("readahead").ready.then((r) => (order.push("ahead1"), r)),
    gate.acquire("read").ready.then((r) => (order.push("read1"), r)),
  ];
  const promoted = gate.acquire("readahead");
  promoted.ready.then(() => order.push("ahead2-promoted"));
  const read2 = gate.acquire("read").ready.then((r) => (order.push("read2"), r));
  promoted.promote();
  await ticks();
  assert.equal(gate.active, 2);
  assert.deepEqual(order, []);
  a();
  await ticks();
  assert.deepEqual(order, ["read1"]);
  b();
  b(); // a second call is a no-op
  await ticks();
  assert.deepEqual(order, ["read1", "read2"]);
  (await waiting[1])();
  await ticks();
  assert.deepEqual(order, ["read1", "read2", "ahead2-promoted"]);
  (await read2)();
  await ticks();
  assert.deepEqual(order, ["read1", "read2", "ahead2-promoted", "ahead1"]);
  assert.equal(gate.active, 2);
});
