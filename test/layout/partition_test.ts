// partitionsPerTopic: a topic's partitions counted among the ids given (max_topic_size is divided
// among them); a topic none of them belongs to counts 0.
import assert from "node:assert/strict";
import fc from "fast-check";
import { partitionsPerTopic } from "../../src/layout/partition.ts";

Deno.test("partitionsPerTopic counts each topic's partitions among the ids given", () => {
  const idArb = fc.record({ stream: fc.nat(3), topic: fc.nat(3), partition: fc.nat(20) });
  fc.assert(
    fc.property(fc.array(idArb, { maxLength: 30 }), idArb, (ids, probe) => {
      const count = partitionsPerTopic(ids);
      const want = ids.filter((i) => i.stream === probe.stream && i.topic === probe.topic).length;
      assert.equal(count(probe), want);
    }),
  );
});
