// The orphan sweep on the sim store, the one housekeeping job that deletes objects. It deletes
// exactly what this agent retired — a purged generation's, a recreated topic's old
// incarnation's objects, their tombstone last — and only once `orphan_grace` has passed since.
// It never deletes the current incarnation and generation (whatever the journal says), an
// incarnation the journal never retired, another partition's, another cluster's or another
// prefix's objects, or a key that only starts like the retired directory; and it deletes nothing
// at all from a listing that loops, goes backwards, breaks off or names keys outside the prefix
// it asked for. A fault part-way (a refused delete, the request quota spent, the tombstone not
// written, a crash before the journal) leaves the retired generation retired, its tombstone in
// place until every other object is gone, and the next run finishes the job.
import assert from "node:assert/strict";
import { StoreError } from "../../../providers/types.ts";
import { decodeManifest } from "../../../src/layout/manifest.ts";
import { partitionRoot } from "../../../src/layout/object_keys.ts";
import { incarnationHex } from "../../../src/layout/partition.ts";
import {
  type PartitionState,
  type RetiredGeneration,
  retiredKey,
  retiredOf,
} from "../../../src/state/segment_state.ts";
import { describeProblem } from "../../../src/tier/problem.ts";
import type { Tended } from "../../../src/tier/housekeeping/job.ts";
import { uploadManifests } from "../../../src/tier/housekeeping/manifest_upload.ts";
import { orphanSweepDue, sweepOrphans } from "../../../src/tier/housekeeping/orphan_sweep.ts";
import { emptyHousekeepingState } from "../../../src/tier/housekeeping/state.ts";
import type { PartitionLedger } from "../../../src/tier/partition_ledger.ts";
import { tombstoneKey } from "../../../src/tier/retirement.ts";
import {
  copyAll,
  DAY,
  HOUR,
  type HousekeepingRig,
  housekeepingRig,
  MINUTE,
  plant,
  purge,
  recreate,
  snapshot,
} from "./_rig.ts";

/** One sweep run in a fresh environment over `state`. */
async function sweep(r: HousekeepingRig, o: Parameters<HousekeepingRig["env"]>[0] = {}) {
  const env = r.env(o);
  try {
    return { out: await sweepOrphans(env), env };
  } finally {
    env.dispose();
  }
}

/** The keys under the directory of a retired (or any) incarnation and generation. */
function keysUnder(r: HousekeepingRig, incarnation: bigint, generation: bigint): string[] {
  const dir = `${partitionRoot(r.ledger.location())}${incarnationHex(incarnation)}-${generation}/`;
  return [...r.sim.objects.keys()].filter((k) => k.startsWith(dir));
}

/** Keys that look like the partition's objects but are not the agent's to delete. */
function strangers(r: HousekeepingRig, retired: RetiredGeneration): string[] {
  const root = partitionRoot(r.ledger.location());
  const dir = `${incarnationHex(retired.incarnation)}-${retired.generation}`;
  const seg = "00000000000000000000.log";
  const otherPartition = partitionRoot({ ...r.ledger.location(), partition: 1 });
  const otherCluster = partitionRoot({ ...r.ledger.location(), clusterId: "someone-else" });
  const otherPrefix = partitionRoot({ ...r.ledger.location(), prefix: "iggy-old" });
  return [
    `${root}${incarnationHex(0x5eed5eed5eed5eedn)}-0/${seg}`, // an incarnation it never had
    `${root}${dir}0/${seg}`, // starts like the retired directory: generation 10, 00, …
    `${root}${dir}.bak/${seg}`,
    `${root}${dir}`, // the directory's name itself, as an object
    `${otherPartition}${dir}/${seg}`, // the same incarnation id in another partition
    `${otherCluster}${dir}/${seg}`, // another cluster's key space
    `${otherPrefix}${dir}/${seg}`, // another prefix
    `not-tierd/${dir}/${seg}`,
  ];
}

