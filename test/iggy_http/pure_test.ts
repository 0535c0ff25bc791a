// The pure parts of the Iggy-compatible listener: the poll query as the broker reads it, the
// JSON scanner over broker answers, user headers and messages rendered as the broker renders
// them (src/iggy_http/).
import { concatBytes } from "../../src/base/bytes.ts";
import assert from "node:assert/strict";
import {
  arrayElements,
  JsonShapeError,
  objectMembers,
  unsignedMember,
} from "../../src/iggy_http/json_scan.ts";
import { messageJson, polledJson } from "../../src/iggy_http/polled_json.ts";
import { derivedQuery, numericIds, parsePollQuery } from "../../src/iggy_http/query.ts";
import { base64, userHeadersJson } from "../../src/iggy_http/user_headers.ts";
import { parseBrokerPoll } from "../../src/iggy_http/client_calls.ts";

const enc = new TextEncoder();

/** One TLV field: kind, u32 LE length, bytes. */
function field(kind: number, bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + bytes.length);
  out[0] = kind;
  new DataView(out.buffer).setUint32(1, bytes.length, true);
  out.set(bytes, 5);
  return out;
}

const concat = (...parts: Uint8Array[]) => concatBytes(parts);

Deno.test("a poll query: the broker's defaults, its kind aliases, and what goes to the broker", () => {
  const d = parsePollQuery(new URLSearchParams(""))!;
  assert.deepEqual(
    { ...d, params: undefined },
    {
      partition: 0,
      kind: "offset",
      value: 0n,
      count: 10,
      autoCommit: false,
      consumerId: undefined,
      params: undefined,
    },
  );
  const q = parsePollQuery(
    new URLSearchParams(
      "consumer_id=7&partition_id=3&kind=t&value=18446744073709551615&count=5&auto_commit=true&consistency=x",
    ),
  )!;
  assert.equal(q.kind, "timestamp");
  assert.equal(q.value, 18446744073709551615n);
  assert.equal(q.partition, 3);
  assert.equal(q.autoCommit, true);
  assert.equal(q.consumerId, "7");
  for (
    const bad of [
      "kind=sideways",
      "value=-1",
      "value=18446744073709551616",
      "count=1.5",
      "auto_commit=yes",
      "partition_id=4294967296",
      "count=1&count=2",
    ]
  ) {
    assert.equal(parsePollQuery(new URLSearchParams(bad)), undefined, bad);
  }
  const derived = new URLSearchParams(
    derivedQuery(q, { kind: "first", value: 0n, count: 1, autoCommit: false }),
  );
  assert.equal(derived.get("kind"), "first");
  assert.equal(derived.get("consistency"), "x", "the client's other parameters stay");
  assert.equal(derived.get("consumer_id"), "7");
  assert.deepEqual(numericIds("1", "22"), { stream: 1, topic: 22 });
  assert.equal(numericIds("events", "1"), undefined);
});

Deno.test("the JSON scanner keeps u64 and u128 numbers exact and finds nested spans", () => {
  const text = ' { "partition_id" : 1, "current_offset": 18446744073709551615, "count": 2, ' +
    '"messages": [ {"header": {"id": 340282366920938463463374607431768211455, "offset": 7}, "payload": "a\\"]}"},' +
    '{"header":{"offset":8}}]}';
  assert.equal(unsignedMember(text, "current_offset"), 18446744073709551615n);
  const members = objectMembers(text);
  const messages = arrayElements(text, members.get("messages")!);
  assert.equal(messages.length, 2);
  const header = objectMembers(text, messages[0]).get("header")!;
  assert.equal(unsignedMember(text, "id", header), (1n << 128n) - 1n);
  const poll = parseBrokerPoll(text);
  assert.equal(poll.firstOffset, 7n);
  assert.equal(poll.lastOffset, 8n);
  assert.equal(poll.messages[1], '{"header":{"offset":8}}');
  assert.throws(() => objectMembers("[1]"), JsonShapeError);
  assert.throws(() => unsignedMember('{"a":-1}', "a"), JsonShapeError);
});

Deno.test("user headers: sorted by kind then key bytes, a repeated key keeps its last value", () => {
  const blob = concat(
    field(2, enc.encode("zeta")),
    field(3, new Uint8Array([1])),
    field(1, new Uint8Array([9])), // raw key sorts before every string key
    field(11, new Uint8Array([1, 0, 0, 0])),
    field(2, enc.encode("alpha")),
    field(2, enc.encode("first")),
    field(2, enc.encode("zeta")),
    field(3, new Uint8Array([0])),
  );
  const json = JSON.parse(userHeadersJson(blob));
  assert.deepEqual(json.map((h: { key: { value: string } }) => atob(h.key.value)), [
    "\x09",
    "alpha",
    "zeta",
  ]);
  assert.deepEqual(json[2], {
    key: { kind: "string", value: base64(enc.encode("zeta")) },
    value: { kind: "bool", value: "AA==" },
  });
  assert.equal(userHeadersJson(new Uint8Array()), "[]");
});

Deno.test("user headers the broker cannot map are its base64 blob", () => {
  const cases = [
    field(2, enc.encode("k")), // a key without a value
    concat(field(16, enc.encode("k")), field(2, enc.encode("v"))), // unknown kind
    concat(field(2, enc.encode("k")), field(6, new Uint8Array([1, 2]))), // int32 of 2 bytes
    concat(field(0, enc.encode("k")), field(2, enc.encode("v"))), // kind 0
    new Uint8Array([2, 0, 0, 0, 0]), // empty field
  ];
  for (const blob of cases) assert.equal(userHeadersJson(blob), JSON.stringify(base64(blob)));
});

Deno.test("a message and a poll answer render in the broker's field order", () => {
  const payload = enc.encode("hi");
  const text = messageJson({
    checksum: 18446744073709551615n,
    message: {
      offset: 5n,
      timestamp: 1700000000000000n,
      originTimestamp: 1699999999999999n,
      id: (1n << 128n) - 1n,
      payload,
      userHeaders: new Uint8Array(),
    },
  });
  assert.equal(
    text,
    '{"header":{"checksum":18446744073709551615,"id":340282366920938463463374607431768211455,' +
      '"offset":5,"timestamp":1700000000000000,"origin_timestamp":1699999999999999,' +
      '"user_headers_length":0,"payload_length":2,"reserved":0},"payload":"aGk=","user_headers":[]}',
  );
  assert.equal(
    polledJson(3, 9n, [text, text]),
    `{"partition_id":3,"current_offset":9,"count":2,"messages":[${text},${text}]}`,
  );
});
