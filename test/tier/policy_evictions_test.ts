// `chooseEvictions` against its whole specification, on random local chains: what it picks is a
// prefix of the chain, of at most MAX_EVICTIONS_PER_PASS segments, each sealed, proven copied
// and ending at or below the floor (so never the active segment, nor anything after a segment
// that may not go), each one wanted gone by local retention when its turn came (old enough, or
// the partition still over `local_retention_size` with it) — and it stops only where the next
// segment fails one of those. Stricter retention, a later clock, a higher floor or more copies
// only ever add segments after the ones already chosen.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  chooseEvictions,
  type EvictionCandidate,
  type LocalRetention,
  MAX_EVICTIONS_PER_PASS,
} from "../../src/tier/policy.ts";

const NOW = 1_750_000_000_000;
const HOUR = 3_600_000;

/** A local chain, oldest first: contiguous offsets, the last segment always the active one. */
const chain = fc.array(
  fc.record({
    len: fc.integer({ min: 1, max: 50 }),
    size: fc.integer({ min: 1, max: 1000 }),
    /** How long before NOW its newest message was written (hours). */
    ageH: fc.integer({ min: 0, max: 100 }),
    /** Mostly copied. */
    copied: fc.integer({ min: 0, max: 4 }).map((n) => n > 0),
    sealed: fc.boolean(),
  }),
  { maxLength: 40 },
).map((parts) => {
  let start = 0n;
  return parts.map((p, i): EvictionCandidate => {
    const seg = {
      start,
      endOffset: start + BigInt(p.len) - 1n,
      size: p.size,
      maxTimestamp: BigInt(NOW - p.ageH * HOUR) * 1000n,
      copied: p.copied,
      // Sealed segments come first in a real chain, but nothing here relies on it.
      sealed: i < parts.length - 1 && p.sealed,
    };
    start += BigInt(p.len);
    return seg;
  });
});

/** Usually mostly sealed and copied, so long evictions happen often. */
const likelyChain = fc.oneof(
  chain,
  chain.map((c) => c.map((s, i) => ({ ...s, sealed: i < c.length - 1, copied: true }))),
);

const limitOf = (max: number) => fc.oneof(fc.constant(Infinity), fc.integer({ min: 0, max }));

const sum = (segs: EvictionCandidate[]) => segs.reduce((n, s) => n + s.size, 0);
const ageOf = (s: EvictionCandidate, now: number) => now - Number(s.maxTimestamp / 1000n);

/**
 * Local retention for a chain: unlimited, anything, or right at a boundary of the chain (the
 * age of one of its segments, the bytes of one of its suffixes), give or take one.
 */
function retentionFor(local: EvictionCandidate[], now: number): fc.Arbitrary<LocalRetention> {
  const at = (values: number[]) =>
    values.length === 0 ? fc.constant(0) : fc.tuple(
      fc.constantFrom(...values),
      fc.integer({
        min: -1,
        max: 1,
      }),
    ).map(([v, d]) => Math.max(0, v + d));
  return fc.record({
    ageMs: fc.oneof(limitOf(120 * HOUR), at(local.map((s) => ageOf(s, now)))),
    sizeBytes: fc.oneof(limitOf(40_000), at(local.map((_, k) => sum(local.slice(k))))),
  });
}

/** A floor anywhere from "nothing copied" to past the chain's end. */
function floorIn(c: EvictionCandidate[]): fc.Arbitrary<bigint> {
  const end = c.length === 0 ? 0n : c[c.length - 1].endOffset;
  return fc.bigInt({ min: -1n, max: end + 10n });
}

const case_ = fc.tuple(likelyChain, fc.integer({ min: NOW - 10 * HOUR, max: NOW + 10 * HOUR }))
  .chain(([local, now]) =>
    fc.record({
      local: fc.constant(local),
      floor: floorIn(local),
      retention: retentionFor(local, now),
      now: fc.constant(now),
    })
  );

/** Why segment `i` may not go, given what was chosen before it; undefined when it may. */
function refusal(
  local: EvictionCandidate[],
  i: number,
  floor: bigint,
  r: LocalRetention,
  now: number,
): string | undefined {
  const s = local[i];
  if (!s.sealed) return "not sealed";
  if (!s.copied) return "not copied";
  if (s.endOffset > floor) return "above the floor";
  const bytesWithIt = sum(local) - sum(local.slice(0, i));
  if (ageOf(s, now) < r.ageMs && bytesWithIt <= r.sizeBytes) return "retention keeps it";
  return undefined;
}