/** A rig with generation 0 copied, then purged (retired) and generation 1 copied and manifested. */
async function purgedRig(): Promise<{ r: HousekeepingRig; retired: RetiredGeneration }> {
  const r = await housekeepingRig();
  await copyAll(r);
  const retired = await purge(r);
  await copyAll(r);
  const env = r.env();
  try {
    assert.equal((await uploadManifests(env)).counts.uploaded, 1);
  } finally {
    env.dispose();
  }
  for (const key of strangers(r, retired)) await plant(r, key);
  return { r, retired };
}

function assertOnlyGone(
  before: Map<string, string>,
  after: Map<string, string>,
  gone: string[],
): void {
  const expected = new Map(before);
  for (const key of gone) expected.delete(key);
  assert.deepEqual(
    [...after].sort(),
    [...expected].sort(),
    "exactly the retired generation's objects and its tombstone are gone; everything else is as it was",
  );
}

Deno.test("a purged generation is swept only after orphan_grace: its objects and tombstone, nothing else", async () => {
  const { r, retired } = await purgedRig();
  try {
    const current = r.ledger.location();
    const oldKeys = keysUnder(r, retired.incarnation, retired.generation);
    assert.ok(oldKeys.length >= 4, "the purged generation has copies");
    assert.ok(keysUnder(r, current.incarnation, current.generation).length >= 4);

    // Within the grace: the tombstone is written, nothing deleted.
    r.clock.advance(DAY - MINUTE);
    const before = snapshot(r);
    const first = await sweep(r);
    assert.deepEqual(first.out.problems, []);
    assert.deepEqual(first.out.counts, { retired: 1, waiting: 1, swept: 0, objects: 0 });
    assert.equal(r.sim.requestCount("deleteMany"), 0);
    const tombstone = tombstoneKey(r.ledger, retired);
    const written = decodeManifest(tombstone, r.sim.objects.get(tombstone)!.bytes);
    assert.deepEqual(written.retired, { at: retired.at, reason: retired.reason });
    assert.equal(written.generation, retired.generation);
    assertOnlyGone(before, new Map([...snapshot(r)].filter(([k]) => k !== tombstone)), []);

    // The grace over: the retired generation goes, its records with it.
    r.clock.advance(MINUTE);
    const beforeSweep = snapshot(r);
    const second = await sweep(r, { state: first.env.state });
    assert.deepEqual(second.out.problems, []);
    assert.equal(second.out.complete, true);
    assert.deepEqual(second.out.counts, {
      retired: 1,
      waiting: 0,
      swept: 1,
      objects: oldKeys.length + 1,
    });
    assertOnlyGone(beforeSweep, snapshot(r), [...oldKeys, tombstone]);
    assert.deepEqual(retiredOf(r.ledger.state), []);
    assert.equal(r.ledger.state.segments.has(retired.generation), false);
    assert.ok(r.ledger.state.segments.has(current.generation), "the current records stay");
    const swept = (await r.events()).filter((e) => e.type === "retired_swept");
    assert.equal(swept.length, 1, "journaled once");
    assert.deepEqual(second.env.state.orphans.tombstoned, []);
    assert.equal(orphanSweepDue(second.env, r.clock.now() + DAY), false, "nothing left to sweep");

    // Nothing more is ever deleted: a later run finds nothing retired.
    r.clock.advance(7 * DAY);
    const after = snapshot(r);
    const third = await sweep(r, { state: second.env.state });
    assert.deepEqual(third.out.counts, { retired: 0, waiting: 0, swept: 0, objects: 0 });
    assert.deepEqual(snapshot(r), after);
  } finally {
    await r.cleanup();
  }
});

Deno.test("a recreated topic's old incarnation is swept, every retired generation of it; the new incarnation's objects stay", async () => {
  const r = await housekeepingRig();
  try {
    await copyAll(r);
    await purge(r);
    await copyAll(r);
    const old = await recreate(r);
    await copyAll(r);
    const retired = retiredOf(r.ledger.state);
    assert.deepEqual(
      retired.map((x) => [x.incarnation, x.generation]).sort(),
      [[old, 0n], [old, 1n]],
      "the purge retired generation 0; the recreate generation 1 (0 is already retired)",
    );
    const now = r.ledger.location();
    const gone = [
      ...keysUnder(r, old, 0n),
      ...keysUnder(r, old, 1n),
      ...retired.map((x) => tombstoneKey(r.ledger, x)),
    ];
    const { env: first } = await sweep(r); // tombstones
    r.clock.advance(DAY);
    const before = snapshot(r);
    const { out } = await sweep(r, { state: first.state });
    assert.deepEqual(out.problems, []);
    assert.equal(out.counts.swept, 2);
    assertOnlyGone(before, snapshot(r), gone);
    assert.ok(keysUnder(r, now.incarnation, now.generation).length >= 4, "the live copies stay");
  } finally {
    await r.cleanup();
  }
});

