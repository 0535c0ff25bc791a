// The multipart sweep on the sim store: an upload under this cluster's prefix still open a day
// after it started is aborted; a younger one (a copy may be sending it), one whose start the
// store does not say, and any upload outside the prefix — another cluster's, another prefix's,
// one that only starts like it, or one a lying listing names — are never touched. An abort
// refused part-way or the request quota spent leaves the sweep due, and the next run aborts
// the rest.
import assert from "node:assert/strict";
import { StoreError } from "../../../providers/types.ts";
import { clusterRoot, segmentKeys } from "../../../src/layout/object_keys.ts";
import {
  ABANDONED_AFTER_MS,
  multipartSweepDue,
  sweepMultipart,
} from "../../../src/tier/housekeeping/multipart_sweep.ts";
import { describeProblem } from "../../../src/tier/problem.ts";
import { emptyHousekeepingState } from "../../../src/tier/housekeeping/state.ts";
import { DAY, HousekeepingRig, housekeepingRig, MINUTE } from "./_rig.ts";

async function sweep(r: HousekeepingRig, o: Parameters<HousekeepingRig["env"]>[0] = {}) {
  const env = r.env(o);
  try {
    return { out: await sweepMultipart(env), env };
  } finally {
    env.dispose();
  }
}

/** Open uploads by key. */
function open(r: HousekeepingRig): string[] {
  return [...r.sim.uploads.values()].map((u) => u.key).sort();
}

/** Keys of uploads that are not this agent's to abort, whatever their age. */
function foreignKeys(r: HousekeepingRig): string[] {
  const root = clusterRoot(r.keySpace); // "iggy/local/"
  return [
    `iggy/someone-else/0/0/0/0000000000000001-0/00000000000000000000.log`,
    `${root.slice(0, -1)}-2/0/0/0/0000000000000001-0/00000000000000000000.log`,
    `iggy-old/${root.split("/")[1]}/0/0/0/0000000000000001-0/00000000000000000000.log`,
    "not-tierd/big-upload.bin",
  ];
}

/** An upload of the agent's under the cluster's prefix, segment `start`. */
function ownKey(r: HousekeepingRig, start: bigint): string {
  return segmentKeys(r.ledger.location(), start).log;
}

Deno.test("an upload under the cluster's prefix is aborted once a day old, never sooner, never one outside the prefix", async () => {
  const r = await housekeepingRig();
  try {
    const stale = ownKey(r, 0n);
    await r.sim.createMultipart(stale);
    for (const key of foreignKeys(r)) await r.sim.createMultipart(key);
    r.clock.advance(MINUTE);
    const young = ownKey(r, 1000n);
    await r.sim.createMultipart(young);
    r.clock.advance(ABANDONED_AFTER_MS - MINUTE - 1);

    // A day less a millisecond: nothing is old enough.
    const first = await sweep(r);
    assert.deepEqual(first.out.problems, []);
    assert.deepEqual(first.out.counts, { open: 2, aborted: 0 });
    assert.equal(r.sim.requestCount("abortMultipart"), 0);

    r.clock.advance(1);
    const second = await sweep(r);
    assert.deepEqual(second.out.counts, { open: 2, aborted: 1 });
    assert.deepEqual(open(r), [...foreignKeys(r), young].sort(), "only the day-old one went");
    assert.equal(second.env.state.multipart.lastSweep, r.clock.now());
    assert.equal(r.logged("abandoned multipart upload aborted").length, 1);

    r.clock.advance(DAY);
    await sweep(r);
    assert.deepEqual(open(r), foreignKeys(r).sort(), "another cluster's uploads are never aborted");
  } finally {
    await r.cleanup();
  }
});

Deno.test("an upload whose start the store does not say is never aborted", async () => {
  const r = await housekeepingRig();
  try {
    await r.sim.createMultipart(ownKey(r, 0n));
    r.clock.advance(30 * DAY);
    r.script.listMultipartUploads = async (prefix, store) =>
      (await store.listMultipartUploads(prefix)).map(({ key, uploadId }) => ({ key, uploadId }));
    const { out } = await sweep(r);
    assert.deepEqual(out.counts, { open: 1, aborted: 0 });
    assert.equal(open(r).length, 1);
  } finally {
    await r.cleanup();
  }
});

