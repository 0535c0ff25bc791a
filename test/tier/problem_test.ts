// A pass's problems: made from what was thrown (its message, whether the store was at fault),
// said in the words operators have always read, and listed once per wording.
import assert from "node:assert/strict";
import fc from "fast-check";
import { StoreError } from "../../providers/types.ts";
import {
  describeProblem,
  noProblems,
  noteFailure,
  onSegment,
  type Problem,
  type ProblemKind,
  problemOf,
  uniqueProblems,
} from "../../src/tier/problem.ts";

const KINDS: readonly ProblemKind[] = [
  "copy",
  "segment_unreadable",
  "segment_damaged",
  "cleanup",
  "segment_changed",
  "format_unknown",
  "evict",
  "retention_delete",
  "partition",
  "partition_open",
  "housekeeping",
];

const problemArb: fc.Arbitrary<Problem> = fc.record({
  kind: fc.constantFrom(...KINDS),
  what: fc.constantFrom("a.log", "cleanup of segment 1", "partition 0/0/0", "b.log"),
  detail: fc.constantFrom("", "connect ECONNREFUSED", "503 SlowDown"),
  storeFault: fc.boolean(),
}, { requiredKeys: ["kind", "what", "detail", "storeFault"] });

Deno.test("describeProblem says each kind as the pass report always has", () => {
  const p = (kind: ProblemKind, what: string, detail: string): Problem => ({
    kind,
    what,
    detail,
    storeFault: false,
  });
  assert.equal(
    describeProblem(p("copy", "iggy/x/0.log", "connect ECONNREFUSED")),
    "iggy/x/0.log: connect ECONNREFUSED",
  );
  assert.equal(
    describeProblem(p("segment_damaged", "segment 96", "/d/0.log @ byte 4242: frame length 0")),
    "/d/0.log @ byte 4242: frame length 0 (segment 96 is damaged: not copied)",
  );
  assert.equal(
    describeProblem(p("partition_open", "partition 0/0/0", "EACCES: permission denied")),
    "partition 0/0/0: cannot open its state: EACCES: permission denied",
  );
  assert.equal(
    describeProblem(p("format_unknown", "partition 1/2/3", "format unknown; nothing evicted")),
    "partition 1/2/3: format unknown; nothing evicted",
  );
});

Deno.test("a failure on a segment is named `{work} of segment {n}`", () => {
  assert.deepEqual(onSegment("cleanup", 42n), {
    kind: "cleanup",
    what: "cleanup of segment 42",
    segment: 42n,
  });
  assert.equal(onSegment("evict", 7n).what, "eviction of segment 7");
  assert.equal(onSegment("retention_delete", 0n).what, "retention delete of segment 0");
});

Deno.test("a caught failure's problem: its message, and a store fault only when retryable", () => {
  const out = noProblems();
  const outage = noteFailure(
    out,
    onSegment("cleanup", 5n),
    new StoreError("Transport", "connection reset"),
  );
  assert.deepEqual(outage, {
    kind: "cleanup",
    what: "cleanup of segment 5",
    detail: "connection reset",
    segment: 5n,
    storeFault: true,
  });
  const refused = noteFailure(
    out,
    { kind: "copy", what: "k.log" },
    new StoreError("Auth", "access denied"),
  );
  assert.equal(refused.storeFault, false, "a refusal is not an outage");
  assert.equal("segment" in refused, false, "no segment when the work was on none");
  assert.deepEqual(out.problems, [outage, refused], "noted in the order they happened");
  const local = problemOf({ kind: "segment_unreadable", what: "/d/0.log" }, new Error("EIO"));
  assert.deepEqual([local.detail, local.storeFault], ["EIO", false]);
  // Something thrown without a message: no detail, not "undefined".
  assert.equal(problemOf({ kind: "partition", what: "partition 0/0/0" }, 42).detail, "");
  assert.equal(problemOf({ kind: "partition", what: "partition 0/0/0" }, null).detail, "");
});

Deno.test("uniqueProblems keeps the first problem of each wording, in order", () => {
  fc.assert(fc.property(fc.array(problemArb, { maxLength: 12 }), (problems) => {
    const kept = uniqueProblems(problems);
    const words = problems.map(describeProblem);
    assert.deepEqual(kept.map(describeProblem), [...new Set(words)]);
    for (const p of kept) assert.equal(p, problems[words.indexOf(describeProblem(p))]);
  }));
});
