// The housekeeper on the sim store, every job together: each run sends at most `request_quota`
// requests, the jobs go on from where the last run stopped — across a restart too (the state in
// `housekeeping.json`) — and when all is done exactly the retired generation and the abandoned
// upload are gone: the live copies, the current manifest and everything not the agent's are as
// they were.
import assert from "node:assert/strict";
import { partitionRoot, segmentKeys } from "../../../src/layout/object_keys.ts";
import { incarnationHex } from "../../../src/layout/partition.ts";
import { retiredOf, segmentsOf } from "../../../src/state/segment_state.ts";
import { describeProblem } from "../../../src/tier/problem.ts";
import { Housekeeper } from "../../../src/tier/housekeeping/housekeeper.ts";
import type { JobOutcome } from "../../../src/tier/housekeeping/job.ts";
import { tombstoneKey } from "../../../src/tier/retirement.ts";
import {
  copyAll,
  DAY,
  type HousekeepingRig,
  housekeepingRig,
  plant,
  purge,
  snapshot,
} from "./_rig.ts";

const QUOTA = 4;

function housekeeper(r: HousekeepingRig): Housekeeper {
  return new Housekeeper({
    config: r.config,
    store: r.store,
    clock: r.clock,
    logger: r.ctx.log,
    observer: r.observer,
    keySpace: r.keySpace,
    targets: () => [r.tended()],
  });
}

Deno.test("every job within the request quota, run after run and across a restart; in the end only the retired generation and the abandoned upload are gone", async () => {
  const r = await housekeepingRig({
    config: (c) => void (c.tiered_storage.housekeeping.request_quota = QUOTA),
  });
  try {
    await copyAll(r);
    const retired = await purge(r);
    await copyAll(r);
    const root = partitionRoot(r.ledger.location());
    const stranger = `${root}${incarnationHex(0x5eed5eed5eed5eedn)}-0/00000000000000000000.log`;
    await plant(r, stranger);
    const abandoned = segmentKeys(r.ledger.location(), 999_000n).log;
    await r.sim.createMultipart(abandoned);
    const foreignUpload = "not-tierd/upload.bin";
    await r.sim.createMultipart(foreignUpload);
    const retiredDir = `${root}${incarnationHex(retired.incarnation)}-${retired.generation}/`;
    const gone = [...r.sim.objects.keys()].filter((k) => k.startsWith(retiredDir));
    r.clock.advance(2 * DAY);
    const before = snapshot(r);

    let heads: string[] = [];
    r.script.around = (call) => void (call.op === "head" && heads.push(call.key));
    const firstCopy = r.ledger.keys(segmentsOf(r.ledger.state, r.ledger.state.generation)[0].start);
    let hk = housekeeper(r);
    const done = new Set<string>();
    for (let run = 0; done.size < 4; run++) {
      assert.ok(run < 40, `not done after 40 runs: ${[...done]}`);
      heads = [];
      if (run === 2) {
        assert.ok(!done.has("verify"), "the verify pass spans the restart");
        hk = housekeeper(r); // a restart: the state comes back from its file
      }
      const sent = r.sim.requestCount();
      const jobs: JobOutcome[] = (await hk.maybeRun({ force: true })) ?? [];
      const used = r.sim.requestCount() - sent;
      assert.ok(used <= QUOTA, `run ${run + 1} sent ${used} requests, quota ${QUOTA}`);
      for (const j of jobs) {
        assert.deepEqual(j.problems, [], `${j.job}: ${j.problems.map(describeProblem)}`);
        if (j.complete) done.add(j.job);
      }
      if (run === 2) {
        assert.ok(heads.length > 0);
        assert.ok(!heads.includes(firstCopy.log), "after the restart, verify went on, not over");
      }
    }
    assert.deepEqual([...done].sort(), ["manifest", "multipart_sweep", "orphan_sweep", "verify"]);
    assert.deepEqual(retiredOf(r.ledger.state), []);
    assert.equal(hk.status().unrepairable, 0);

    const after = snapshot(r);
    const expected = new Map(before);
    for (const key of gone) expected.delete(key);
    const written = [...after.keys()].filter((k) => !before.has(k));
    assert.deepEqual(
      written,
      [`${r.keySpace.prefix}/${r.keySpace.clusterId}/meta/0/0/0/${
        incarnationHex(r.ledger.state.incarnation!)
      }-${r.ledger.state.generation}/manifest.json`],
      "the current manifest is the one key added",
    );
    assert.equal(after.has(tombstoneKey(r.ledger, retired)), false, "the tombstone went last");
    for (const [key, version] of expected) assert.equal(after.get(key), version, key);
    assert.ok(after.has(stranger));
    assert.deepEqual(
      [...r.sim.uploads.values()].map((u) => u.key),
      [foreignUpload],
      "the abandoned upload aborted, the foreign one left",
    );
  } finally {
    await r.cleanup();
  }
});