Deno.test("uploads a lying listing names outside the cluster's prefix are never aborted", async () => {
  const r = await housekeepingRig();
  try {
    for (const key of foreignKeys(r)) await r.sim.createMultipart(key);
    await r.sim.createMultipart(ownKey(r, 0n));
    r.clock.advance(2 * DAY);
    // The store ignores the prefix (MinIO takes it for one exact key; a proxy may drop it).
    r.script.listMultipartUploads = (_prefix, store) => store.listMultipartUploads("");
    const { out } = await sweep(r);
    assert.deepEqual(open(r), foreignKeys(r).sort(), "only the agent's own upload went");
    assert.deepEqual(out.counts, { open: 1, aborted: 1 });
    assert.equal(
      r.logged("the store listed multipart uploads outside tierd's prefix; left alone").length,
      1,
    );
  } finally {
    await r.cleanup();
  }
});

Deno.test("an abort refused part-way: the sweep stays due and the next run aborts the rest", async () => {
  const r = await housekeepingRig();
  try {
    const keys = [0n, 1000n, 2000n].map((s) => ownKey(r, s));
    for (const key of keys) await r.sim.createMultipart(key);
    r.clock.advance(2 * DAY);
    r.script.around = (call) =>
      call.op === "abort_multipart" && call.key === keys[1]
        ? Promise.reject(new StoreError("Auth", "access denied (test)", { op: "abortMultipart" }))
        : undefined;
    const { out, env } = await sweep(r);
    assert.equal(out.complete, false);
    assert.deepEqual(out.problems.map(describeProblem), ["multipart sweep: access denied (test)"]);
    assert.equal(out.problems[0].storeFault, false, "a refusal is not an outage");
    assert.deepEqual(open(r), keys.slice(1), "stopped at the refused one");
    assert.equal(env.state.multipart.lastSweep, undefined);
    assert.equal(multipartSweepDue(env, r.clock.now()), true);

    r.honest();
    const { out: next } = await sweep(r, { state: env.state });
    assert.equal(next.complete, true);
    assert.deepEqual(open(r), []);
  } finally {
    await r.cleanup();
  }
});

Deno.test("the request quota spent mid-sweep: not an error, the next runs go on", async () => {
  const r = await housekeepingRig();
  try {
    const keys = [0n, 1000n, 2000n, 3000n, 4000n].map((s) => ownKey(r, s));
    for (const key of keys) await r.sim.createMultipart(key);
    r.clock.advance(2 * DAY);
    let state = emptyHousekeepingState();
    let runs = 0;
    while (open(r).length > 0) {
      assert.ok(++runs < 10, "the sweep never finished");
      const before = open(r).length;
      const { out, env } = await sweep(r, { state, quota: 3 });
      state = env.state;
      assert.deepEqual(out.problems, []);
      assert.ok(before - open(r).length <= 2, "one listing and at most two aborts a run");
      if (open(r).length > 0) assert.equal(out.complete, false);
    }
    assert.equal(runs, 3);
    assert.equal(state.multipart.lastSweep, r.clock.now());
  } finally {
    await r.cleanup();
  }
});

Deno.test("the multipart sweep is due once per housekeeping interval", async () => {
  const r = await housekeepingRig();
  try {
    const env = r.env();
    env.dispose();
    const every = r.config.tiered_storage.housekeeping.interval;
    assert.equal(multipartSweepDue(env, r.clock.now()), true, "never swept");
    env.state.multipart.lastSweep = r.clock.now();
    assert.equal(multipartSweepDue(env, r.clock.now() + every - 1), false);
    assert.equal(multipartSweepDue(env, r.clock.now() + every), true);
  } finally {
    await r.cleanup();
  }
});
