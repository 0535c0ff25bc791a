// Holding a key space, on the fs store (the real file protocol, with its cross-process key lock)
// and the sim store: the first agent creates the owner record; a second is refused, told who
// owns it; a takeover fences the first, whose next write or delete fails and whose listeners
// hear of it once; the fenced store lets reads through and sends no write; a removed record is
// claimed again; writes are recorded in the record at most once a heartbeat.
import assert from "node:assert/strict";
import { FsStore } from "../../providers/fs/store.ts";
import { RetryingStore } from "../../providers/retrying_store.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import { ownerKey } from "../../src/layout/object_keys.ts";
import { fencedStore } from "../../src/ownership/fenced_store.ts";
import { type AgentIdentity, newAgentId } from "../../src/ownership/identity.ts";
import { KeySpaceFenced, KeySpaceLease, KeySpaceOwned } from "../../src/ownership/lease.ts";
import { decodeOwnerRecord } from "../../src/ownership/owner_record.ts";
import { silentLogger } from "../../src/log.ts";
import { FakeClock } from "../_fake_clock.ts";
import { tempDir } from "../_util.ts";

const KS = { prefix: "iggy", clusterId: "local" };

function identity(host: string): AgentIdentity {
  return { agentId: newAgentId(), createdAt: 0, host };
}

function leaseOn(store: ObjectStore, clock: FakeClock, host: string): KeySpaceLease {
  return new KeySpaceLease({
    store: new RetryingStore(store, { clock }),
    keySpace: KS,
    identity: identity(host),
    clock,
    logger: silentLogger,
    describe: `${store.kind} store`,
  });
}

async function recordIn(store: ObjectStore) {
  return decodeOwnerRecord(ownerKey(KS), (await store.get(ownerKey(KS))).bytes);
}

