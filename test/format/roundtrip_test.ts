// Property tests: messages → encodeRecord → walk + messages round-trips exactly, records
// re-encode byte for byte, and encodeIndex/parseIndex are inverses — for both formats.
import assert from "node:assert/strict";
import fc from "fast-check";
import { codecFor } from "../../src/format/codecs.ts";
import type { IndexEntry } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { concatBytes } from "../../src/base/bytes.ts";
import { all, batches09Arb, messages08Arb } from "./_fixtures.ts";

await initHashes();
const RUNS = { numRuns: 300 };
const iggy08 = codecFor("iggy-0.8");
const iggy09 = codecFor("iggy-0.9");

Deno.test("iggy-0.8: encodeRecord → walk(verify) → messages round-trips", () => {
  fc.assert(
    fc.property(messages08Arb, ({ startOffset, messages }) => {
      const records = messages.map((m) => iggy08.encodeRecord([m], { partitionId: 0 }));
      const log = concatBytes(records);
      const walked = all(iggy08.walk(log, { file: "p.log", startOffset }));
      assert.equal(walked.length, messages.length);
      let position = 0;
      walked.forEach((r, i) => {
        assert.deepEqual(r, {
          position,
          size: records[i].length,
          firstOffset: messages[i].offset,
          lastOffset: messages[i].offset,
          timestamp: messages[i].timestamp,
          messageCount: 1,
        });
        position += r.size;
      });
      assert.deepEqual(walked.flatMap((r) => iggy08.messages(log, r, "p.log")), messages);
      for (const [i, rec] of records.entries()) {
        const decoded = iggy08.decodeRecord(rec, { file: "r" });
        assert.deepEqual(decoded.messages, [messages[i]]);
        assert.deepEqual(iggy08.encodeRecord(decoded.messages, { partitionId: 0 }), rec);
      }
    }),
    RUNS,
  );
});

Deno.test("iggy-0.9: encodeRecord → walk(verify) → messages round-trips", () => {
  fc.assert(
    fc.property(batches09Arb, ({ startOffset, partitionId, batches }) => {
      const records = batches.map((b) => iggy09.encodeRecord(b, { partitionId }));
      const log = concatBytes(records);
      const walked = all(iggy09.walk(log, { file: "p.log", startOffset }));
      assert.equal(walked.length, batches.length);
      walked.forEach((r, i) => {
        assert.equal(r.size, records[i].length);
        assert.equal(r.firstOffset, batches[i][0].offset);
        assert.equal(r.lastOffset, batches[i].at(-1)!.offset);
        assert.equal(r.messageCount, batches[i].length);
        assert.equal(r.timestamp, batches[i][0].timestamp);
      });
      assert.deepEqual(walked.flatMap((r) => iggy09.messages(log, r, "p.log")), batches.flat());
      for (const [i, rec] of records.entries()) {
        const decoded = iggy09.decodeRecord(rec, { file: "r" });
        assert.equal(decoded.partitionId, partitionId);
        assert.deepEqual(decoded.messages, batches[i]);
        assert.deepEqual(iggy09.encodeRecord(decoded.messages, { partitionId }), rec);
      }
    }),
    RUNS,
  );
});

Deno.test("walk from a later record boundary, and from a buffer holding a file range", () => {
  fc.assert(
    fc.property(batches09Arb, fc.nat(), ({ startOffset, partitionId, batches }, pick) => {
      const records = batches.map((b) => iggy09.encodeRecord(b, { partitionId }));
      const log = concatBytes(records);
      const k = pick % records.length;
      const from = records.slice(0, k).reduce((n, r) => n + r.length, 0);
      const expectedOffset = batches[k][0].offset;
      const fromMiddle = all(iggy09.walk(log, { file: "f", startOffset, fromPosition: from }));
      assert.equal(fromMiddle.length, records.length - k);
      const range = log.subarray(from);
      const ranged = all(
        iggy09.walk(range, { file: "f", startOffset, filePosition: from, expectedOffset }),
      );
      assert.deepEqual(ranged.map((r) => r.firstOffset), fromMiddle.map((r) => r.firstOffset));
    }),
    RUNS,
  );
});

Deno.test("allowPartialTail stops before a record cut at any byte", () => {
  fc.assert(
    fc.property(messages08Arb, batches09Arb, fc.nat(), (a, b, cutSeed) => {
      const cases = [
        {
          codec: iggy08,
          startOffset: a.startOffset,
          records: a.messages.map((m) => iggy08.encodeRecord([m], { partitionId: 0 })),
        },
        {
          codec: iggy09,
          startOffset: b.startOffset,
          records: b.batches.map((m) => iggy09.encodeRecord(m, { partitionId: b.partitionId })),
        },
      ];
      for (const { codec, startOffset, records } of cases) {
        const log = concatBytes(records);
        const cut = cutSeed % (log.length + 1);
        let whole = 0;
        let end = 0;
        for (const r of records) {
          if (end + r.length > cut) break;
          end += r.length;
          whole++;
        }
        const walked = all(
          codec.walk(log.subarray(0, cut), { file: "f", startOffset, allowPartialTail: true }),
        );
        assert.equal(walked.length, whole);
      }
    }),
    RUNS,
  );
});

