// RetryingStore: retries store faults only, within the view's deadline, paced per operation
// class, and everything under one root whose cancellation stops every view at once.
import assert from "node:assert/strict";
import { decorateStore, type StoreCall, type StoreOp } from "../../providers/decorate.ts";
import { OpClassPacer } from "../../providers/pacer.ts";
import { Deadline } from "../../providers/retry.ts";
import { type RetryEvent, RetryingStore } from "../../providers/retrying_store.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { StoreError, type StoreErrorKind } from "../../providers/types.ts";
import { FakeClock } from "../_fake_clock.ts";

const KEY = "k";
const fault = (kind: StoreErrorKind) => new StoreError(kind, `${kind} (test)`);

/**
 * A SimStore (holding one object, `k`) behind a script: each call that reaches it is recorded,
 * then takes the next scripted answer — an error, "hang" (never answers; rejects when its
 * signal aborts) — or, once the script is used up, is served by the sim.
 */
async function scripted(clock: FakeClock) {
  const sim = new SimStore({ clock });
  await sim.put(KEY, new Uint8Array([1, 2, 3]));
  const seen: { op: StoreOp; at: number; signal?: AbortSignal }[] = [];
  const script: (unknown | "hang")[] = [];
  function around<T>(call: StoreCall<T>): Promise<T> {
    seen.push({ op: call.op, at: clock.ms, signal: call.signal });
    if (script.length === 0) return call.run(call.signal);
    const next = script.shift();
    if (next !== "hang") return Promise.reject(next);
    return new Promise<T>((_, reject) => {
      const signal = call.signal!;
      signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
  }
  return { inner: decorateStore(sim, around), seen, script };
}

/** A RetryingStore over {@link scripted}, under a root `rootMs` away (never by default). */
async function rig(o: { rootMs?: number; maxAttempts?: number } = {}) {
  const clock = new FakeClock();
  const s = await scripted(clock);
  const retries: RetryEvent[] = [];
  const store = new RetryingStore(s.inner, {
    root: Deadline.after(o.rootMs ?? Infinity, undefined, { clock }),
    clock,
    rng: () => 0.5,
    maxBackoffMs: 10_000,
    maxAttempts: o.maxAttempts,
    onRetry: (e) => void retries.push(e),
  });
  return { clock, store, retries, run: onClock(clock), ...s };
}

/**
 * Awaits a promise while the fake clock jumps from timer to timer; one still pending after an
 * hour of fake time fails the test instead of hanging it.
 */
function onClock(clock: FakeClock) {
  return async <T>(p: Promise<T>): Promise<T> => {
    let cancel = () => {};
    const limit = new Promise<never>((_, reject) => {
      cancel = clock.setTimer(3_600_000, () => reject(new Error("still pending after 1 h")), {
        unref: true, // a watchdog: reached only when nothing else is pending
      });
    });
    try {
      return await clock.runUntil(Promise.race([p, limit]), { maxStepMs: Infinity });
    } finally {
      cancel();
    }
  };
}

Deno.test("RetryingStore: transport faults and throttling are retried until the call succeeds", async () => {
  const r = await rig();
  r.script.push(fault("Transport"), fault("Throttled"), fault("Transport"));
  const view = r.store.within(r.store.deadline(60_000), "upload");
  const head = await r.run(view.head(KEY));
  assert.equal(head.size, 3);
  assert.equal(r.seen.length, 4, "three failures, then the answer");
  assert.deepEqual(r.retries.map((e) => [e.op, e.key, e.attempt]), [
    ["head", KEY, 1],
    ["head", KEY, 2],
    ["head", KEY, 3],
  ]);
  assert.ok(r.retries.every((e) => e.err instanceof StoreError));
});

Deno.test("RetryingStore: anything that is not a store fault fails on its first attempt, as itself", async () => {
  class SegmentChanged extends Error {}
  const errors: unknown[] = [
    fault("NotFound"),
    fault("Auth"),
    fault("PreconditionFailed"),
    fault("Malformed"),
    fault("InvalidRange"),
    fault("Unsupported"),
    new SegmentChanged("the file changed"),
    new TypeError("x is undefined"),
    new DOMException("cancelled", "AbortError"),
  ];
  for (const err of errors) {
    const r = await rig();
    r.script.push(err);
    const view = r.store.within(r.store.deadline(60_000));
    await assert.rejects(r.run(view.get(KEY)), (e) => e === err);
    assert.equal(r.seen.length, 1, `${(err as Error).message}: one attempt`);
    assert.deepEqual(r.retries, []);
  }
});

Deno.test("RetryingStore: a replacement's version reaches the store; a refusal is not retried", async () => {
  const r = await rig();
  const view = r.store.within(r.store.deadline(60_000), "upload");
  const { version } = await r.run(view.head(KEY));
  const replaced = await r.run(view.put(KEY, new Uint8Array([4]), { ifMatch: version }));
  assert.ok(replaced.status === "Created" && replaced.version !== version);
  r.seen.length = 0;
  await assert.rejects(
    r.run(view.put(KEY, new Uint8Array([5]), { ifMatch: version })),
    (err: unknown) => err instanceof StoreError && err.kind === "PreconditionFailed",
  );
  assert.equal(r.seen.length, 1, "one attempt: another cannot make the version match");
  assert.deepEqual(r.retries, []);
});

Deno.test("RetryingStore: gives up at the view's deadline; no attempt starts past it", async () => {
  const r = await rig();
  const start = r.clock.ms;
  for (let i = 0; i < 50; i++) r.script.push(fault("Transport"));
  const deadline = r.store.deadline(1_000);
  const view = r.store.within(deadline);
  await assert.rejects(
    r.run(view.head(KEY)),
    (e) => e instanceof StoreError && e.kind === "Transport",
  );
  assert.ok(r.seen.length > 1, "it was retried");
  assert.ok(r.seen.length < 10, `the deadline, not maxAttempts, ended it (${r.seen.length})`);
  assert.ok(r.seen.every((c) => c.at < deadline.at), "every attempt started before the deadline");
  assert.ok(r.clock.ms <= start + 1_000, "it gave up without waiting past the deadline");
  // maxAttempts bounds it too.
  const few = await rig({ maxAttempts: 3 });
  for (let i = 0; i < 50; i++) few.script.push(fault("Transport"));
  await assert.rejects(few.run(few.store.within(few.store.deadline(600_000)).head(KEY)));
  assert.equal(few.seen.length, 3);
});

Deno.test("RetryingStore: a call still in flight at the view's deadline is aborted at it", async () => {
  const r = await rig();
  const start = r.clock.ms;
  r.script.push("hang");
  const view = r.store.within(r.store.deadline(1_000));
  await assert.rejects(
    r.run(view.put("other", new Uint8Array(1))),
    (e) => e instanceof DOMException && e.name === "TimeoutError",
  );
  assert.equal(r.clock.ms, start + 1_000, "exactly at the deadline");
  assert.equal(r.seen[0].signal?.aborted, true);
  assert.equal(r.seen.length, 1, "a deadline is not retried");
});

Deno.test("RetryingStore: within never outlives the deadline it is given, nor the root", async () => {
  const r = await rig({ rootMs: 500 });
  const long = r.store.deadline(10_000);
  assert.equal(long.at, r.store.root.at, "a view's deadline is capped by the root's");
  r.script.push("hang");
  const start = r.clock.ms;
  await assert.rejects(
    r.run(r.store.within(long).head(KEY)),
    (e) => e instanceof DOMException && e.name === "TimeoutError",
  );
  assert.equal(r.clock.ms, start + 500);
  // A view whose deadline passed sends nothing more.
  const seen = r.seen.length;
  await assert.rejects(r.store.within(long).head(KEY));
  assert.equal(r.seen.length, seen, "no call starts past the deadline");
});

Deno.test("RetryingStore: a throttled class is paced; the other class and transport faults are not", async () => {
  const clock = new FakeClock();
  const pacer = new OpClassPacer({ clock });
  const s = await scripted(clock);
  const store = new RetryingStore(s.inner, { clock, rng: () => 0.5, pacer });
  const upload = store.within(store.deadline(60_000), "upload");
  const housekeeping = store.within(store.deadline(60_000), "housekeeping");
  const run = onClock(clock);
  s.script.push(fault("Transport"));
  await run(upload.head(KEY));
  assert.equal(pacer.delayOf("upload"), 0, "a transport fault does not slow the class");
  s.script.push(fault("Throttled"));
  await run(upload.head(KEY));
  const spacing = pacer.delayOf("upload");
  assert.ok(spacing > 0, "throttling slowed uploads down");
  assert.equal(pacer.delayOf("housekeeping"), 0);
  // Both classes ask at the same moment: housekeeping goes at once, uploads wait their spacing.
  const t = clock.ms;
  s.seen.length = 0;
  await run(Promise.all([upload.head(KEY), housekeeping.head(KEY)]));
  const at = (i: number) => s.seen[i].at - t;
  assert.deepEqual([at(0), at(1)].sort((a, b) => a - b), [0, spacing]);
  assert.ok(pacer.delayOf("upload") < spacing, "success speeds the class back up");
});

Deno.test("RetryingStore: cancelling the root aborts the calls of every view, and nothing starts after", async () => {
  const r = await rig();
  const root = r.store.root;
  r.script.push("hang", "hang");
  const a = r.store.within(r.store.deadline(60_000), "upload").put("a", new Uint8Array(1));
  const b = r.store.within(r.store.deadline(120_000), "housekeeping").get(KEY);
  a.catch(() => {});
  b.catch(() => {});
  await r.clock.runUntil(Promise.resolve()); // both calls reach the store
  assert.equal(r.seen.length, 2);
  const reason = new DOMException("stopping", "AbortError");
  root.cancel(reason);
  await assert.rejects(a, (e) => e === reason);
  await assert.rejects(b, (e) => e === reason);
  assert.deepEqual(r.seen.map((c) => c.signal?.aborted), [true, true]);
  assert.equal(r.clock.pending, 0, "every call's timer was released");
  // A new view, or an old one, sends nothing once the root is cancelled.
  await assert.rejects(r.store.within(r.store.deadline(1_000)).head(KEY), (e) => e === reason);
  assert.equal(r.seen.length, 2, "no call reached the store after the cancel");
});
