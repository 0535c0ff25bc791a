// `chooseRetentionDeletes` against its whole specification, on random chains of remote copies:
// what it deletes is the oldest prefix of the copies, at most `limit`, every one of them below
// the consumer barrier (nothing after the first copy the barrier protects), each one beyond the
// configured total retention when its turn came — expired by `message_expiry`, or an evicted
// copy while the partition still held more than its share of `max_topic_size` (a copy whose
// local files remain is never deleted for size) — and it stops only where the next copy may not
// go. Shorter retention, a later clock, more bytes, a higher barrier or a larger limit only ever
// add copies after the ones already chosen. (That only finished copies are offered is the
// caller's filter, `retentionPhase`.)
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  chooseRetentionDeletes,
  type RetentionCandidate,
  type TotalRetention,
} from "../../src/tier/policy.ts";

const NOW = 1_750_000_000_000;
const HOUR = 3_600_000;

/** Remote copies, oldest first, contiguous; evicted ones usually first, as in a real chain. */
const copies = fc.array(
  fc.record({
    len: fc.integer({ min: 1, max: 50 }),
    size: fc.integer({ min: 1, max: 1000 }),
    ageH: fc.integer({ min: 0, max: 100 }),
    evicted: fc.boolean(),
  }),
  { maxLength: 40 },
).chain((parts) =>
  fc.oneof(
    fc.constant(parts),
    // Evicted as a prefix, the newest kept locally.
    fc.nat({ max: parts.length }).map((k) => parts.map((p, i) => ({ ...p, evicted: i < k }))),
  )
).map((parts) => {
  let start = 0n;
  return parts.map((p): RetentionCandidate => {
    const c = {
      start,
      endOffset: start + BigInt(p.len) - 1n,
      size: p.size,
      maxTimestamp: BigInt(NOW - p.ageH * HOUR) * 1000n,
      evicted: p.evicted,
    };
    start += BigInt(p.len);
    return c;
  });
});

const sumEvicted = (cs: RetentionCandidate[]) =>
  cs.reduce((n, c) => n + (c.evicted ? c.size : 0), 0);
const ageOf = (c: RetentionCandidate, now: number) => now - Number(c.maxTimestamp / 1000n);
const limitOf = (max: number) => fc.oneof(fc.constant(Infinity), fc.integer({ min: 0, max }));

/** Total retention: unlimited, anything, or at a boundary of the chain, give or take one. */
function retentionFor(
  remote: RetentionCandidate[],
  total: number,
  now: number,
): fc.Arbitrary<TotalRetention> {
  const at = (values: number[]) =>
    values.length === 0 ? fc.constant(0) : fc.tuple(
      fc.constantFrom(...values),
      fc.integer({ min: -1, max: 1 }),
    ).map(([v, d]) => Math.max(0, v + d));
  return fc.record({
    expiryMs: fc.oneof(limitOf(120 * HOUR), at(remote.map((c) => ageOf(c, now)))),
    maxBytes: fc.oneof(
      limitOf(60_000),
      at(remote.map((_, k) => total - sumEvicted(remote.slice(0, k)))),
    ),
  });
}

interface Case {
  remote: RetentionCandidate[];
  /** Evicted copies' bytes plus the local segments'. */
  total: number;
  retention: TotalRetention;
  now: number;
  /** The lowest offset a consumer stored; undefined: none. */
  barrier: bigint | undefined;
  limit: number;
}

const case_: fc.Arbitrary<Case> = fc.tuple(
  copies,
  fc.integer({ min: 0, max: 20_000 }),
  fc.integer({ min: NOW - 10 * HOUR, max: NOW + 10 * HOUR }),
).chain(([remote, localBytes, now]) => {
  const total = sumEvicted(remote) + localBytes;
  const end = remote.length === 0 ? 0n : remote[remote.length - 1].endOffset;
  return fc.record({
    remote: fc.constant(remote),
    total: fc.constant(total),
    retention: retentionFor(remote, total, now),
    now: fc.constant(now),
    barrier: fc.option(fc.bigInt({ min: 0n, max: end + 10n }), { nil: undefined }),
    limit: fc.integer({ min: 0, max: 50 }),
  });
});

const deletableUnder = (barrier: bigint | undefined) => (end: bigint) =>
  barrier === undefined || end < barrier;

function choose(c: Case): RetentionCandidate[] {
  return chooseRetentionDeletes(
    c.remote,
    c.total,
    c.retention,
    c.now,
    deletableUnder(c.barrier),
    c.limit,
  );
}