Deno.test("eviction takes a prefix, each segment sealed, copied, under the floor and wanted gone by local retention, and stops only where the next one may not go", () => {
  fc.assert(
    fc.property(case_, ({ local, floor, retention, now }) => {
      const chosen = chooseEvictions(local, floor, retention, now);
      assert.ok(chosen.length <= MAX_EVICTIONS_PER_PASS);
      assert.deepEqual(chosen, local.slice(0, chosen.length), "a prefix of the chain");
      if (!Number.isFinite(retention.ageMs) && !Number.isFinite(retention.sizeBytes)) {
        assert.equal(chosen.length, 0, "no local retention: nothing leaves");
      }
      for (let i = 0; i < chosen.length; i++) {
        assert.equal(refusal(local, i, floor, retention, now), undefined, `segment ${i}`);
      }
      // The active segment (the chain's last) never goes.
      if (local.length > 0) assert.ok(!chosen.includes(local[local.length - 1]));
      if (chosen.length < Math.min(MAX_EVICTIONS_PER_PASS, local.length)) {
        assert.notEqual(
          refusal(local, chosen.length, floor, retention, now),
          undefined,
          "stopped before a segment that may go",
        );
      }
    }),
    { numRuns: 2000 },
  );
});

Deno.test("eviction by size never goes further than local_retention_size asks: without it the partition would still hold more", () => {
  fc.assert(
    fc.property(case_, ({ local, floor, retention, now }) => {
      const bySize = { ageMs: Infinity, sizeBytes: retention.sizeBytes };
      const chosen = chooseEvictions(local, floor, bySize, now);
      if (chosen.length === 0) return;
      const left = sum(local) - sum(chosen);
      const last = chosen[chosen.length - 1];
      // Every segment but the last chosen left more than the limit behind it; the last one
      // was still needed (the partition held more than the limit with it).
      assert.ok(left + last.size > bySize.sizeBytes, `${left} + ${last.size} bytes left`);
      const beforeLast = sum(local) - sum(chosen.slice(0, -1));
      assert.ok(beforeLast > bySize.sizeBytes);
    }),
    { numRuns: 1000 },
  );
});

Deno.test("stricter local retention, a later clock, a higher floor or more copies only add segments after those already chosen", () => {
  const stricter = case_.chain((c) =>
    fc.record({
      c: fc.constant(c),
      ageCut: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 120 * HOUR })),
      sizeCut: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 40_000 })),
      later: fc.integer({ min: 0, max: 10 * HOUR }),
      higher: fc.bigInt({ min: 0n, max: 200n }),
      copyMore: fc.array(fc.boolean(), { minLength: c.local.length, maxLength: c.local.length }),
    })
  );
  fc.assert(
    fc.property(stricter, ({ c, ageCut, sizeCut, later, higher, copyMore }) => {
      const loose = chooseEvictions(c.local, c.floor, c.retention, c.now);
      const cut = (limit: number, by: number) =>
        Number.isFinite(limit) ? Math.max(0, limit - by) : by === 0 ? limit : by;
      const strict: LocalRetention = {
        ageMs: cut(c.retention.ageMs, ageCut),
        sizeBytes: cut(c.retention.sizeBytes, sizeCut),
      };
      const more = c.local.map((s, i) => ({ ...s, copied: s.copied || copyMore[i] }));
      const tight = chooseEvictions(more, c.floor + higher, strict, c.now + later);
      assert.ok(tight.length >= loose.length, `${tight.length} < ${loose.length}`);
      assert.deepEqual(
        tight.slice(0, loose.length).map((s) => s.start),
        loose.map((s) => s.start),
      );
    }),
    { numRuns: 1000 },
  );
});

Deno.test("what local retention wants regardless of the floor (the pressure check) always begins with what may go now", () => {
  fc.assert(
    fc.property(case_, ({ local, floor, retention, now }) => {
      const chosen = chooseEvictions(local, floor, retention, now);
      const wanted = chooseEvictions(
        local.map((s) => ({ ...s, copied: true })),
        1n << 64n,
        retention,
        now,
      );
      assert.deepEqual(
        wanted.slice(0, chosen.length).map((s) => s.start),
        chosen.map((s) => s.start),
      );
    }),
    { numRuns: 500 },
  );
});

Deno.test("at most MAX_EVICTIONS_PER_PASS a pass, however much retention wants", () => {
  const local: EvictionCandidate[] = Array.from({ length: 40 }, (_, i) => ({
    start: BigInt(i * 10),
    endOffset: BigInt(i * 10 + 9),
    size: 100,
    maxTimestamp: BigInt(NOW - 100 * HOUR) * 1000n,
    copied: true,
    sealed: i < 39,
  }));
  const chosen = chooseEvictions(local, 1000n, { ageMs: HOUR, sizeBytes: 0 }, NOW);
  assert.equal(chosen.length, MAX_EVICTIONS_PER_PASS);
  // The next pass goes on from there.
  const next = chooseEvictions(
    local.slice(chosen.length),
    1000n,
    { ageMs: HOUR, sizeBytes: 0 },
    NOW,
  );
  assert.equal(next[0].start, local[MAX_EVICTIONS_PER_PASS].start);
});
