// The boot probe's write check: on a probe key under `.tierd-probe/`, the store is asked to do
// what the agent will do — put, conditional create, head, ranged get, a one-part multipart
// upload, delete — and the first step it refuses is named with what to check; a store that
// ignores the conditional create passes with a warning; nothing is left behind either way.
import assert from "node:assert/strict";
import { decorateStore, type StoreOp } from "../../providers/decorate.ts";
import { probeStore } from "../../providers/probe.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";

/** A sim store whose `op` answers `status` (403: denied) from the `nth` call on. */
function refusing(sim: SimStore, op: StoreOp, nth = 1): ObjectStore {
  let calls = 0;
  return decorateStore(sim, (call) => {
    if (call.op === op && ++calls >= nth) {
      return Promise.reject(
        new StoreError("Auth", `${op} ${call.key}: 403 AccessDenied`, { status: 403 }),
      );
    }
    return call.run(call.signal);
  });
}

const leftovers = async (sim: SimStore) =>
  (await sim.list("iggy/")).objects.map((o) => o.key).concat(
    (await sim.listMultipartUploads("iggy/")).map((u) => u.key),
  );

Deno.test("the write check passes on a store that does what the agent needs, leaving nothing", async () => {
  const sim = new SimStore();
  assert.deepEqual(await probeStore(sim, "iggy", { writes: true }), { ok: true });
  assert.deepEqual(await leftovers(sim), []);
  assert.equal(sim.requestCount("put") > 0, true, "it wrote");
  // Without writes, the probe only lists.
  const quiet = new SimStore();
  assert.deepEqual(await probeStore(quiet, "iggy"), { ok: true });
  assert.equal(quiet.requestCount("put"), 0);
});

Deno.test("the write check names the first step the store refuses, and what to check", async () => {
  const cases: [StoreOp, number, RegExp][] = [
    ["put", 1, /^put on a probe key failed: .*AccessDenied.*; check the credentials' write/],
    ["head", 1, /^head on a probe key failed: .*; check the credentials' read permission/],
    ["get", 1, /^ranged get on a probe key failed: .*; check the credentials' read permission/],
    ["create_multipart", 1, /^multipart upload on a probe key failed: .*; check the credentials'/],
    ["put_part", 1, /^multipart upload on a probe key failed/],
    ["delete", 1, /^delete on a probe key failed: .*; check the credentials' delete permission/],
  ];
  for (const [op, nth, says] of cases) {
    const sim = new SimStore();
    const result = await probeStore(refusing(sim, op, nth), "iggy", { writes: true });
    assert.equal(result.ok, false, op);
    assert.match((result as { reason: string }).reason, says, op);
    if (op !== "delete") assert.deepEqual(await leftovers(sim), [], `${op}: cleaned up`);
  }
});

Deno.test("a store that ignores If-None-Match on a create passes the probe with a warning", async () => {
  const sim = new SimStore();
  const ignoring: ObjectStore = {
    ...decorateStore(sim, (call) => call.run(call.signal)),
    put: (key, body, o) => sim.put(key, body, { ...o, ifAbsent: false }),
  };
  const result = await probeStore(ignoring, "iggy", { writes: true });
  assert.equal(result.ok, true);
  assert.match((result as { warnings: string[] }).warnings[0], /ignores If-None-Match/);
  assert.deepEqual(await leftovers(sim), []);
});

Deno.test("what a probe cut off by a crash left in its space is removed by the next probe, never another agent's", async () => {
  const sim = new SimStore();
  const mine = ".tierd-probe/a1/";
  // A crash mid-probe: an object and an unfinished multipart upload of agent a1, one of a2.
  await sim.put(`iggy/${mine}write-1`, new Uint8Array(10));
  await sim.createMultipart(`iggy/${mine}write-1-multipart`);
  await sim.put("iggy/.tierd-probe/a2/write-9", new Uint8Array(10));
  assert.deepEqual(await probeStore(sim, "iggy", { writes: true, space: "a1" }), { ok: true });
  assert.deepEqual(await leftovers(sim), ["iggy/.tierd-probe/a2/write-9"]);
});

Deno.test("a store that can be listed but refuses writes fails the probe at the writes stage", async () => {
  const result = await probeStore(refusing(new SimStore(), "put"), "iggy", { writes: true });
  assert.equal(result.ok, false);
  assert.equal((result as { stage: string }).stage, "writes");
  const unreachable = await probeStore(refusing(new SimStore(), "list"), "iggy", { writes: true });
  assert.equal((unreachable as { stage: string }).stage, "list");
});
