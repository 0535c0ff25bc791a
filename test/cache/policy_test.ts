// The eviction policy: the budget holds under any sequence of reservations, and victims go in
// the documented order (unread prefetches, then cold chunks, then the main LRU).
import assert from "node:assert/strict";
import fc from "fast-check";
import { type AdmissionKind, EvictionPolicy, type Reservation } from "../../src/cache/policy.ts";
import { readingClock } from "../_fake_clock.ts";

const budget = { bytes: 1000, objects: 5, lowWatermarkPercent: 50, trimMinInterval: 0 };

Deno.test("reserve + commit never exceed the bytes or the file count", () => {
  const op = fc.oneof(
    fc.record({
      op: fc.constant("reserve" as const),
      bytes: fc.integer({ min: 1, max: 600 }),
      kind: fc.constantFrom<AdmissionKind>("read", "prefetch", "prefetch_cold"),
      tier: fc.constantFrom("prefetched" as const, "cold" as const, "main" as const),
    }),
    fc.record({ op: fc.constant("settle" as const), commit: fc.boolean(), i: fc.nat() }),
    fc.record({ op: fc.constant("touch" as const), hot: fc.boolean(), i: fc.nat() }),
  );
  fc.assert(
    fc.property(
      fc.array(op, { maxLength: 80 }),
      fc.integer({ min: 0, max: 100 }),
      fc.integer({ min: 1, max: 99 }),
      (ops, interval, low) => {
        let now = 0;
        const policy = new EvictionPolicy(
          { ...budget, trimMinInterval: interval, lowWatermarkPercent: low },
          {
            clock: readingClock(() => now++),
            onChange: (u) => {
              assert.ok(u.bytes + u.reservedBytes <= budget.bytes, "bytes within budget");
              assert.ok(u.objects + u.reservedObjects <= budget.objects, "files within budget");
            },
          },
        );
        const open: { r: Reservation; tier: "prefetched" | "cold" | "main" }[] = [];
        const names: string[] = [];
        let n = 0;
        for (const o of ops) {
          if (o.op === "reserve") {
            const got = policy.reserve(o.bytes, o.kind);
            if (got) open.push({ r: got.reservation, tier: o.tier });
            for (const v of got?.victims ?? []) assert.equal(policy.peek(v.name), undefined);
          } else if (o.op === "settle" && open.length > 0) {
            const [{ r, tier }] = open.splice(o.i % open.length, 1);
            if (o.commit) {
              const name = `c${n++}`;
              policy.commit(r, name, tier);
              names.push(name);
            } else policy.release(r);
          } else if (o.op === "touch" && names.length > 0) {
            policy.touch(names[o.i % names.length], o.hot ? "hot" : "cold");
          }
        }
        const u = policy.usage();
        const listed = [...policy.entries()];
        assert.equal(listed.length, u.objects);
        assert.equal(listed.reduce((s, e) => s + e.bytes, 0), u.bytes);
      },
    ),
    { numRuns: 300 },
  );
});

function filled(tiers: Record<string, "prefetched" | "cold" | "main">, interval = 1e9) {
  let now = 0;
  const policy = new EvictionPolicy(
    { bytes: 500, objects: 100, lowWatermarkPercent: 40, trimMinInterval: interval },
    { clock: readingClock(() => now += 1000) },
  );
  for (const [name, tier] of Object.entries(tiers)) {
    policy.commit(policy.reserve(100, "read")!.reservation, name, tier);
  }
  return policy;
}

Deno.test("victims: unread prefetches first, then cold chunks, then the least recent of main", () => {
  const policy = filled({ m1: "main", p1: "prefetched", c1: "cold", m2: "main", p2: "prefetched" });
  // A bulk trim happens on the first full reservation (the interval has never passed): down to
  // 40 % = 200 bytes, with the 100 reserved — so 4 of the 5 go.
  const first = policy.reserve(100, "read")!;
  assert.deepEqual(first.victims.map((v) => [v.name, v.reason]), [
    ["p1", "prefetch_unread"],
    ["p2", "prefetch_unread"],
    ["c1", "cold"],
    ["m1", "budget"],
  ]);
});

Deno.test("within the trim interval only the room needed is made", () => {
  const policy = filled(
    { m1: "main", p1: "prefetched", c1: "cold", m2: "main", p2: "prefetched" },
    1e12,
  );
  policy.trim(); // a bulk trim just happened: down to 40 %, m1 and m2 are left
  for (const name of ["x1", "x2", "x3"]) {
    policy.commit(policy.reserve(100, "read")!.reservation, name, "main");
  }
  assert.equal(policy.usage().bytes, 500);
  const got = policy.reserve(100, "read")!;
  assert.equal(got.victims.length, 1);
});

Deno.test("readahead never evicts an unread prefetch, and a cold reader's readahead only cold chunks", () => {
  const policy = filled(
    { p1: "prefetched", p2: "prefetched", m1: "main", m2: "main", m3: "main" },
    1e12,
  );
  policy.trim(); // leaves m2, m3
  for (const name of ["p3", "p4", "p5"]) {
    policy.commit(policy.reserve(100, "read")!.reservation, name, "prefetched");
  }
  assert.equal(policy.reserve(100, "prefetch_cold"), undefined, "no cold chunk to take");
  const got = policy.reserve(100, "prefetch")!;
  assert.deepEqual(got.victims.map((v) => v.reason), ["budget"]);
  assert.equal(policy.peek("p3")?.tier, "prefetched");
});

Deno.test("a hot read promotes to main; a cold read never refreshes main", () => {
  const policy = filled({ m1: "main", m2: "main", p1: "prefetched", c1: "cold" }, 1e12);
  policy.touch("p1", "cold");
  assert.equal(policy.peek("p1")?.tier, "cold");
  policy.touch("c1", "hot");
  assert.equal(policy.peek("c1")?.tier, "main");
  policy.touch("m1", "cold"); // must not make m1 more recent than m2
  assert.deepEqual([...policy.entries()].map((e) => e.name), ["p1", "m1", "m2", "c1"]);
  policy.touch("m1", "hot");
  assert.deepEqual([...policy.entries()].map((e) => e.name), ["p1", "m2", "c1", "m1"]);
});