/** The ledger seen through a journal that names its own current pair as retired. */
function claimingCurrentRetired(ledger: PartitionLedger): PartitionLedger {
  const forged = (): PartitionState => {
    const s = ledger.state;
    const current: RetiredGeneration = {
      incarnation: s.incarnation!,
      generation: s.generation,
      reason: "forged",
      at: 0,
    };
    return {
      ...s,
      retired: new Map([...(s.retired ?? []), [
        retiredKey(current.incarnation, current.generation),
        current,
      ]]),
    };
  };
  return {
    get state() {
      return forged();
    },
    label: ledger.label,
    id: ledger.id,
    location: (g?: bigint) => ledger.location(g),
    keys: (start: bigint, g?: bigint) => ledger.keys(start, g),
    record: () => Promise.reject(new Error("the sweep journaled something")),
  } as unknown as PartitionLedger;
}

Deno.test("the current incarnation and generation are never swept, even when the journal says they are retired", async () => {
  const r = await housekeepingRig();
  try {
    await copyAll(r);
    const tended: Tended = { ...r.tended(), ledger: claimingCurrentRetired(r.ledger) };
    r.clock.advance(30 * DAY);
    const before = snapshot(r);
    const { out } = await sweep(r, { targets: [tended] });
    assert.deepEqual(out.problems, []);
    assert.deepEqual(out.counts, { retired: 0, waiting: 0, swept: 0, objects: 0 });
    assert.deepEqual(snapshot(r), before, "nothing written, nothing deleted");
    assert.equal(r.sim.requestCount("deleteMany"), 0);
  } finally {
    await r.cleanup();
  }
});

/** Listings that cannot be trusted, each for the retired generation's prefix only. */
const LYING_LISTINGS: {
  name: string;
  list: (r: HousekeepingRig) => NonNullable<HousekeepingRig["script"]["list"]>;
}[] = [
  {
    name: "keys outside the prefix asked for (a store that ignores the prefix)",
    list: () => async (_prefix, options, store) => await store.list("", options),
  },
  {
    name: "a continuation token that repeats (an endless listing)",
    list: () => async (prefix, options, store) => {
      const page = await store.list(prefix, { ...options, continuationToken: undefined });
      return { objects: page.objects.slice(0, 1), continuationToken: "again" };
    },
  },
  {
    name: "keys that go backwards from one page to the next",
    list: () => async (prefix, options, store) => {
      const all = (await store.list(prefix, { signal: options?.signal })).objects;
      if (options?.continuationToken === undefined) {
        return { objects: all.slice(2, 3), continuationToken: "second" };
      }
      return { objects: all.slice(0, 1) };
    },
  },
  {
    name: "a listing that breaks off after its first page",
    list: () => async (prefix, options, store) => {
      if (options?.continuationToken !== undefined) {
        throw new StoreError("Auth", "access denied on page 2 (test)", { op: "list" });
      }
      const page = await store.list(prefix, { signal: options?.signal });
      return { objects: page.objects.slice(0, 1), continuationToken: "next" };
    },
  },
];