/** A dense 0.8 index: one entry per message, record sizes ≥ 64. */
const index08Arb = fc
  .record({
    startOffset: fc.bigInt({ min: 0n, max: 1n << 62n }),
    records: fc.array(
      fc.record({
        size: fc.integer({ min: 64, max: 100_000 }),
        timestamp: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
      }),
      { maxLength: 50 },
    ),
  })
  .map(({ startOffset, records }) => {
    let position = 0;
    const entries: IndexEntry[] = records.map((r, i) => {
      const e = { offset: startOffset + BigInt(i), position, timestamp: r.timestamp };
      position += r.size;
      return e;
    });
    return { startOffset, entries, logSize: position };
  });

/** A sparse 0.9 index: strictly increasing offsets and positions inside the log. */
const index09Arb = fc
  .record({
    startOffset: fc.bigInt({ min: 0n, max: 1n << 62n }),
    steps: fc.array(
      fc.record({
        offsetStep: fc.bigInt({ min: 1n, max: 1000n }),
        positionStep: fc.integer({ min: 256, max: 1 << 20 }),
        timestamp: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
      }),
      { maxLength: 50 },
    ),
    tail: fc.integer({ min: 1, max: 1 << 20 }),
  })
  .map(({ startOffset, steps, tail }) => {
    let offset = startOffset;
    let position = 0;
    const entries: IndexEntry[] = steps.map((s, i) => {
      if (i > 0) {
        offset += s.offsetStep;
        position += s.positionStep;
      }
      return { offset, position, timestamp: s.timestamp };
    });
    return { startOffset, entries, logSize: position + tail };
  });

Deno.test("encodeIndex / parseIndex are inverses (0.8 dense, END positions)", () => {
  fc.assert(
    fc.property(index08Arb, ({ startOffset, entries, logSize }) => {
      const bytes = iggy08.encodeIndex(entries, { startOffset, logSize });
      assert.equal(bytes.length, entries.length * 16);
      assert.deepEqual(iggy08.parseIndex(bytes, { file: "i", startOffset, logSize }), entries);
      if (entries.length > 0) {
        const v = new DataView(bytes.buffer);
        assert.equal(v.getUint32(bytes.length - 12, true), logSize, "last END = log size");
      }
    }),
    RUNS,
  );
});

Deno.test("encodeIndex / parseIndex are inverses (0.9 sparse, START positions)", () => {
  fc.assert(
    fc.property(index09Arb, ({ startOffset, entries, logSize }) => {
      const bytes = iggy09.encodeIndex(entries, { startOffset, logSize });
      assert.equal(bytes.length, entries.length * 24);
      assert.deepEqual(iggy09.parseIndex(bytes, { file: "i", startOffset, logSize }), entries);
    }),
    RUNS,
  );
});

Deno.test("encodeRecord refuses what one record cannot hold", () => {
  const m = {
    offset: 5n,
    timestamp: 10n,
    originTimestamp: 9n,
    id: 1n,
    payload: new Uint8Array(1),
    userHeaders: new Uint8Array(0),
  };
  assert.throws(
    () => iggy08.encodeRecord([m, { ...m, offset: 6n }], { partitionId: 0 }),
    RangeError,
  );
  assert.throws(() => iggy08.encodeRecord([], { partitionId: 0 }), RangeError);
  assert.throws(() => iggy09.encodeRecord([], { partitionId: 0 }), RangeError);
  assert.throws(
    () => iggy09.encodeRecord([m, { ...m, offset: 7n }], { partitionId: 0 }),
    RangeError,
  );
  assert.throws(
    () => iggy09.encodeRecord([m, { ...m, offset: 6n, timestamp: 11n }], { partitionId: 0 }),
    RangeError,
  );
  assert.throws(
    () =>
      iggy09.encodeRecord([m, { ...m, offset: 6n, originTimestamp: 1n << 40n }], {
        partitionId: 0,
      }),
    RangeError,
  );
  assert.throws(() => iggy08.encodeRecord([{ ...m, id: -1n }], { partitionId: 0 }), RangeError);
  assert.throws(
    () => iggy08.encodeRecord([{ ...m, offset: 1n << 64n }], { partitionId: 0 }),
    RangeError,
  );
});