for (const kind of ["fs", "sim"] as const) {
  const open = async (): Promise<{ store: ObjectStore; done: () => Promise<void> }> => {
    if (kind === "sim") return { store: new SimStore(), done: () => Promise.resolve() };
    const dir = await tempDir();
    return { store: new FsStore({ root: dir.path }), done: dir.cleanup };
  };

  Deno.test(`${kind}: the first agent owns the key space; a second is refused, told who, when`, async () => {
    const { store, done } = await open();
    try {
      const clock = new FakeClock();
      const a = leaseOn(store, clock, "broker-a");
      const claimed = await a.claim();
      assert.equal(claimed.kind, "created");
      assert.equal((await recordIn(store)).agentId, a.agentId);
      assert.equal((await a.claim()).kind, "ours", "claiming again keeps it");
      const b = leaseOn(store, clock, "broker-b");
      const refused = await b.claim().then(() => undefined, (e) => e);
      assert.ok(refused instanceof KeySpaceOwned);
      assert.match(refused.message, new RegExp(`agent ${a.agentId} on host broker-a`));
      assert.match(refused.message, /last wrote \d{4}-/);
      assert.match(refused.message, /agent\.cluster_id/);
      assert.equal((await recordIn(store)).agentId, a.agentId, "the refusal wrote nothing");
    } finally {
      await done();
    }
  });

  Deno.test(`${kind}: a takeover fences the old owner: its next write and delete fail, once told`, async () => {
    const { store, done } = await open();
    try {
      const clock = new FakeClock();
      const a = leaseOn(store, clock, "broker-a");
      await a.claim();
      const fencedA = fencedStore(store, a);
      await fencedA.put("iggy/local/1/1/0/x.log", new Uint8Array([1]));
      const told: KeySpaceFenced[] = [];
      a.onFenced((e) => told.push(e));

      const b = leaseOn(store, clock, "broker-b");
      const taken = await b.claim({ takeOver: true });
      assert.equal(taken.kind, "taken-over");
      const record = await recordIn(store);
      assert.equal(record.agentId, b.agentId);
      assert.deepEqual(record.previous.map((p) => [p.agentId, p.host]), [[a.agentId, "broker-a"]]);
      assert.deepEqual(b.lineage(), new Set([a.agentId, b.agentId]));

      // A delete always asks the record afresh: refused at once, nothing deleted.
      await assert.rejects(fencedA.deleteMany(["iggy/local/1/1/0/x.log"]), KeySpaceFenced);
      assert.equal((await store.head("iggy/local/1/1/0/x.log")).size, 1);
      // Once fenced, every write is refused without asking the store.
      clock.advance(10_000);
      await assert.rejects(
        fencedA.put("iggy/local/1/1/0/y.log", new Uint8Array([2])),
        /taken over/,
      );
      await assert.rejects(store.head("iggy/local/1/1/0/y.log"), StoreError);
      assert.equal(told.length, 1, "the listeners hear of it once");
      assert.match(
        told[0].message,
        new RegExp(`taken over by agent ${b.agentId} on host broker-b`),
      );
      // Reads still go through.
      assert.equal((await fencedA.get("iggy/local/1/1/0/x.log")).bytes[0], 1);
      // The new owner writes; the old one's claim is refused with the new owner named.
      await fencedStore(store, b).put("iggy/local/1/1/0/z.log", new Uint8Array([3]));
      await assert.rejects(a.claim(), KeySpaceOwned);
    } finally {
      await done();
    }
  });

  Deno.test(`${kind}: the old owner's next write after a takeover is refused; nothing is written`, async () => {
    const { store, done } = await open();
    try {
      const clock = new FakeClock();
      const a = leaseOn(store, clock, "broker-a");
      await a.claim();
      const fencedA = fencedStore(store, a);
      await fencedA.put("k1", new Uint8Array([1]));
      await leaseOn(store, clock, "broker-b").claim({ takeOver: true });
      await assert.rejects(fencedA.put("k2", new Uint8Array([2])), KeySpaceFenced);
      await assert.rejects(store.head("k2"), StoreError, "nothing written once fenced");
      await assert.rejects(fencedA.createMultipart("k3"), KeySpaceFenced);
    } finally {
      await done();
    }
  });

  Deno.test(`${kind}: writes are recorded in the owner record once a heartbeat; a removed record is claimed again`, async () => {
    const { store, done } = await open();
    try {
      const clock = new FakeClock();
      const a = leaseOn(store, clock, "broker-a");
      await a.claim();
      const first = (await recordIn(store)).lastWrite;
      const fencedA = fencedStore(store, a);
      clock.advance(30_000);
      await fencedA.put("k1", new Uint8Array([1]));
      assert.equal((await recordIn(store)).lastWrite, first, "not yet: a heartbeat is a minute");
      clock.advance(31_000);
      await fencedA.put("k2", new Uint8Array([2]));
      assert.equal((await recordIn(store)).lastWrite, clock.now(), "recorded with this write");
      // Removed by hand: the owner claims it again on its next write, its lineage kept.
      const before = await recordIn(store);
      await store.deleteMany([ownerKey(KS)]);
      clock.advance(61_000);
      await fencedA.put("k3", new Uint8Array([3]));
      const again = await recordIn(store);
      assert.equal(again.agentId, a.agentId);
      assert.deepEqual(again.previous, before.previous);
      assert.equal(again.since, before.since);
    } finally {
      await done();
    }
  });
}

Deno.test("two agents claiming an empty key space at once: exactly one owns it", async () => {
  for (let round = 0; round < 20; round++) {
    const store = new SimStore({ seed: round, faults: { latencyMs: [0, 3] } });
    const clock = new FakeClock();
    const agents = [leaseOn(store, clock, "a"), leaseOn(store, clock, "b")];
    const outcomes = await Promise.allSettled(agents.map((l) => l.claim()));
    const won = outcomes.filter((o) => o.status === "fulfilled");
    assert.equal(won.length, 1, `round ${round}: ${JSON.stringify(outcomes.map((o) => o.status))}`);
    const lost = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
    assert.ok(lost.reason instanceof KeySpaceOwned);
    const record = await recordIn(store);
    assert.equal(
      record.agentId,
      agents[outcomes.indexOf(won[0])].agentId,
      "the record names the winner",
    );
  }
});
