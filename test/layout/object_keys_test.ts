// A segment object's key names its partition, whatever the prefix and cluster id hold (digits
// and slashes included): the store's per-topic counters are labelled from it.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  manifestKey,
  ownerKey,
  partitionOfSegmentKey,
  segmentKeys,
} from "../../src/layout/object_keys.ts";

const id = fc.integer({ min: 0, max: 0xffff_ffff });
const word = fc.stringMatching(/^[a-z0-9._-]{1,12}$/).filter((w) => w !== "." && w !== "..");
const location = fc.record({
  prefix: fc.array(word, { minLength: 1, maxLength: 4 }).map((w) => w.join("/")),
  clusterId: word,
  stream: id,
  topic: id,
  partition: id,
  incarnation: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
  generation: fc.bigInt({ min: 0n, max: 10n ** 19n }),
});

Deno.test("partitionOfSegmentKey reads back the partition of every segment key", () => {
  fc.assert(
    fc.property(location, fc.bigInt({ min: 0n, max: 10n ** 19n }), (loc, start) => {
      const keys = segmentKeys(loc, start);
      const want = { stream: loc.stream, topic: loc.topic, partition: loc.partition };
      assert.deepEqual(partitionOfSegmentKey(keys.log), want);
      assert.deepEqual(partitionOfSegmentKey(keys.index), want);
      assert.equal(partitionOfSegmentKey(manifestKey(loc)), undefined);
      assert.equal(partitionOfSegmentKey(ownerKey(loc)), undefined);
    }),
  );
});

Deno.test("partitionOfSegmentKey: a key that only looks close names no partition", () => {
  const ok = "iggy/c1/3/4/5/0123456789abcdef-0/00000000000000000100.log";
  assert.deepEqual(partitionOfSegmentKey(ok), { stream: 3, topic: 4, partition: 5 });
  for (
    const key of [
      "iggy/c1/3/4/5/0123456789abcdef-0/00000000000000000100.tmp",
      "iggy/c1/3/4/5/0123456789ABCDEF-0/00000000000000000100.log",
      "iggy/c1/3/4/05/0123456789abcdef-0/00000000000000000100.log",
      "iggy/c1/3/x/5/0123456789abcdef-0/00000000000000000100.log",
      "iggy/c1/3/4/5/0123456789abcdef-0/100.log",
    ]
  ) {
    assert.equal(partitionOfSegmentKey(key), undefined, key);
  }
});
