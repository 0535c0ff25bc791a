// What `POST /v1/admin/pass` answers: the pass's report, its problems typed and, for the pass and
// each partition, in the words (`errors`) the answer has always carried.
import assert from "node:assert/strict";
import { emptyPassReport } from "../../src/tier/partition_tier.ts";
import type { Problem } from "../../src/tier/problem.ts";
import { passAnswer, type PassReport } from "../../src/tier/tier_worker.ts";

Deno.test("the admin pass answer says every problem in words, per pass and per partition", () => {
  const refused: Problem = {
    kind: "copy",
    what: "iggy/x/0.log",
    detail: "connect ECONNREFUSED",
    segment: 0n,
    storeFault: true,
  };
  const unopened: Problem = {
    kind: "partition_open",
    what: "partition 0/0/1",
    detail: "EACCES",
    storeFault: false,
  };
  const partitions = [
    { ...emptyPassReport("0/0/0", 9n), problems: [refused], storeUnreachable: true },
    { ...emptyPassReport("0/0/1", -1n), problems: [unopened] },
    emptyPassReport("0/0/2", 3n),
  ];
  const report: PassReport = {
    partitions,
    copied: 0,
    adopted: 0,
    failed: 1,
    cleaned: 0,
    lost: 0,
    evicted: 0,
    remoteDeleted: 0,
    pending: 1,
    problems: [refused, unopened],
    storeUnreachable: true,
  };
  const answer = passAnswer(report);
  assert.deepEqual(answer.errors, [
    "iggy/x/0.log: connect ECONNREFUSED",
    "partition 0/0/1: cannot open its state: EACCES",
  ]);
  assert.deepEqual(answer.partitions.map((p) => p.errors), [
    ["iggy/x/0.log: connect ECONNREFUSED"],
    ["partition 0/0/1: cannot open its state: EACCES"],
    [],
  ]);
  assert.deepEqual(answer.problems, report.problems, "the typed problems stay");
  assert.equal(answer.storeUnreachable, true);
});
