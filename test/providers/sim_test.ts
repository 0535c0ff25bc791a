// The simulator's fault injection and oracle; its plain behaviour is in test/contract/.
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { Deadline, withRetry } from "../../providers/retry.ts";
import { type SimFaults, SimStore } from "../../providers/sim/store.ts";
import { classify, StoreError } from "../../providers/types.ts";
import { FakeClock, InstantClock } from "../_fake_clock.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

/** Runs a fixed mix of requests and returns what each answered. */
async function outcomes(seed: number, faults: Partial<SimFaults>): Promise<string[]> {
  const sim = new SimStore({ seed, faults, clock: new InstantClock(0) });
  const out: string[] = [];
  for (let i = 0; i < 200; i++) {
    const key = `k${i % 7}`;
    const request = i % 3 === 0
      ? sim.put(key, bytes(`v${i}`))
      : i % 3 === 1
      ? sim.get(key)
      : sim.head(key);
    out.push(await request.then(() => "ok", (err: StoreError) => `${err.kind}:${err.detail.code}`));
  }
  return out;
}

Deno.test("sim: the same seed replays the same faults", async () => {
  const faults = {
    throttleRate: 0.2,
    serverErrorRate: 0.1,
    resetRate: 0.1,
    latencyMs: [1, 5] as [number, number],
  };
  const a = await outcomes(42, faults);
  assert.deepEqual(await outcomes(42, faults), a);
  assert.notDeepEqual(await outcomes(43, faults), a);
  assert.ok(a.includes("Throttled:SlowDown"));
  assert.ok(a.includes("Transport:InternalError"));
  assert.ok(a.includes("Transport:ECONNRESET"));
  assert.ok(a.includes("ok"));
});

Deno.test("sim: throttling answers Throttled and changes nothing", async () => {
  const sim = new SimStore({ faults: { throttleRate: 1 } });
  await assert.rejects(sim.put("k", bytes("v")), (err: unknown) => {
    assert.ok(err instanceof StoreError);
    assert.equal(err.kind, "Throttled");
    assert.equal(err.detail.status, 503);
    assert.equal(classify(err), "retry");
    return true;
  });
  assert.equal(sim.objects.has("k"), false);
  sim.setFaults({ throttleRate: 0 });
  assert.equal((await sim.put("k", bytes("v"))).status, "Created");
});

Deno.test("sim: an outage fails every request with Transport until it ends", async () => {
  const sim = new SimStore();
  await sim.put("k", bytes("v"));
  sim.setUnavailable(true);
  assert.equal(sim.faults.unavailable, true);
  const requests = [
    sim.get("k"),
    sim.head("k"),
    sim.put("k2", bytes("v")),
    sim.list(""),
    sim.deleteMany(["k"]),
    sim.createMultipart("m"),
    sim.listMultipartUploads(""),
  ];
  for (const request of requests) {
    await assert.rejects(request, (err: unknown) => (err as StoreError).kind === "Transport");
  }
  assert.deepEqual([...sim.objects.keys()], ["k"]);
  sim.setUnavailable(false);
  assert.deepEqual((await sim.get("k")).bytes, bytes("v"));
});

Deno.test("sim: a reset write may or may not have taken effect", async () => {
  const sim = new SimStore({ seed: 5, faults: { resetRate: 1 } });
  for (let i = 0; i < 40; i++) {
    await assert.rejects(
      sim.put(`k${i}`, bytes("v")),
      (err: unknown) =>
        (err as StoreError).kind === "Transport" &&
        (err as StoreError).detail.code === "ECONNRESET",
    );
  }
  const applied = sim.objects.size;
  assert.ok(applied > 5 && applied < 35, `some resets applied the put, some not (${applied}/40)`);
  await assert.rejects(sim.get("k0"), (err: unknown) => (err as StoreError).kind === "Transport");

  // A retried create-only put after a reset-after-apply finds its own object: AlreadyExists.
  sim.setFaults({ resetRate: 0 });
  const survivor = [...sim.objects.keys()][0];
  assert.equal((await sim.put(survivor, bytes("v"), { ifAbsent: true })).status, "AlreadyExists");
});

