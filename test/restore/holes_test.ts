// Holes of a restored generation, against a model: a chain of segments in which each is a good
// copy, an unusable object (with or without its end still known), gone but listed by the
// manifest, gone without a trace, or recorded lost. The good copies, the lost ranges and the
// holes tile the chain from its first known segment to its last, without overlap; every unusable
// or listed-but-gone segment starts a hole of its own, with its reason; nothing good is a hole.
import assert from "node:assert/strict";
import fc from "fast-check";
import { describeHole, findHoles, type HoleInput, sortProblems } from "../../src/restore/holes.ts";

type Fate = "good" | "bad" | "bad-no-end" | "listed" | "gone" | "lost";
const fate = fc.constantFrom<Fate>(
  "good",
  "good",
  "good",
  "bad",
  "bad-no-end",
  "listed",
  "gone",
  "lost",
);

interface Chain {
  segments: { start: bigint; end: bigint; fate: Fate }[];
  manifest: boolean;
}

const chain: fc.Arbitrary<Chain> = fc.record({
  base: fc.bigInt({ min: 0n, max: 1n << 40n }),
  lengths: fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 25 }),
  fates: fc.array(fate, { minLength: 25, maxLength: 25 }),
  manifest: fc.boolean(),
}, { noNullPrototype: true }).map(({ base, lengths, fates, manifest }) => {
  let at = base;
  const segments = lengths.map((n, i) => {
    const s = { start: at, end: at + BigInt(n) - 1n, fate: fates[i] };
    at += BigInt(n);
    return s;
  });
  return { segments, manifest };
});

function inputOf(c: Chain): HoleInput {
  const segs = c.segments;
  // Without a manifest, nothing says a segment was listed or lost: those are just gone.
  const fateOf = (f: Fate): Fate => (!c.manifest && (f === "listed" || f === "lost") ? "gone" : f);
  return {
    good: segs.filter((s) => fateOf(s.fate) === "good").map((s) => ({
      start: s.start,
      end: s.end,
    })),
    bad: segs.filter((s) => fateOf(s.fate).startsWith("bad")).map((s) => ({
      start: s.start,
      ...(s.fate === "bad" && { end: s.end }),
      reason: `object of ${s.start} lies`,
    })),
    manifest: c.manifest
      ? {
        segments: segs.filter((s) => s.fate !== "lost" && s.fate !== "gone").map((s) => ({
          start: s.start,
          endOffset: s.end,
        })),
        lost: segs.filter((s) => s.fate === "lost").map((s) => ({ from: s.start, to: s.end })),
      }
      : undefined,
  };
}

Deno.test("good copies, lost ranges and holes tile the chain exactly (property, 1000 runs)", () => {
  fc.assert(
    fc.property(chain, (c) => {
      const input = inputOf(c);
      const { holes, lost } = findHoles(input);
      // The known span: from the first segment anything says exists to the last.
      const known = c.segments.filter((s) =>
        input.good.some((g) => g.start === s.start) ||
        input.bad.some((b) => b.start === s.start) ||
        input.manifest?.segments.some((m) => m.start === s.start) ||
        input.manifest?.lost?.some((l) => l.from === s.start)
      );
      if (known.length === 0) {
        assert.deepEqual(holes, []);
        return;
      }
      const from = known[0].start;
      const lastKnown = known.at(-1)!;
      // A last segment whose end nobody knows (an unusable object, no manifest) ends the span
      // at its own start as far as the holes can say.
      const to = lastKnown.end;
      const tiles = [
        ...input.good.map((g) => ({ from: g.start, to: g.end, what: "good" })),
        ...lost.map((l) => ({ from: l.from, to: l.to, what: "lost" })),
        ...holes.map((h) => ({
          from: h.from,
          to: h.to ?? h.from,
          what: "hole",
          open: h.to === undefined,
        })),
      ].sort((a, b) => (a.from < b.from ? -1 : 1));
      let next = from;
      for (const t of tiles) {
        assert.equal(t.from, next, `tile ${t.what} ${t.from}..${t.to} follows on at ${next}`);
        next = t.to + 1n;
        if ("open" in t && t.open) {
          // Only the very last hole may have an unknown end (nothing after it to end it).
          assert.equal(t, tiles.at(-1));
          next = to + 1n;
        }
      }
      assert.equal(next, to + 1n, "the tiles reach the last known offset");
      // Every unusable or listed-but-gone segment starts a hole; no good copy is one.
      for (const b of input.bad) assert.ok(holes.some((h) => h.from === b.start));
      for (const s of c.segments.filter((x) => x.fate === "listed" && c.manifest)) {
        const h = holes.find((x) => x.from === s.start);
        assert.ok(h, `listed ${s.start} is a hole`);
        assert.match(describeHole(h!), /manifest lists it/);
      }
      for (const g of input.good) assert.ok(!holes.some((h) => h.from === g.start));
    }),
    { numRuns: 1000 },
  );
});

Deno.test("a hole says why: the object's own problem, the manifest, or no object at all", () => {
  const { holes } = findHoles({
    good: [{ start: 0n, end: 99n }, { start: 300n, end: 399n }, { start: 500n, end: 599n }],
    bad: [{ start: 100n, end: 199n, reason: "k/100.log: object is 10 bytes, metadata says 20" }],
    manifest: { segments: [{ start: 200n, endOffset: 299n }] },
  });
  assert.deepEqual(holes.map(describeHole), [
    "offsets 100..199: k/100.log: object is 10 bytes, metadata says 20",
    "offsets 200..299: its objects are missing from the bucket (the manifest lists it)",
    "offsets 400..499: no object in the bucket covers offsets 400..499",
  ]);
});

Deno.test("an object missing its .log keeps the end its manifest knows", () => {
  const { holes } = findHoles({
    good: [{ start: 0n, end: 99n }],
    bad: [{ start: 100n, reason: "k/100.index: its .log object is missing" }],
    manifest: {
      segments: [{ start: 0n, endOffset: 99n }, { start: 100n, endOffset: 175n }],
    },
  });
  assert.deepEqual(holes.map(describeHole), [
    "offsets 100..175: k/100.index: its .log object is missing",
  ]);
});

Deno.test("half a pair after the last good copy, not in the manifest, is an unfinished copy, not a hole", () => {
  const good = [{ start: 0n, end: 99n }, { start: 100n, end: 199n }];
  const problems = [
    { start: 200n, incomplete: true, key: "k/200.log", reason: "gone" }, // a copy cut off: the newest
    { start: 50n, incomplete: true, key: "k/50.log", reason: "gone" }, // before a good copy: damage
  ];
  const sorted = sortProblems(problems, good, undefined);
  assert.deepEqual(sorted.unfinished.map((b) => b.key), ["k/200.log"]);
  assert.deepEqual(sorted.damaged.map((b) => b.key), ["k/50.log"]);
  assert.deepEqual(sorted.bad, [{ start: 50n, end: undefined, reason: "k/50.log: gone" }]);
  // Listed by the manifest, it was verified once: then it is a hole.
  const listed = sortProblems(problems, good, { segments: [{ start: 200n, endOffset: 299n }] });
  assert.deepEqual(listed.unfinished, []);
  // An object that lies (not half a pair) is never "unfinished".
  assert.deepEqual(
    sortProblems([{ start: 200n, key: "k/200.log", reason: "lies" }], good, undefined).unfinished,
    [],
  );
});
