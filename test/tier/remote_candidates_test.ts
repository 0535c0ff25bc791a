// Which of a partition's incarnations and generations in the bucket may be the partition: never
// chosen by date. A retired one (its owner's tombstone) and one whose manifest another agent
// wrote are set aside with why; one candidate left is chosen; several are listed and none is
// chosen unless the operator names one; an incarnation planted with the newest objects changes
// nothing about that.
import assert from "node:assert/strict";
import { SimStore } from "../../providers/sim/store.ts";
import { encodeManifest, type Manifest } from "../../src/layout/manifest.ts";
import { manifestKey, segmentKeys } from "../../src/layout/object_keys.ts";
import {
  chooseCandidate,
  describeCandidate,
  findCandidates,
} from "../../src/tier/remote_candidates.ts";

const KS = { prefix: "iggy", clusterId: "local" };
const ID = { stream: 1, topic: 2, partition: 3 };
const ME = "0123456789abcdef0123456789abcdef";
const OTHER = "fedcba9876543210fedcba9876543210";

async function segment(store: SimStore, incarnation: bigint, generation: bigint, start: bigint) {
  const keys = segmentKeys({ ...KS, ...ID, incarnation, generation }, start);
  await store.put(keys.log, new Uint8Array([1]));
  await store.put(keys.index, new Uint8Array([2]));
}

async function manifest(
  store: SimStore,
  incarnation: bigint,
  generation: bigint,
  extra: Partial<Manifest>,
) {
  const m: Manifest = {
    ...ID,
    clusterId: KS.clusterId,
    incarnation,
    generation,
    floor: -1n,
    writtenAt: 1_000,
    tierdVersion: "test",
    segments: [],
    ...extra,
  };
  await store.put(manifestKey({ ...KS, ...ID, incarnation, generation }), encodeManifest(m));
}

Deno.test("one incarnation and generation in the bucket is chosen; nothing at all is none", async () => {
  const store = new SimStore();
  assert.equal(chooseCandidate(await findCandidates(store, KS, ID)).kind, "none");
  await segment(store, 7n, 0n, 0n);
  await segment(store, 7n, 0n, 100n);
  const set = await findCandidates(store, KS, ID, { lineage: new Set([ME]) });
  const choice = chooseCandidate(set);
  assert.equal(choice.kind, "chosen");
  if (choice.kind === "chosen") {
    assert.equal(choice.candidate.incarnation, 7n);
    assert.equal(choice.candidate.objects.logs.size, 2);
    assert.match(
      describeCandidate(choice.candidate),
      /incarnation 0000000000000007 generation 0, 2 segment object\(s\) from offset 0/,
    );
  }
});

Deno.test("retired generations and other agents' manifests are set aside, saying why", async () => {
  const store = new SimStore();
  await segment(store, 7n, 0n, 0n); // purged: retired by its owner
  await manifest(store, 7n, 0n, { owner: ME, retired: { at: 5_000, reason: "purged: …" } });
  await segment(store, 7n, 1n, 0n); // the current generation, no manifest yet
  await segment(store, 9n, 0n, 0n); // another agent's (a manifest of theirs)
  await manifest(store, 9n, 0n, { owner: OTHER, segments: [] });
  const set = await findCandidates(store, KS, ID, { lineage: new Set([ME]) });
  assert.deepEqual(set.eligible.map((c) => [c.incarnation, c.generation]), [[7n, 1n]]);
  const why = new Map(
    set.excluded.map((e) => [`${e.candidate.incarnation}-${e.candidate.generation}`, e.reason]),
  );
  assert.match(why.get("7-0")!, /retired by its owner at .*purged/);
  assert.match(why.get("9-0")!, new RegExp(`written by agent ${OTHER}, never an owner`));
  const choice = chooseCandidate(set);
  assert.equal(choice.kind, "chosen");
  if (choice.kind === "chosen") assert.match(choice.why, /the others were retired/);
  // A previous owner's manifests are this key space's: in the lineage, it competes.
  const withOther = await findCandidates(store, KS, ID, { lineage: new Set([ME, OTHER]) });
  assert.equal(chooseCandidate(withOther).kind, "competing");
});

Deno.test("several candidates compete: none is chosen by date; the operator may name one", async () => {
  const store = new SimStore();
  await segment(store, 7n, 0n, 0n);
  await segment(store, 7n, 0n, 100n);
  // Planted later: newer objects, a higher generation and another incarnation.
  await segment(store, 7n, 3n, 0n);
  await segment(store, 8n, 0n, 0n);
  const set = await findCandidates(store, KS, ID, { lineage: new Set([ME]) });
  const choice = chooseCandidate(set);
  assert.equal(choice.kind, "competing");
  if (choice.kind === "competing") {
    assert.deepEqual(choice.candidates.map((c) => [c.incarnation, c.generation]), [
      [7n, 0n],
      [7n, 3n],
      [8n, 0n],
    ]);
  }
  const named = chooseCandidate(set, { incarnation: 7n, generation: 0n });
  assert.equal(named.kind, "chosen");
  if (named.kind === "chosen") {
    assert.equal(named.candidate.objects.logs.size, 2);
    assert.equal(named.why, "named by the operator");
  }
  assert.equal(chooseCandidate(set, { incarnation: 7n }).kind, "competing");
  assert.equal(chooseCandidate(set, { incarnation: 5n }).kind, "not-found");
});

Deno.test("a manifest whose objects are all gone is still a candidate (all of it a hole)", async () => {
  const store = new SimStore();
  await manifest(store, 7n, 0n, {
    owner: ME,
    segments: [{
      start: 0n,
      endOffset: 99n,
      size: 1,
      indexSize: 1,
      startTimestamp: 0n,
      endTimestamp: 0n,
      maxTimestamp: 0n,
      checksum: 0n,
      evicted: true,
    }],
  });
  const set = await findCandidates(store, KS, ID, { lineage: new Set([ME]) });
  assert.equal(set.eligible.length, 1);
  assert.equal(set.eligible[0].objects.logs.size, 0);
  assert.equal(set.eligible[0].manifest?.segments.length, 1);
});