/** Why copy `i` may not go, given what was chosen before it; undefined when it may. */
function refusal(c: Case, i: number): string | undefined {
  const copy = c.remote[i];
  if (!deletableUnder(c.barrier)(copy.endOffset)) return "a consumer still needs it";
  const expired = ageOf(copy, c.now) >= c.retention.expiryMs;
  const bytesWithIt = c.total - sumEvicted(c.remote.slice(0, i));
  const oversize = copy.evicted && bytesWithIt > c.retention.maxBytes;
  if (!expired && !oversize) return "within total retention";
  return undefined;
}

Deno.test("retention deletes the oldest copies, each below the barrier and beyond total retention, and stops only where the next one may not go", () => {
  fc.assert(
    fc.property(case_, (c) => {
      const chosen = choose(c);
      assert.ok(chosen.length <= c.limit, `${chosen.length} over the limit ${c.limit}`);
      assert.deepEqual(chosen, c.remote.slice(0, chosen.length), "the oldest prefix");
      if (!Number.isFinite(c.retention.expiryMs) && !Number.isFinite(c.retention.maxBytes)) {
        assert.equal(chosen.length, 0, "no total retention: nothing is deleted");
      }
      for (let i = 0; i < chosen.length; i++) {
        assert.equal(refusal(c, i), undefined, `copy ${i}`);
      }
      if (chosen.length < Math.min(c.limit, c.remote.length)) {
        assert.notEqual(refusal(c, chosen.length), undefined, "stopped before a copy that may go");
      }
    }),
    { numRuns: 2000 },
  );
});

Deno.test("retention never deletes a copy whose local files remain unless it expired, nor anything at or after a consumer's offset", () => {
  fc.assert(
    fc.property(case_, (c) => {
      for (const copy of choose(c)) {
        if (!copy.evicted) assert.ok(ageOf(copy, c.now) >= c.retention.expiryMs);
        if (c.barrier !== undefined) assert.ok(copy.endOffset < c.barrier);
      }
    }),
    { numRuns: 1000 },
  );
});

Deno.test("retention by size stops once the partition fits its share: without the last copy deleted it would still hold more", () => {
  fc.assert(
    fc.property(case_, (c) => {
      const bySize = { ...c, retention: { expiryMs: Infinity, maxBytes: c.retention.maxBytes } };
      const chosen = choose(bySize);
      if (chosen.length === 0) return;
      const beforeLast = c.total - sumEvicted(chosen.slice(0, -1));
      assert.ok(beforeLast > bySize.retention.maxBytes, `${beforeLast} bytes before the last`);
      assert.ok(chosen.every((copy) => copy.evicted));
    }),
    { numRuns: 1000 },
  );
});

Deno.test("shorter retention, a later clock, more bytes, a higher barrier or a larger limit only add copies after those already chosen", () => {
  const stricter = case_.chain((c) =>
    fc.record({
      c: fc.constant(c),
      expiryCut: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 120 * HOUR })),
      bytesCut: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 60_000 })),
      later: fc.integer({ min: 0, max: 10 * HOUR }),
      moreBytes: fc.integer({ min: 0, max: 5_000 }),
      higher: fc.option(fc.bigInt({ min: 0n, max: 200n }), { nil: undefined }),
      moreLimit: fc.integer({ min: 0, max: 10 }),
    })
  );
  fc.assert(
    fc.property(stricter, ({ c, expiryCut, bytesCut, later, moreBytes, higher, moreLimit }) => {
      const loose = choose(c);
      const cut = (limit: number, by: number) =>
        Number.isFinite(limit) ? Math.max(0, limit - by) : by === 0 ? limit : by;
      const tight = choose({
        ...c,
        retention: {
          expiryMs: cut(c.retention.expiryMs, expiryCut),
          maxBytes: cut(c.retention.maxBytes, bytesCut),
        },
        now: c.now + later,
        total: c.total + moreBytes,
        // A barrier moved up, or gone (no consumer left).
        barrier: c.barrier === undefined || higher === undefined ? undefined : c.barrier + higher,
        limit: c.limit + moreLimit,
      });
      assert.ok(tight.length >= loose.length, `${tight.length} < ${loose.length}`);
      assert.deepEqual(
        tight.slice(0, loose.length).map((x) => x.start),
        loose.map((x) => x.start),
      );
    }),
    { numRuns: 1000 },
  );
});