for (const lie of LYING_LISTINGS) {
  Deno.test(`nothing is deleted from a listing with ${lie.name}; the next honest run sweeps`, async () => {
    const { r, retired } = await purgedRig();
    try {
      const { env: first } = await sweep(r); // tombstone written
      r.clock.advance(DAY);
      const retiredPrefix = `${partitionRoot(r.ledger.location())}${
        incarnationHex(retired.incarnation)
      }-${retired.generation}/`;
      const honestList = lie.list(r);
      r.script.list = (prefix, options, store) =>
        prefix === retiredPrefix ? honestList(prefix, options, store) : store.list(prefix, options);
      const before = snapshot(r);
      const { out, env } = await sweep(r, { state: first.state });
      assert.equal(out.complete, false);
      assert.deepEqual(out.problems.map((p) => p.kind), ["housekeeping"], JSON.stringify(out));
      assert.equal(out.counts.swept, 0);
      assert.equal(r.sim.requestCount("deleteMany"), 0, "no delete was even asked");
      assert.deepEqual(snapshot(r), before);
      assert.equal(retiredOf(r.ledger.state).length, 1, "still retired, not journaled swept");
      assert.equal(
        r.logged("sweep of a retired generation stopped; it goes on next run").length,
        1,
      );

      r.honest();
      const gone = [
        ...keysUnder(r, retired.incarnation, retired.generation),
        tombstoneKey(r.ledger, retired),
      ];
      const { out: next } = await sweep(r, { state: env.state });
      assert.deepEqual(next.problems, []);
      assert.equal(next.counts.swept, 1);
      assertOnlyGone(before, snapshot(r), gone);
    } finally {
      await r.cleanup();
    }
  });
}

Deno.test("a delete refused part-way keeps the tombstone until every other object is gone, and the next run finishes", async () => {
  const { r, retired } = await purgedRig();
  try {
    // More objects than one delete request takes (100), so the sweep needs several.
    const dir = `${partitionRoot(r.ledger.location())}${
      incarnationHex(retired.incarnation)
    }-${retired.generation}/`;
    for (let i = 0; i < 150; i++) {
      await plant(r, `${dir}${String(1_000_000 + i).padStart(20, "0")}.log`, "an old copy");
    }
    const { env: first } = await sweep(r);
    r.clock.advance(DAY);
    const tombstone = tombstoneKey(r.ledger, retired);
    const all = [...keysUnder(r, retired.incarnation, retired.generation), tombstone];
    let deletes = 0;
    r.script.around = (call) => {
      if (call.op !== "delete" || ++deletes !== 2) return undefined;
      return Promise.reject(
        new StoreError("Auth", "access denied (test)", { op: "deleteMany", key: call.key }),
      );
    };
    const before = snapshot(r);
    const { out, env } = await sweep(r, { state: first.state });
    assert.equal(out.complete, false);
    assert.equal(out.counts.swept, 0);
    assert.equal(out.problems.length, 1);
    assert.match(
      describeProblem(out.problems[0]),
      new RegExp(`^sweep of ${r.ledger.label} \\S+: access denied \\(test\\)`),
    );
    const left = snapshot(r);
    assert.equal(left.size, before.size - 100, "the first request's 100 keys went");
    assert.ok(left.has(tombstone), "the tombstone outlives the objects still there");
    assert.equal(retiredOf(r.ledger.state).length, 1);

    r.honest();
    const { out: next } = await sweep(r, { state: env.state });
    assert.deepEqual(next.problems, []);
    assert.equal(next.counts.swept, 1);
    assertOnlyGone(before, snapshot(r), all);
  } finally {
    await r.cleanup();
  }
});

Deno.test("a delete answered with per-key failures is a failed sweep: not journaled, done again next run", async () => {
  const { r, retired } = await purgedRig();
  try {
    const { env: first } = await sweep(r);
    r.clock.advance(DAY);
    const gone = [
      ...keysUnder(r, retired.incarnation, retired.generation),
      tombstoneKey(r.ledger, retired),
    ];
    r.script.around = (call) => {
      if (call.op !== "delete") return undefined;
      return Promise.resolve([{
        key: call.key,
        error: new StoreError("Auth", "AccessDenied (test)", { op: "deleteMany", key: call.key }),
      }]);
    };
    const before = snapshot(r);
    const { out, env } = await sweep(r, { state: first.state });
    assert.equal(out.complete, false);
    assert.equal(out.counts.swept, 0);
    assert.equal(retiredOf(r.ledger.state).length, 1);
    r.honest();
    const { out: next } = await sweep(r, { state: env.state });
    assert.equal(next.counts.swept, 1);
    assertOnlyGone(before, snapshot(r), gone);
  } finally {
    await r.cleanup();
  }
});

