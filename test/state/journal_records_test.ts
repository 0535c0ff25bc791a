// Journal record framing and the event codec: round trips, damage detection, cuts at any byte.
import assert from "node:assert/strict";
import fc from "fast-check";
import { concatBytes } from "../../src/base/bytes.ts";
import { initHashes, xxh3_64 } from "../../src/hash.ts";
import { decodeEvent, encodeEvent, EventDecodeError } from "../../src/state/event_codec.ts";
import type { JournalEvent } from "../../src/state/events.ts";
import { decodeRecords, encodeRecord, RECORD_HEADER_SIZE } from "../../src/state/journal.ts";
import { anyEvent, EVENT_TYPES, U64_MAX } from "./_arbitraries.ts";

await initHashes();

/** Encodes events and returns the bytes plus each record's start offset (and the end). */
function journalBytes(events: JournalEvent[]): { bytes: Uint8Array; starts: number[] } {
  const records = events.map(encodeRecord);
  const starts = [0];
  for (const r of records) starts.push(starts[starts.length - 1] + r.length);
  return { bytes: concatBytes(records), starts };
}

Deno.test("record framing is [u32 LE length][u64 LE xxh3-64 of body][JSON body]", () => {
  const event: JournalEvent = {
    type: "floor",
    generation: 1n,
    tieredUpTo: U64_MAX,
    at: 1_700_000_000_000,
  };
  const record = encodeRecord(event);
  const view = new DataView(record.buffer);
  const body = record.subarray(RECORD_HEADER_SIZE);
  assert.equal(view.getUint32(0, true), body.length);
  assert.equal(view.getBigUint64(4, true), xxh3_64(body));
  assert.deepEqual(JSON.parse(new TextDecoder().decode(body)), {
    type: "floor",
    generation: "1",
    tieredUpTo: "18446744073709551615",
    at: 1_700_000_000_000,
  });
});

Deno.test("every event round-trips through encodeRecord/decodeRecords (property, 2000 runs)", () => {
  const seen = new Set<string>();
  fc.assert(
    fc.property(fc.array(anyEvent(), { minLength: 1, maxLength: 6 }), (events) => {
      for (const e of events) seen.add(e.type);
      const { bytes } = journalBytes(events);
      const decoded = decodeRecords(bytes);
      assert.equal(decoded.torn, undefined);
      assert.equal(decoded.validBytes, bytes.length);
      assert.deepEqual(decoded.events, events);
      for (const e of events) assert.deepEqual(decodeEvent(encodeEvent(e)), e);
    }),
    { numRuns: 2000 },
  );
  assert.deepEqual([...seen].sort(), [...EVENT_TYPES].sort());
});

Deno.test("any single flipped byte stops decoding at the damaged record, reported as damage, never a torn tail (property, 3000 runs)", () => {
  fc.assert(
    fc.property(
      fc.array(anyEvent(), { minLength: 1, maxLength: 6 }),
      fc.nat(),
      fc.integer({ min: 1, max: 255 }),
      (events, where, mask) => {
        const { bytes, starts } = journalBytes(events);
        const at = where % bytes.length;
        bytes[at] ^= mask;
        const damaged = starts.findLastIndex((s) => s <= at);
        const decoded = decodeRecords(bytes);
        assert.deepEqual(decoded.events, events.slice(0, damaged));
        assert.equal(decoded.validBytes, starts[damaged]);
        assert.equal(decoded.damaged?.position, starts[damaged]);
        assert.equal(
          decoded.torn,
          undefined,
          "a flipped byte is damage, not an interrupted append",
        );
        // Where a whole record follows the damaged one, decoding says where it starts.
        if (damaged + 1 < events.length) {
          assert.equal(decoded.damaged?.validAgainAt, starts[damaged + 1]);
        }
      },
    ),
    { numRuns: 3000 },
  );
});

Deno.test("a journal cut at any byte replays exactly the whole records before the cut (property, 2000 runs)", () => {
  fc.assert(
    fc.property(fc.array(anyEvent(), { maxLength: 6 }), fc.nat(), (events, where) => {
      const { bytes, starts } = journalBytes(events);
      const cut = where % (bytes.length + 1);
      const whole = starts.filter((s) => s <= cut).length - 1;
      const decoded = decodeRecords(bytes.subarray(0, cut));
      assert.deepEqual(decoded.events, events.slice(0, whole));
      assert.equal(decoded.validBytes, starts[whole]);
      assert.equal(decoded.torn === undefined, cut === starts[whole]);
      assert.equal(decoded.damaged, undefined, "a cut is an interrupted append, not damage");
    }),
    { numRuns: 2000 },
  );
});

