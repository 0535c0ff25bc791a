// The JSON form of a read: every message with its offset, timestamps, id, parsed user headers
// and base64 payload, matching the codec's own decoding of the same bytes.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { codecFor } from "../../src/format/codecs.ts";
import { initHashes } from "../../src/hash.ts";
import { parseUserHeaders, readToJson } from "../../src/read/json.ts";
import { readRecords } from "../../src/read/read_records.ts";
import { testdata } from "../format/_fixtures.ts";
import { buildScenario } from "./_scenario.ts";

await initHashes();

for (const format of ["iggy-0.8", "iggy-0.9"] as const) {
  Deno.test(`${format}: JSON messages match the codec's decoding`, async () => {
    const s = await buildScenario({
      format,
      before: 40,
      after: 5,
      segmentSize: 2048,
      payloadSize: 33,
      messagesPerBatch: 4,
      evict: 1,
    });
    try {
      const r = await readRecords(s.context(), { partition: s.ids, offset: 3n, maxBytes: 4000 });
      const json = readToJson(s.ids, r);
      assert.equal(json.first_offset, r.firstOffset.toString());
      // Asked for offset 3: the decoded messages start there, whatever the batch boundary.
      const asked = readToJson(s.ids, r, { offset: 3n });
      assert.equal(asked.messages[0].offset, "3");
      assert.deepEqual(asked.messages, json.messages.filter((m) => BigInt(m.offset) >= 3n));
      if (format === "iggy-0.9") assert.ok(r.firstOffset < 3n, "the read starts at its batch");
      assert.equal(json.next_offset, r.nextOffset.toString());
      assert.equal(json.format, format);
      assert.equal(json.gap, null);
      const codec = codecFor(format);
      const expected = [...codec.walk(r.bytes, { file: "x", startOffset: r.firstOffset })]
        .flatMap((rec) => codec.messages(r.bytes, rec, "x"));
      assert.equal(json.messages.length, expected.length);
      json.messages.forEach((m, i) => {
        const e = expected[i];
        assert.equal(m.offset, e.offset.toString());
        assert.equal(m.timestamp, e.timestamp.toString());
        assert.equal(m.origin_timestamp, e.originTimestamp.toString());
        assert.equal(m.id, e.id.toString());
        assert.deepEqual(new Uint8Array(Buffer.from(m.payload, "base64")), e.payload);
        // The generator puts a "gen" → uint64 offset header on every tenth message.
        assert.deepEqual(
          m.headers,
          e.offset % 10n === 0n
            ? [{ key: "gen", key_kind: "string", value: e.offset.toString(), value_kind: "uint64" }]
            : [],
        );
        assert.equal(m.headers_raw, undefined);
      });
      assert.equal(json.messages.at(-1)!.offset, (r.nextOffset - 1n).toString());
    } finally {
      await s.cleanup();
    }
  });
}

Deno.test("an invalid user-headers blob is kept raw, not hidden", async () => {
  // The 0.8 test vector's second message carries bytes that are not a valid header blob.
  const log = new Uint8Array(await testdata("iggy-0.8-two-messages.log"));
  const json = readToJson({ stream: 0, topic: 0, partition: 0 }, {
    bytes: log,
    firstOffset: 0n,
    nextOffset: 2n,
    source: "local",
    format: "iggy-0.8",
    records: 2,
  });
  assert.deepEqual(json.messages.map((m) => m.id), ["7", "8"]);
  assert.deepEqual(json.messages[0].headers, []);
  assert.equal(json.messages[1].headers, null);
  assert.equal(
    Buffer.from(json.messages[1].headers_raw!, "base64").toString(),
    "user-header-bytes",
  );
  assert.equal(Buffer.from(json.messages[1].payload, "base64").toString(), "second-payload");
});

Deno.test("user headers: every kind decodes; malformed blobs are refused", () => {
  const entry = (kind: number, bytes: number[]) => [kind, bytes.length, 0, 0, 0, ...bytes];
  const key = (text: string) => entry(2, [...new TextEncoder().encode(text)]);
  const blob = new Uint8Array([
    ...key("s"),
    ...entry(2, [0x68, 0x69]),
    ...key("b"),
    ...entry(3, [1]),
    ...key("i8"),
    ...entry(4, [0xff]),
    ...key("u32"),
    ...entry(11, [1, 0, 0, 0]),
    ...key("i64"),
    ...entry(7, [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
    ...key("u128"),
    ...entry(13, [1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]),
    ...key("f64"),
    ...entry(15, [0, 0, 0, 0, 0, 0, 0xf8, 0x3f]),
    ...key("raw"),
    ...entry(1, [0, 1, 2]),
  ]);
  assert.deepEqual(parseUserHeaders(blob)!.map((h) => [h.key, h.value, h.value_kind]), [
    ["s", "hi", "string"],
    ["b", true, "bool"],
    ["i8", -1, "int8"],
    ["u32", 1, "uint32"],
    ["i64", "-2", "int64"],
    ["u128", ((1n << 64n) + 1n).toString(), "uint128"],
    ["f64", 1.5, "float64"],
    ["raw", "AAEC", "raw"],
  ]);
  assert.deepEqual(parseUserHeaders(new Uint8Array(0)), []);
  for (
    const bad of [
      [...key("k")], // a key without a value
      [...key("k"), ...entry(0, [1])], // kind 0
      [...key("k"), ...entry(16, [1])], // unknown kind
      [...key("k"), ...entry(3, [2])], // bool must be 0 or 1
      [...key("k"), ...entry(11, [1, 0])], // uint32 needs 4 bytes
      [...key("k"), 2, 0, 0, 0, 0], // zero length
      [...key("k"), ...entry(2, [0xc3])], // invalid UTF-8
      [...key("k"), ...entry(2, [0x61]), 9], // trailing byte
    ]
  ) {
    assert.equal(parseUserHeaders(new Uint8Array(bad)), undefined, JSON.stringify(bad));
  }
});