Deno.test("nothing is deleted while the tombstone cannot be written; once it is, the sweep goes on", async () => {
  const { r, retired } = await purgedRig();
  try {
    const tombstone = tombstoneKey(r.ledger, retired);
    r.script.around = (call) =>
      call.op === "put" && call.key === tombstone
        ? Promise.reject(new StoreError("Auth", "access denied (test)", { op: "put" }))
        : undefined;
    r.clock.advance(2 * DAY);
    const before = snapshot(r);
    const { out, env } = await sweep(r);
    assert.equal(out.complete, false);
    assert.equal(r.sim.requestCount("deleteMany"), 0);
    assert.deepEqual(snapshot(r), before);
    assert.deepEqual(env.state.orphans.tombstoned ?? [], []);
    r.honest();
    const gone = [...keysUnder(r, retired.incarnation, retired.generation), tombstone];
    const { out: next } = await sweep(r, { state: env.state });
    assert.equal(next.counts.swept, 1);
    assertOnlyGone(before, snapshot(r), gone);
  } finally {
    await r.cleanup();
  }
});

Deno.test("the request quota spent mid-sweep: stopped where it was, nothing journaled, the next runs finish", async () => {
  const { r, retired } = await purgedRig();
  try {
    const dir = `${partitionRoot(r.ledger.location())}${
      incarnationHex(retired.incarnation)
    }-${retired.generation}/`;
    for (let i = 0; i < 250; i++) {
      await plant(r, `${dir}${String(1_000_000 + i).padStart(20, "0")}.log`, "an old copy");
    }
    const tombstone = tombstoneKey(r.ledger, retired);
    const gone = [...keysUnder(r, retired.incarnation, retired.generation), tombstone];
    r.clock.advance(DAY);
    const before = snapshot(r);
    let state = emptyHousekeepingState();
    const runs: Map<string, string>[] = [];
    for (let run = 0; retiredOf(r.ledger.state).length > 0; run++) {
      assert.ok(run < 10, "the sweep never finished");
      // A run: the tombstone PUT (first run only), the listing, then one or two deletes.
      const { out, env } = await sweep(r, { state, quota: 3 });
      state = env.state;
      runs.push(snapshot(r));
      if (out.counts.swept === 0) {
        assert.equal(out.complete, false);
        assert.deepEqual(out.problems, [], "the quota is not an error");
        assert.ok(snapshot(r).has(tombstone), "the tombstone stays until the end");
      }
    }
    assert.ok(runs.length >= 2, `${runs.length} runs`);
    assertOnlyGone(before, snapshot(r), gone);
  } finally {
    await r.cleanup();
  }
});

Deno.test("a crash after the deletes, before the journal: the next run finds the directory empty and journals the sweep", async () => {
  const { r, retired } = await purgedRig();
  try {
    const { env: first } = await sweep(r);
    r.clock.advance(DAY);
    const tombstone = tombstoneKey(r.ledger, retired);
    // What the crashed run had done: every object deleted, the tombstone too.
    await r.sim.deleteMany([
      ...keysUnder(r, retired.incarnation, retired.generation),
      tombstone,
    ]);
    const before = snapshot(r);
    const { out } = await sweep(r, { state: first.state });
    assert.deepEqual(out.problems, []);
    assert.equal(out.counts.swept, 1);
    assert.equal(out.counts.objects, 1, "only the tombstone's key was left to ask for");
    assert.deepEqual(snapshot(r), before);
    assert.deepEqual(retiredOf(r.ledger.state), []);
  } finally {
    await r.cleanup();
  }
});

Deno.test("the sweep is due only while something is retired, every orphan_sweep_interval", async () => {
  const r = await housekeepingRig();
  try {
    await copyAll(r);
    const env = r.env();
    env.dispose();
    assert.equal(orphanSweepDue(env, r.clock.now()), false, "nothing retired");
    await purge(r);
    assert.equal(orphanSweepDue(env, r.clock.now()), true);
    env.state.orphans.lastSweep = r.clock.now();
    assert.equal(orphanSweepDue(env, r.clock.now() + HOUR - 1), false);
    assert.equal(orphanSweepDue(env, r.clock.now() + HOUR), true);
  } finally {
    await r.cleanup();
  }
});