Deno.test("sim: a replacement whose reset hid its success is refused when retried", async () => {
  const sim = new SimStore({ seed: 5 });
  await sim.put("owner", bytes("agent a, nonce 1"));
  const { version } = await sim.head("owner");
  assert.equal(version, sim.objects.get("owner")?.version, "the oracle shows the version");
  sim.setFaults({ resetRate: 1 });
  // Reset replacements until one took effect before its connection reset.
  for (let i = 0; sim.objects.get("owner")?.version === version; i++) {
    assert.ok(i < 20, "some reset applies the write");
    await assert.rejects(
      sim.put("owner", bytes("agent b, nonce 2"), { ifMatch: version }),
      (err: unknown) => (err as StoreError).detail.code === "ECONNRESET",
    );
  }
  sim.setFaults({ resetRate: 0 });
  // The retry finds the version moved on, by its own write: callers read the object back.
  await assert.rejects(
    sim.put("owner", bytes("agent b, nonce 2"), { ifMatch: version }),
    (err: unknown) => err instanceof StoreError && err.kind === "PreconditionFailed",
  );
  assert.deepEqual((await sim.get("owner")).bytes, bytes("agent b, nonce 2"));
});

Deno.test("sim: latency and slow bodies wait on the injected clock", async () => {
  const clock = new InstantClock(0);
  const sim = new SimStore({ clock, faults: { latencyMs: [10, 20] } });
  await sim.put("k", bytes("v"));
  await sim.get("k");
  await sim.head("k");
  assert.equal(clock.waits.length, 3);
  assert.ok(clock.waits.every((ms) => ms >= 10 && ms <= 20), `${clock.waits}`);

  clock.waits.length = 0;
  sim.setFaults({ latencyMs: [0, 0], slowBodyRate: 1, slowBodyMs: 750 });
  await sim.get("k");
  await sim.head("k");
  assert.deepEqual(clock.waits, [750], "only a get has a body to trickle");
});

Deno.test("sim: requests honour their AbortSignal, during latency too", async () => {
  const sim = new SimStore({ faults: { latencyMs: [60_000, 60_000] } });
  await assert.rejects(sim.put("k", bytes("v"), { signal: AbortSignal.abort() }), {
    name: "AbortError",
  });
  const controller = new AbortController();
  const slow = sim.get("k", { signal: controller.signal });
  controller.abort();
  await assert.rejects(slow, { name: "AbortError" });
  assert.equal(sim.objects.size, 0);
});

Deno.test("sim: request counters count every attempt per operation", async () => {
  const sim = new SimStore({ seed: 3, faults: { serverErrorRate: 0.5 } });
  for (let i = 0; i < 10; i++) await sim.get("missing").catch(() => {});
  await sim.put("k", bytes("v")).catch(() => {});
  assert.equal(sim.requestCount("get"), 10);
  assert.equal(sim.requestCount("put"), 1);
  assert.equal(sim.requestCount("head"), 0);
  assert.equal(sim.requestCount(), 11);
  sim.resetCounts();
  assert.equal(sim.requestCount(), 0);
});

Deno.test("sim: withRetry rides through a flaky store, and the oracle sees every object", async () => {
  const sim = new SimStore({
    seed: 11,
    faults: { throttleRate: 0.2, serverErrorRate: 0.1, resetRate: 0.1, latencyMs: [0, 3] },
    clock: new InstantClock(0),
  });
  let throttled = 0;
  const clock = new FakeClock();
  const retry = <T>(op: (signal: AbortSignal) => Promise<T>) =>
    clock.runUntil(
      withRetry(op, {
        deadline: Deadline.after(600_000, undefined, { clock }), // fake time: backoff really adds up
        maxAttempts: 50,
        onThrottle: () => throttled++,
      }),
      { maxStepMs: Infinity },
    );
  for (let i = 0; i < 50; i++) {
    const result = await retry((signal) =>
      sim.put(`seg/${i}`, bytes(`body ${i}`), { ifAbsent: true, signal })
    );
    assert.ok(result.status === "Created" || result.status === "AlreadyExists");
  }
  assert.ok(throttled > 0);
  assert.ok(sim.requestCount("put") > 50, "some puts were retried");
  assert.equal(sim.objects.size, 50);
  for (let i = 0; i < 50; i++) {
    assert.deepEqual(sim.objects.get(`seg/${i}`)?.bytes, bytes(`body ${i}`));
  }
  const listed = await retry((signal) => listBounded(sim, "seg/", { signal, pageSize: 7 }));
  assert.equal(listed.length, 50);
});