Deno.test("a bad record in the middle is damage, with where the valid records resume", () => {
  const a: JournalEvent = { type: "generation", generation: 1n, at: 1 };
  const b: JournalEvent = { type: "generation", generation: 2n, at: 2 };
  const ra = encodeRecord(a);
  const garbage = new Uint8Array([1, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9, 0x7b]);
  const decoded = decodeRecords(concatBytes([ra, garbage, encodeRecord(b)]));
  assert.deepEqual(decoded.events, [a]);
  assert.equal(decoded.torn, undefined);
  assert.deepEqual(decoded.damaged, {
    position: ra.length,
    reason: "checksum mismatch",
    validAgainAt: ra.length + garbage.length,
  });
});

Deno.test("only an incomplete last record is a torn tail; a complete bad one is damage", () => {
  const a: JournalEvent = { type: "generation", generation: 1n, at: 1 };
  const b: JournalEvent = { type: "generation", generation: 2n, at: 2 };
  const ra = encodeRecord(a);
  const rb = encodeRecord(b);
  // Half of the last record: what an interrupted append leaves.
  const torn = decodeRecords(concatBytes([ra, rb.subarray(0, rb.length - 5)]));
  assert.deepEqual(torn.events, [a]);
  assert.equal(torn.torn?.position, ra.length);
  assert.equal(torn.damaged, undefined);
  // The whole last record with one bit flipped in its body.
  const flipped = rb.slice();
  flipped[rb.length - 2] ^= 1;
  const bad = decodeRecords(concatBytes([ra, flipped]));
  assert.equal(bad.torn, undefined);
  assert.deepEqual(bad.damaged, {
    position: ra.length,
    reason: "checksum mismatch",
    validAgainAt: undefined,
  });
  // Its length field made larger: the bytes that follow still checksum as a whole body.
  const longer = rb.slice();
  new DataView(longer.buffer).setUint32(0, rb.length, true);
  const lengthDamaged = decodeRecords(concatBytes([ra, longer]));
  assert.equal(lengthDamaged.torn, undefined);
  assert.match(lengthDamaged.damaged?.reason ?? "", /length field says/);
});

Deno.test("a checksummed body that is not a valid event is reported as undecodable", () => {
  const bodies = [
    "not json",
    "[]",
    '{"type":"nope","at":1}',
    '{"type":"generation","generation":1,"at":1}', // bigint as a JSON number
    '{"type":"generation","generation":"18446744073709551616","at":1}', // > u64
    '{"type":"generation","generation":"01","at":1}',
    '{"type":"delete_started","segment":"1","generation":"0","cause":"age","at":1}',
    '{"type":"copy_finished","segment":"1","generation":"0","endOffset":"2","size":1,' +
    '"indexSize":1,"startTimestamp":"1","endTimestamp":"1","maxTimestamp":"1",' +
    '"checksum":"ABC","at":1}',
    '{"type":"evicted","segment":"1","generation":"0","at":-1}',
  ];
  for (const text of bodies) {
    const body = new TextEncoder().encode(text);
    assert.throws(() => decodeEvent(body), EventDecodeError, text);
    const record = new Uint8Array(RECORD_HEADER_SIZE + body.length);
    const view = new DataView(record.buffer);
    view.setUint32(0, body.length, true);
    view.setBigUint64(4, xxh3_64(body), true);
    record.set(body, RECORD_HEADER_SIZE);
    const decoded = decodeRecords(record);
    assert.equal(decoded.events.length, 0);
    assert.match(decoded.damaged?.reason ?? "", /^undecodable body/, text);
    assert.equal(decoded.torn, undefined, "a checksummed body is never an interrupted append");
  }
});

Deno.test("unknown extra keys in a body are ignored", () => {
  const body = new TextEncoder().encode('{"type":"generation","generation":"3","at":5,"x":1}');
  assert.deepEqual(decodeEvent(body), { type: "generation", generation: 3n, at: 5 });
});

Deno.test("encodeEvent refuses out-of-range fields", () => {
  assert.throws(
    () => encodeRecord({ type: "generation", generation: U64_MAX + 1n, at: 1 }),
    RangeError,
  );
  assert.throws(() => encodeRecord({ type: "generation", generation: -1n, at: 1 }), RangeError);
  assert.throws(() => encodeRecord({ type: "generation", generation: 1n, at: 1.5 }), RangeError);
  assert.throws(
    () => encodeRecord({ type: "delete_finished", segment: 1n, generation: 0n, at: NaN }),
    RangeError,
  );
});
