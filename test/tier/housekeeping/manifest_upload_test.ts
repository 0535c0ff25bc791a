// The manifest job on the sim store: it writes one key per partition, the current incarnation
// and generation's `manifest.json` — never a retired generation's tombstone, never anything
// else — listing the verified copies (not a failed one), the ranges lost before upload and the
// holes. It is rewritten only when what it lists changed, at most every
// `manifest_upload_interval`; a failed upload is not remembered as done, so the next run
// writes it.
import assert from "node:assert/strict";
import { StoreError } from "../../../providers/types.ts";
import { decodeManifest } from "../../../src/layout/manifest.ts";
import { manifestKey } from "../../../src/layout/object_keys.ts";
import { segmentsOf } from "../../../src/state/segment_state.ts";
import { describeProblem } from "../../../src/tier/problem.ts";
import { manifestsDue, uploadManifests } from "../../../src/tier/housekeeping/manifest_upload.ts";
import { emptyHousekeepingState } from "../../../src/tier/housekeeping/state.ts";
import { writeTombstone } from "../../../src/tier/retirement.ts";
import { recordDangling } from "../_phase_rig.ts";
import { copyAll, type HousekeepingRig, housekeepingRig, MINUTE, purge, snapshot } from "./_rig.ts";

async function upload(r: HousekeepingRig, o: Parameters<HousekeepingRig["env"]>[0] = {}) {
  const env = r.env(o);
  try {
    return { out: await uploadManifests(env), env };
  } finally {
    env.dispose();
  }
}

Deno.test("the manifest lists the current generation's verified copies, losses and holes, and is the only key written; a retired generation's tombstone stays as it is", async () => {
  const r = await housekeepingRig();
  try {
    await copyAll(r);
    const retired = await purge(r);
    await writeTombstone(r.store.inner, r.ledger, retired, undefined, r.clock.now());
    await copyAll(r);
    const copies = segmentsOf(r.ledger.state, r.ledger.state.generation);
    // After the copies: a failed copy, a loss and a hole, as the journal records them.
    const next = copies[copies.length - 1].meta!.endOffset + 1n;
    const g = r.ledger.state.generation;
    await recordDangling(r, next);
    await r.ledger.record(
      {
        type: "lost_before_upload",
        segment: next + 100n,
        generation: g,
        endOffset: next + 149n,
        at: 1,
      },
      {
        type: "hole",
        segment: next + 150n,
        generation: g,
        endOffset: next + 199n,
        reason: "test",
        at: 1,
      },
    );
    const before = snapshot(r);
    const { out } = await upload(r);
    assert.deepEqual(out, {
      job: "manifest",
      complete: true,
      counts: { uploaded: 1 },
      problems: [],
    });
    const key = manifestKey(r.ledger.location());
    const after = snapshot(r);
    assert.deepEqual(
      [...after.keys()].filter((k) => after.get(k) !== before.get(k)),
      [key],
      "one key written: the current generation's manifest",
    );
    const m = decodeManifest(key, r.sim.objects.get(key)!.bytes);
    assert.equal(m.incarnation, r.ledger.state.incarnation);
    assert.equal(m.generation, g);
    assert.equal(m.retired, undefined);
    assert.equal(m.floor, r.ledger.state.floor);
    assert.deepEqual(m.segments.map((s) => s.start), copies.map((c) => c.start));
    assert.deepEqual(m.lost, [{ from: next + 100n, to: next + 149n }]);
    assert.deepEqual(m.holes, [{ from: next + 150n, to: next + 199n }]);
  } finally {
    await r.cleanup();
  }
});

Deno.test("rewritten only when it changed, at most every manifest_upload_interval", async () => {
  const r = await housekeepingRig();
  try {
    await copyAll(r);
    const first = await upload(r);
    const state = first.env.state;
    const key = manifestKey(r.ledger.location());
    const version = () => r.sim.objects.get(key)!.version;
    const v1 = version();
    r.clock.advance(10 * MINUTE);
    assert.equal(manifestsDue(first.env, r.clock.now()), false, "unchanged");
    assert.equal((await upload(r, { state })).out.counts.uploaded, 0);
    assert.equal(version(), v1);

    await r.ledger.record({
      type: "evicted",
      segment: segmentsOf(r.ledger.state)[0].start,
      generation: 0n,
      at: r.clock.now(),
    });
    state.manifests.uploaded[r.ledger.label].at = r.clock.now();
    r.clock.advance(MINUTE - 1);
    assert.equal((await upload(r, { state })).out.counts.uploaded, 0, "changed, but too soon");
    r.clock.advance(1);
    assert.equal((await upload(r, { state })).out.counts.uploaded, 1);
    const m = decodeManifest(key, r.sim.objects.get(key)!.bytes);
    assert.equal(m.segments[0].evicted, true);
  } finally {
    await r.cleanup();
  }
});

Deno.test("a failed upload is not remembered as done: the next run writes it", async () => {
  const r = await housekeepingRig();
  try {
    await copyAll(r);
    const key = manifestKey(r.ledger.location());
    r.script.around = (call) =>
      call.op === "put" && call.key === key
        ? Promise.reject(new StoreError("Auth", "access denied (test)", { op: "put" }))
        : undefined;
    const state = emptyHousekeepingState();
    const { out, env } = await upload(r, { state });
    assert.equal(out.complete, false);
    assert.deepEqual(out.problems.map(describeProblem), [`${key}: access denied (test)`]);
    assert.equal(r.sim.objects.has(key), false);
    assert.deepEqual(state.manifests.uploaded, {});
    assert.equal(manifestsDue(env, r.clock.now()), true);
    r.honest();
    assert.equal((await upload(r, { state })).out.counts.uploaded, 1);
    assert.ok(r.sim.objects.has(key));
  } finally {
    await r.cleanup();
  }
});