Deno.test("sim: stored bytes are copies, and the oracle shows metadata", async () => {
  const sim = new SimStore();
  const body = bytes("abc");
  await sim.put("k", body, { metadata: { "end-offset": "9" }, contentType: "text/plain" });
  body[0] = 0x7a;
  const got = await sim.get("k");
  assert.deepEqual(got.bytes, bytes("abc"));
  got.bytes[1] = 0x7a;
  const stored = sim.objects.get("k")!;
  assert.deepEqual(stored.bytes, bytes("abc"));
  assert.deepEqual(stored.metadata, { "end-offset": "9" });
  assert.equal(stored.contentType, "text/plain");
  assert.equal(stored.etag, "900150983cd24fb0d6963f7d28e17f72", "md5 of the body");
});

Deno.test("sim: multipart follows S3's rules", async () => {
  const sim = new SimStore({ minPartSize: 4 });
  const id = await sim.createMultipart("big");
  assert.equal(sim.uploads.get(id)?.key, "big");
  const p1 = await sim.putPart("big", id, 1, bytes("abcd"));
  const p2 = await sim.putPart("big", id, 2, bytes("ef"));
  const p3 = await sim.putPart("big", id, 3, bytes("g"));
  const kind = (code: string) => (err: unknown) => (err as StoreError).detail.code === code;
  await assert.rejects(sim.completeMultipart("big", id, [p1, p2, p3]), kind("EntityTooSmall"));
  await assert.rejects(
    sim.completeMultipart("big", id, [p1, { ...p2, etag: "0".repeat(32) }]),
    kind("InvalidPart"),
  );
  await assert.rejects(
    sim.completeMultipart("big", id, [p1, { partNumber: 9, etag: p2.etag }]),
    kind("InvalidPart"),
  );
  await assert.rejects(sim.completeMultipart("big", id, [p1, p1]), kind("InvalidPartOrder"));
  await assert.rejects(sim.completeMultipart("big", id, []), kind("InvalidPart"));
  await assert.rejects(sim.completeMultipart("other", id, [p1]), kind("NoSuchUpload"));
  await assert.rejects(sim.putPart("big", id, 0, bytes("x")), kind("InvalidArgument"));
  await assert.rejects(sim.putPart("big", id, 10_001, bytes("x")), kind("InvalidArgument"));
  await assert.rejects(
    sim.putPart("big", "nope", 1, bytes("x")),
    (err: unknown) => (err as StoreError).kind === "NotFound",
  );
  // Quoted ETags (as S3 returns them) are accepted; parts may be listed in any order.
  const done = await sim.completeMultipart("big", id, [{ ...p2, etag: `"${p2.etag}"` }, p1]);
  assert.equal(done.status, "Created");
  assert.match((done as { etag: string }).etag, /^[0-9a-f]{32}-2$/);
  assert.deepEqual((await sim.get("big")).bytes, bytes("abcdef"));
  assert.equal(sim.uploads.size, 0);
  await assert.rejects(
    sim.completeMultipart("big", id, [p1, p2]),
    (err: unknown) => (err as StoreError).kind === "NotFound",
  );
});

Deno.test("sim: keys and metadata outside the contract are refused", async () => {
  const sim = new SimStore();
  const refused = (code: string) => (err: unknown) =>
    err instanceof StoreError && err.kind === "Unsupported" && err.detail.code === code;
  await assert.rejects(sim.put("", bytes("x")), refused("InvalidKey"));
  await assert.rejects(sim.put("x".repeat(1025), bytes("x")), refused("InvalidKey"));
  await assert.rejects(sim.put("\ud800", bytes("x")), refused("InvalidKey"));
  await assert.rejects(
    sim.put("k", bytes("x"), { metadata: { "End-Offset": "1" } }),
    refused("InvalidArgument"),
  );
  await assert.rejects(
    sim.put("k", bytes("x"), { metadata: { note: "caf\u00e9" } }),
    refused("InvalidArgument"),
  );
  await assert.rejects(
    sim.list("", { continuationToken: "not a token!" }),
    (err: unknown) => (err as StoreError).kind === "Malformed",
  );
  assert.equal(sim.objects.size, 0);
});
