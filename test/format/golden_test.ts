// The golden vectors (test/fixtures/data/) decode to their documented fields, verify, and re-encode byte for byte.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { codecFor } from "../../src/format/codecs.ts";
import { initHashes, xxh3_64 } from "../../src/hash.ts";
import { all, TESTDATA, testdata } from "./_fixtures.ts";

await initHashes();
const text = (s: string) => new TextEncoder().encode(s);

Deno.test("the test vectors and their README are inside the repository", async () => {
  const root = fileURLToPath(new URL("../../", import.meta.url));
  const dir = fileURLToPath(TESTDATA);
  assert.ok(dir.startsWith(root), `${dir} is outside the repository ${root}`);
  assert.ok(existsSync(join(dir, "README.md")), dir);
  const sizes: Record<string, number> = {
    "iggy-0.9-batch-golden.bin": 396,
    "iggy-0.8-two-messages.log": 172,
    "iggy-0.8-two-messages.index": 32,
  };
  for (const [name, size] of Object.entries(sizes)) {
    assert.equal((await testdata(name)).length, size, name);
  }
});

Deno.test("iggy-0.9 golden batch: every documented field, checksums, byte-exact re-encode", async () => {
  const bytes = await testdata("iggy-0.9-batch-golden.bin");
  assert.equal(bytes.length, 396);
  const codec = codecFor("iggy-0.9");
  const file = "iggy-0.9-batch-golden.bin";

  const [record] = all(codec.walk(bytes, { file, startOffset: 100n, verify: true }));
  assert.deepEqual(record, {
    position: 0,
    size: 396,
    firstOffset: 100n,
    lastOffset: 101n,
    timestamp: 5000n,
    messageCount: 2,
  });
  const v = new DataView(bytes.buffer, bytes.byteOffset);
  assert.equal(v.getBigUint64(0, true), 3n, "partition_id");
  assert.equal(v.getBigUint64(24, true), 1000n, "origin_timestamp");
  assert.equal(v.getBigUint64(40, true), 0xd2ee8f8ab32668c9n, "batch_checksum");
  assert.equal(v.getBigUint64(256, true), 0x7596755a20b9d2bfn, "frame 0 checksum");
  assert.equal(v.getBigUint64(256 + 48 + 13, true), 0xc0b78e751c7e6bd6n, "frame 1 checksum");

  const messages = codec.messages(bytes, record, file);
  assert.deepEqual(messages, [
    {
      offset: 100n,
      timestamp: 5000n,
      originTimestamp: 1000n,
      id: 7n,
      payload: text("first-payload"),
      userHeaders: new Uint8Array(0),
    },
    {
      offset: 101n,
      timestamp: 5000n,
      originTimestamp: 1050n,
      id: 8n,
      payload: text("second-payload"),
      userHeaders: text("user-header-bytes"),
    },
  ]);

  const decoded = codec.decodeRecord(bytes, { file });
  assert.equal(decoded.partitionId, 3);
  assert.deepEqual(decoded.messages, messages);
  assert.deepEqual(codec.encodeRecord(messages, { partitionId: 3 }), bytes);
});

Deno.test("iggy-0.9 golden batch: the unstamped producer form has the documented checksum", async () => {
  const bytes = await testdata("iggy-0.9-batch-golden.bin");
  const codec = codecFor("iggy-0.9");
  const { messages } = codec.decodeRecord(bytes, { file: "golden" });
  const unstamped = codec.encodeRecord(
    messages.map((m) => ({ ...m, offset: m.offset - 100n, timestamp: 0n })),
    { partitionId: 0 },
  );
  const v = new DataView(unstamped.buffer);
  assert.equal(v.getBigUint64(40, true), 0x7c260763c8381fa9n);
});

Deno.test("iggy-0.8 two messages: decode, verify, index, byte-exact re-encode", async () => {
  const log = await testdata("iggy-0.8-two-messages.log");
  const index = await testdata("iggy-0.8-two-messages.index");
  const codec = codecFor("iggy-0.8");
  const file = "iggy-0.8-two-messages.log";
  assert.equal(xxh3_64(new Uint8Array(0)), 0x2d06800538d394c2n, "xxh3 of the empty input");

  const records = all(codec.walk(log, { file, startOffset: 0n, verify: true }));
  assert.deepEqual(records, [
    { position: 0, size: 77, firstOffset: 0n, lastOffset: 0n, timestamp: 5000n, messageCount: 1 },
    { position: 77, size: 95, firstOffset: 1n, lastOffset: 1n, timestamp: 5000n, messageCount: 1 },
  ]);
  const v = new DataView(log.buffer, log.byteOffset);
  assert.equal(v.getBigUint64(0, true), 0xc6e837c58a695ebbn);
  assert.equal(v.getBigUint64(77, true), 0x3989556d32364ef9n);

  const messages = records.flatMap((r) => codec.messages(log, r, file));
  assert.deepEqual(messages, [
    {
      offset: 0n,
      timestamp: 5000n,
      originTimestamp: 1000n,
      id: 7n,
      payload: text("first-payload"),
      userHeaders: new Uint8Array(0),
    },
    {
      offset: 1n,
      timestamp: 5000n,
      originTimestamp: 1050n,
      id: 8n,
      payload: text("second-payload"),
      userHeaders: text("user-header-bytes"),
    },
  ]);

  const entries = codec.parseIndex(index, {
    file: "iggy-0.8-two-messages.index",
    startOffset: 0n,
    logSize: log.length,
  });
  // Normalized to START positions; the file holds END positions 77 and 172.
  assert.deepEqual(entries, [
    { offset: 0n, position: 0, timestamp: 5000n },
    { offset: 1n, position: 77, timestamp: 5000n },
  ]);

  const reLog = new Uint8Array(
    messages.flatMap((m) => [...codec.encodeRecord([m], { partitionId: 0 })]),
  );
  assert.deepEqual(reLog, log);
  assert.deepEqual(codec.encodeIndex(entries, { startOffset: 0n, logSize: log.length }), index);
});
