// The upload bandwidth limit: every body a store call sends (a PUT, a multipart part) waits for
// its bytes from one shared token bucket, whatever key or upload it belongs to; reads, HEADs,
// listings and deletes never wait; a caller that gives up stops waiting.
import assert from "node:assert/strict";
import { paceUploads } from "../../providers/paced_uploads.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { TokenBucket } from "../../src/cache/token_bucket.ts";
import { FakeClock } from "../_fake_clock.ts";

const KiB = 1024;

Deno.test("paced uploads: PUTs and parts of every upload share one rate; nothing else waits", async () => {
  const clock = new FakeClock();
  const sim = new SimStore({ clock });
  // 100 KiB/s with a 64 KiB burst.
  const store = paceUploads(sim, new TokenBucket(100 * KiB, { clock }));
  const t0 = clock.now();
  const done: string[] = [];
  const a = store.put("a", new Uint8Array(64 * KiB)).then(() => done.push("a"));
  const id = await sim.createMultipart("b");
  const b = store.putPart("b", id, 1, new Uint8Array(100 * KiB)).then(() => done.push("b"));
  const c = store.put("c", new Uint8Array(200 * KiB)).then(() => done.push("c"));
  await clock.runUntil(Promise.all([a, b, c]));
  assert.deepEqual(done, ["a", "b", "c"], "in call order");
  // 364 KiB at 100 KiB/s, the first 64 KiB free: the last body may start after 3 s.
  const took = clock.now() - t0;
  assert.ok(took >= 3_000 - 1 && took < 3_100, `${took} ms`);

  // Reads and the rest go at once, even with the bucket owed.
  const owed = store.put("d", new Uint8Array(500 * KiB));
  const t1 = clock.now();
  await store.get("a");
  await store.head("a");
  await store.list("");
  await store.deleteMany(["c"]);
  assert.equal(clock.now(), t1, "no time passed for reads, HEADs, listings and deletes");
  await clock.runUntil(owed);
});

Deno.test("paced uploads: a caller that gives up stops waiting and sends nothing", async () => {
  const clock = new FakeClock();
  const sim = new SimStore({ clock });
  const store = paceUploads(sim, new TokenBucket(10 * KiB, { clock }));
  await store.put("first", new Uint8Array(64 * KiB)); // the burst
  const stop = new AbortController();
  const waiting = store.put("second", new Uint8Array(100 * KiB), { signal: stop.signal });
  stop.abort(new Error("shutting down"));
  await assert.rejects(waiting, /shutting down/);
  sim.resetCounts();
  await assert.rejects(sim.head("second"));
});
