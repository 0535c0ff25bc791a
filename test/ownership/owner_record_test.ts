// The owner record: any record decodes back to itself, and anything else — other JSON, another
// version, a field of the wrong shape, bytes that are not UTF-8 — is an OwnerRecordError naming
// the key and the field, never a guess.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  decodeOwnerRecord,
  describeOwner,
  encodeOwnerRecord,
  lineageOf,
  type OwnerRecord,
  OwnerRecordError,
} from "../../src/ownership/owner_record.ts";

const KEY = "iggy/local/owner.json";
const hex32 = fc.uint8Array({ minLength: 16, maxLength: 16 }).map((b) =>
  [...b].map((x) => x.toString(16).padStart(2, "0")).join("")
);
// Times a Date round-trips through its ISO text (ms precision, years 1970..9999).
const time = fc.integer({ min: 0, max: 253_402_300_799_000 });
const record: fc.Arbitrary<OwnerRecord> = fc.record({
  agentId: hex32,
  host: fc.string({ maxLength: 60 }),
  clusterId: fc.string({ maxLength: 60 }),
  since: time,
  lastWrite: time,
  previous: fc.array(
    fc.record(
      { agentId: hex32, host: fc.string({ maxLength: 20 }), until: time },
      { noNullPrototype: true },
    ),
    { maxLength: 5 },
  ),
  tierdVersion: fc.string({ maxLength: 10 }),
  nonce: fc.string({ maxLength: 16 }),
}, { noNullPrototype: true });

Deno.test("every owner record decodes back to itself; its lineage is its owners (property)", () => {
  fc.assert(fc.property(record, (r) => {
    const back = decodeOwnerRecord(KEY, encodeOwnerRecord(r));
    assert.deepEqual(back, r);
    assert.deepEqual(lineageOf(back), new Set([...r.previous.map((p) => p.agentId), r.agentId]));
    assert.match(describeOwner(back), new RegExp(`agent ${r.agentId} on host`));
  }));
});

Deno.test("anything but a valid record is refused, naming the key and what is wrong", () => {
  const good = JSON.parse(new TextDecoder().decode(encodeOwnerRecord({
    agentId: "0123456789abcdef0123456789abcdef",
    host: "broker-1",
    clusterId: "local",
    since: 0,
    lastWrite: 1,
    previous: [],
    tierdVersion: "0.1.0",
    nonce: "n",
  })));
  const cases: [unknown, RegExp][] = [
    [{ ...good, kind: "tierd-partition-manifest" }, /kind "tierd-partition-manifest"/],
    [{ ...good, version: 2 }, /version 2, this tierd reads 1/],
    [{ ...good, agent_id: "not hex" }, /agent_id is not 32 hex digits/],
    [{ ...good, since: "yesterday" }, /since is not a time/],
    [{ ...good, previous: {} }, /previous is not a list/],
    [
      { ...good, previous: [{ agent_id: "x", host: "h", until: good.since }] },
      /previous\[0\]\.agent_id/,
    ],
    [{ ...good, host: 7 }, /host is not a string/],
    [[good], /not a JSON object/],
  ];
  for (const [json, why] of cases) {
    let caught: unknown;
    try {
      decodeOwnerRecord(KEY, new TextEncoder().encode(JSON.stringify(json)));
    } catch (e) {
      caught = e;
    }
    assert.ok(caught instanceof OwnerRecordError, `refused: ${JSON.stringify(json)}`);
    assert.match(caught.message, new RegExp(`owner record ${KEY}`));
    assert.match(caught.message, why);
  }
  assert.throws(() => decodeOwnerRecord(KEY, new Uint8Array([0xff, 0xfe])), /not UTF-8 JSON/);
  assert.throws(() => decodeOwnerRecord(KEY, new Uint8Array(2 << 20)), /far more than a record/);
});
