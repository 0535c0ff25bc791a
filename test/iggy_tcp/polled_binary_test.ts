// The PollMessages answer body over TCP at 0.8 and 0.9 (src/iggy_tcp/polled_*.ts): segment
// records pass through byte for byte, decoded messages re-encode to the same bytes, a 0.9 batch
// is sliced exactly as the broker slices it, tierd's part splices in front of the broker's, and
// hostile answers end in a WireError.
import { concatBytes } from "../../src/base/bytes.ts";
import assert from "node:assert/strict";
import fc from "fast-check";
import { codecFor } from "../../src/format/codecs.ts";
import type { Message } from "../../src/format/types.ts";
import { initHashes, xxh3_64 } from "../../src/hash.ts";
import { decodePolled08, encodeMessage08, polledPayload08 } from "../../src/iggy_tcp/polled_08.ts";
import {
  type BatchFields09,
  decodePolled09,
  encodeBatch09,
  type OutgoingBatch09,
  polledPayload09,
  sliceRecord09,
} from "../../src/iggy_tcp/polled_09.ts";
import {
  decodePollHead,
  type PolledMessage,
  polledPayload,
  splicePolled,
} from "../../src/iggy_tcp/polled_binary.ts";
import { WireError, type WireErrorKind } from "../../src/iggy_tcp/wire.ts";
import { batches09Arb, messages08Arb } from "../format/_fixtures.ts";

await initHashes();
const RUNS = { numRuns: 150 };
const iggy08 = codecFor("iggy-0.8");
const iggy09 = codecFor("iggy-0.9");

const concat = (...parts: Uint8Array[]) => concatBytes(parts);

function view(b: Uint8Array): DataView {
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

function assertWire(fn: () => unknown, kinds: WireErrorKind[]): void {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof WireError, `expected a WireError, got ${err}`);
    assert.ok(kinds.includes(err.kind), `${err.kind}: ${err.message}`);
    return;
  }
  assert.fail(`expected a WireError (${kinds.join(" | ")}), nothing was thrown`);
}

function onlyWireErrors(fn: () => unknown): void {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof WireError)) throw err;
  }
}

/** A message as its segment record stores it, with its stored checksum. */
function polled08(m: Message): { record: Uint8Array; polled: PolledMessage } {
  const record = iggy08.encodeRecord([m], { partitionId: 0 });
  return { record, polled: { message: m, checksum: view(record).getBigUint64(0, true) } };
}

const HEAD = { partitionId: 3, currentOffset: 1000n };

// ---------------------------------------------------------------------------------------------
// 0.8

Deno.test("0.8: a segment record is the message on the wire; encode and decode round-trip", () => {
  fc.assert(
    fc.property(messages08Arb, ({ messages }) => {
      const made = messages.map(polled08);
      for (const { record, polled } of made) assert.deepEqual(encodeMessage08(polled), record);
      const payload = polledPayload08(HEAD, made.map((x) => x.record));
      assert.deepEqual(polledPayload08(HEAD, [concat(...made.map((x) => x.record))]), payload);
      const { head, messages: decoded } = decodePolled08(payload);
      assert.deepEqual(head, { ...HEAD, count: messages.length });
      assert.deepEqual(decoded.map((d) => d.message), messages);
      decoded.forEach((d, i) => {
        assert.equal(d.checksum, made[i].polled.checksum);
        assert.deepEqual(payload.subarray(d.start, d.end), made[i].record);
      });
    }),
    RUNS,
  );
});

Deno.test("0.8: golden bytes — head, 64-byte header, payload, then user headers", () => {
  const m: Message = {
    offset: 7n,
    timestamp: 0x1122n,
    originTimestamp: 0x33n,
    id: (5n << 64n) | 6n,
    payload: new Uint8Array([0xaa, 0xbb]),
    userHeaders: new Uint8Array([0xcc]),
  };
  const payload = polledPayload08(HEAD, [encodeMessage08({ message: m, checksum: 0xdeadn })]);
  const v = view(payload);
  // poll_messages_handler.rs:59-70 (server-0.8.0): partition_id u32, current_offset u64, count u32.
  assert.equal(v.getUint32(0, true), 3);
  assert.equal(v.getBigUint64(4, true), 1000n);
  assert.equal(v.getUint32(12, true), 1);
  // message_header.rs:24-34: checksum 0..8, id 8..24, offset 24..32, timestamp 32..40,
  // origin_timestamp 40..48, user_headers_length 48..52, payload_length 52..56, reserved 56..64.
  const at = 16;
  assert.equal(v.getBigUint64(at, true), 0xdeadn);
  assert.equal(v.getBigUint64(at + 8, true), 6n);
  assert.equal(v.getBigUint64(at + 16, true), 5n);
  assert.equal(v.getBigUint64(at + 24, true), 7n);
  assert.equal(v.getBigUint64(at + 32, true), 0x1122n);
  assert.equal(v.getBigUint64(at + 40, true), 0x33n);
  assert.equal(v.getUint32(at + 48, true), 1);
  assert.equal(v.getUint32(at + 52, true), 2);
  assert.equal(v.getBigUint64(at + 56, true), 0n);
  // polled_messages.rs:101-117: the payload first, then the user headers.
  assert.deepEqual([...payload.subarray(at + 64)], [0xaa, 0xbb, 0xcc]);
  assert.equal(payload.length, 16 + 64 + 3);
});

Deno.test("0.8: hostile answers — truncated, lying counts, lengths past the end, reserved set", () => {
  fc.assert(
    fc.property(messages08Arb, fc.nat(), ({ messages }, cut) => {
      const payload = polledPayload08(HEAD, messages.map((m) => polled08(m).record));
      const n = cut % payload.length;
      assertWire(() => decodePolled08(payload.subarray(0, n)), ["truncated", "count_mismatch"]);
      for (const lie of [messages.length - 1, messages.length + 1, 0xffff_ffff]) {
        const liar = payload.slice();
        view(liar).setUint32(12, lie, true);
        assertWire(() => decodePolled08(liar), ["count_mismatch"]);
      }
      const long = payload.slice();
      view(long).setUint32(16 + 52, 0xffff_fff0, true);
      assertWire(() => decodePolled08(long), ["truncated"]);
      const reserved = payload.slice();
      reserved[16 + 60] = 1;
      assertWire(() => decodePolled08(reserved), ["bad_value"]);
    }),
    { numRuns: 60 },
  );
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
      onlyWireErrors(() => decodePolled08(bytes));
    }),
    RUNS,
  );
});

// ---------------------------------------------------------------------------------------------
// 0.9

/** Stored batch records (with the codec's own encoding) and their messages with checksums. */
function stored09(partitionId: number, batches: Message[][]) {
  return batches.map((messages) => {
    const record = iggy09.encodeRecord(messages, { partitionId });
    const v = view(record);
    const fields: BatchFields09 = {
      partitionId: v.getBigUint64(0, true),
      baseOffset: v.getBigUint64(8, true),
      baseTimestamp: v.getBigUint64(16, true),
      originTimestamp: v.getBigUint64(24, true),
    };
    const polled: PolledMessage[] = [];
    let at = 256;
    for (const m of messages) {
      polled.push({ message: m, checksum: v.getBigUint64(at, true) });
      at += 48 + m.payload.length + m.userHeaders.length;
    }
    return { record, fields, polled };
  });
}

function joined(batch: OutgoingBatch09): Uint8Array {
  return concat(...batch.parts);
}

Deno.test("0.9: a whole batch is sent as stored; decode and encode round-trip", () => {
  fc.assert(
    fc.property(batches09Arb, ({ partitionId, batches }) => {
      const made = stored09(partitionId, batches);
      const outgoing = made.map(({ record, polled }) => {
        const whole = sliceRecord09(record, {
          lookup: { offset: polled[0].message.offset },
          count: 0xffff_ffff,
        })!;
        assert.equal(whole.parts.length, 1);
        assert.equal(whole.parts[0], record); // the stored bytes themselves, not a copy
        assert.equal(whole.count, polled.length);
        return whole;
      });
      made.forEach(({ record, fields, polled }) => {
        assert.deepEqual(joined(encodeBatch09(fields, polled)), record);
      });
      const payload = polledPayload09(HEAD, outgoing);
      const { head, batches: decoded } = decodePolled09(payload, { verify: true });
      assert.deepEqual(head, { ...HEAD, count: batches.flat().length });
      decoded.forEach((b, i) => {
        assert.deepEqual(payload.subarray(b.start, b.end), made[i].record);
        assert.deepEqual(
          { ...b, start: 0, end: 0, checksum: 0n, messages: [] },
          { ...made[i].fields, start: 0, end: 0, checksum: 0n, messages: [] },
        );
        assert.deepEqual(b.messages.map((m) => m.message), batches[i]);
        assert.deepEqual(b.messages.map((m) => m.checksum), made[i].polled.map((p) => p.checksum));
        b.messages.forEach((m, k) => {
          const frame = payload.subarray(m.start, m.end);
          assert.equal(view(frame).getBigUint64(0, true), made[i].polled[k].checksum);
        });
      });
    }),
    RUNS,
  );
});

Deno.test("0.9: a poll starting inside a batch or cut by count gets the broker's rewritten slice", () => {
  fc.assert(
    fc.property(batches09Arb, fc.nat(), fc.nat(), ({ partitionId, batches }, i0, k0) => {
      const [{ record, fields, polled }] = stored09(partitionId, batches.slice(0, 1));
      const from = i0 % polled.length;
      const count = 1 + (k0 % (polled.length - from));
      const slice = sliceRecord09(record, {
        lookup: { offset: polled[from].message.offset },
        count,
      })!;
      const wanted = polled.slice(from, from + count);
      assert.equal(slice.count, count);
      assert.equal(slice.lastOffset, wanted[wanted.length - 1].message.offset);
      // Built from decoded messages, the same bytes as sliced from the stored record.
      assert.deepEqual(joined(encodeBatch09(fields, wanted)), joined(slice));
      const { batches: [got] } = decodePolled09(polledPayload09(HEAD, [slice]), { verify: true });
      assert.deepEqual(got.messages.map((m) => m.message), wanted.map((p) => p.message));
      assert.equal(got.baseOffset, fields.baseOffset);
      if (count < polled.length) assert.equal(slice.parts[1].buffer, record.buffer); // a view
    }),
    RUNS,
  );
});

Deno.test("0.9: golden slice — header rewritten as push_selected_batch_fragments does", () => {
  const base = 100n;
  const messages: Message[] = [0, 1, 2].map((i) => ({
    offset: base + BigInt(i),
    timestamp: 5000n,
    originTimestamp: 4000n + BigInt(i),
    id: BigInt(i + 1),
    payload: new Uint8Array([i, i]),
    userHeaders: new Uint8Array(0),
  }));
  const [{ record }] = stored09(9, [messages]);
  const slice = sliceRecord09(record, { lookup: { offset: 101n }, count: 1 })!;
  const [header, blob] = slice.parts;
  const h = view(header);
  // journal.rs:1112-1131 (cc269ef7): the stored header with batch_length, message_count and
  // batch_checksum recomputed; partition_id, base_offset, timestamps kept.
  assert.equal(h.getBigUint64(0, true), 9n);
  assert.equal(h.getBigUint64(8, true), base);
  assert.equal(h.getBigUint64(16, true), 5000n);
  assert.equal(h.getBigUint64(24, true), 4000n);
  assert.equal(h.getBigUint64(32, true), 256n + 48n + 2n);
  assert.equal(h.getUint32(48, true), 1);
  assert.ok(header.subarray(52).every((b) => b === 0));
  // The selected frame's stored bytes, its offset_delta (1) and timestamp_delta (1) untouched.
  assert.deepEqual(blob, record.subarray(256 + 50, 256 + 100));
  assert.equal(view(blob).getUint32(24, true), 1);
  assert.equal(view(blob).getUint32(28, true), 1);
  // batch.rs:439-459: XXH3-64 of partition_id..batch_length, message_count, each frame checksum.
  const covered = concat(header.subarray(0, 40), header.subarray(48, 52), blob.subarray(0, 8));
  assert.equal(h.getBigUint64(40, true), xxh3_64(covered));
  // What the SDK reads from it (polled_messages.rs:121-129): offset = base + delta.
  const { batches: [b] } = decodePolled09(polledPayload09(HEAD, [slice]), { verify: true });
  assert.deepEqual(b.messages.map((m) => [m.message.offset, m.message.originTimestamp]), [
    [101n, 4001n],
  ]);
});

Deno.test("0.9: selection edges — before, after, count 0, timestamp lookup", () => {
  const messages: Message[] = [0, 1].map((i) => ({
    offset: 10n + BigInt(i),
    timestamp: 700n,
    originTimestamp: 600n,
    id: 1n,
    payload: new Uint8Array(1),
    userHeaders: new Uint8Array(0),
  }));
  const [{ record }] = stored09(1, [messages]);
  assert.equal(sliceRecord09(record, { lookup: { offset: 0n }, count: 9 })!.parts[0], record);
  assert.equal(sliceRecord09(record, { lookup: { offset: 12n }, count: 9 }), undefined);
  assert.equal(sliceRecord09(record, { lookup: { offset: 10n }, count: 0 }), undefined);
  // journal.rs:1057-1065: a timestamp poll takes a batch whole or not at all (by base_timestamp).
  assert.equal(sliceRecord09(record, { lookup: { timestamp: 700n }, count: 9 })!.count, 2);
  assert.equal(sliceRecord09(record, { lookup: { timestamp: 700n }, count: 1 })!.count, 1);
  assert.equal(sliceRecord09(record, { lookup: { timestamp: 701n }, count: 9 }), undefined);
  assert.throws(() =>
    sliceRecord09(concat(record, new Uint8Array(1)), {
      lookup: { offset: 0n },
      count: 1,
    }), WireError);
});

Deno.test("0.9: encodeBatch09 refuses messages its header cannot express", () => {
  const fields: BatchFields09 = {
    partitionId: 0n,
    baseOffset: 10n,
    baseTimestamp: 5n,
    originTimestamp: 5n,
  };
  const m: Message = {
    offset: 10n,
    timestamp: 5n,
    originTimestamp: 5n,
    id: 0n,
    payload: new Uint8Array(0),
    userHeaders: new Uint8Array(0),
  };
  for (
    const bad of [
      { ...m, offset: 9n },
      { ...m, timestamp: 6n },
      { ...m, originTimestamp: 4n },
      { ...m, originTimestamp: 5n + (1n << 32n) },
    ]
  ) {
    assert.throws(() => encodeBatch09(fields, [{ message: bad, checksum: 0n }]), WireError);
  }
  assert.throws(() => encodeBatch09(fields, []), WireError);
});

Deno.test("0.9: hostile answers — truncated, lying counts, batch lengths, frames past the batch", () => {
  fc.assert(
    fc.property(batches09Arb, fc.nat(), ({ partitionId, batches }, cut) => {
      const made = stored09(partitionId, batches);
      const payload = polledPayload(
        { ...HEAD, count: batches.flat().length },
        made.map((m) => m.record),
      );
      assertWire(
        () => decodePolled09(payload.subarray(0, cut % payload.length)),
        ["truncated", "count_mismatch"],
      );
      for (const lie of [batches.flat().length - 1, batches.flat().length + 1]) {
        const liar = payload.slice();
        view(liar).setUint32(12, lie, true);
        assertWire(() => decodePolled09(liar), ["count_mismatch"]);
      }
      const long = payload.slice();
      view(long).setBigUint64(16 + 32, 1n << 60n, true);
      assertWire(() => decodePolled09(long), ["truncated"]);
      const short = payload.slice();
      view(short).setBigUint64(16 + 32, 100n, true);
      assertWire(() => decodePolled09(short), ["bad_batch"]);
      const countLies = payload.slice();
      view(countLies).setUint32(16 + 48, batches[0].length + 1, true);
      assertWire(() => decodePolled09(countLies), ["bad_batch"]);
      const frameOverrun = payload.slice();
      view(frameOverrun).setUint32(16 + 256 + 36, 1 << 20, true);
      assertWire(() => decodePolled09(frameOverrun), ["bad_batch"]);
      const reserved = payload.slice();
      reserved[16 + 100] = 1;
      assertWire(() => decodePolled09(reserved), ["bad_batch"]);
      const flipped = payload.slice();
      flipped[16 + 256 + 8] ^= 1; // a frame's id: its frame checksum no longer matches
      decodePolled09(flipped);
      assertWire(() => decodePolled09(flipped, { verify: true }), ["bad_batch"]);
    }),
    { numRuns: 60 },
  );
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
      onlyWireErrors(() => decodePolled09(bytes, { verify: true }));
      onlyWireErrors(() => sliceRecord09(bytes, { lookup: { offset: 0n }, count: 5 }));
    }),
    RUNS,
  );
});

// ---------------------------------------------------------------------------------------------
// The splice

Deno.test("splice: tierd's messages, then the broker's, under the broker's head", () => {
  fc.assert(
    fc.property(messages08Arb, fc.nat(), ({ messages }, j0) => {
      const j = j0 % (messages.length + 1);
      const records = messages.map((m) => polled08(m).record);
      const ours = polledPayload08({ partitionId: 3, currentOffset: 0n }, records.slice(0, j));
      const brokers = polledPayload08({ partitionId: 4, currentOffset: 99n }, records.slice(j));
      const spliced = decodePolled08(splicePolled(ours, brokers));
      assert.deepEqual(spliced.head, {
        partitionId: 4,
        currentOffset: 99n,
        count: messages.length,
      });
      assert.deepEqual(spliced.messages.map((m) => m.message), messages);
    }),
    RUNS,
  );
  fc.assert(
    fc.property(batches09Arb, fc.nat(), ({ partitionId, batches }, j0) => {
      const made = stored09(partitionId, batches);
      const j = j0 % (made.length + 1);
      const whole = (m: (typeof made)[number]) =>
        sliceRecord09(m.record, { lookup: { offset: 0n }, count: 0xffff_ffff })!;
      const ours = polledPayload09(
        { partitionId: 0, currentOffset: 0n },
        made.slice(0, j).map(whole),
      );
      const brokers = polledPayload09(
        { partitionId: 7, currentOffset: 5n },
        made.slice(j).map(whole),
      );
      const spliced = decodePolled09(splicePolled(ours, brokers), { verify: true });
      assert.deepEqual(spliced.head, {
        partitionId: 7,
        currentOffset: 5n,
        count: batches.flat().length,
      });
      assert.deepEqual(
        spliced.batches.flatMap((b) => b.messages.map((m) => m.message)),
        batches.flat(),
      );
    }),
    RUNS,
  );
});

Deno.test("splice: hostile heads", () => {
  const empty = polledPayload({ partitionId: 1, currentOffset: 2n, count: 0 }, []);
  assert.deepEqual(decodePollHead(splicePolled(empty, empty)), {
    partitionId: 1,
    currentOffset: 2n,
    count: 0,
  });
  assertWire(() => splicePolled(empty.subarray(0, 15), empty), ["truncated"]);
  const big = polledPayload({ partitionId: 1, currentOffset: 2n, count: 0xffff_ffff }, []);
  assertWire(() => splicePolled(big, big), ["out_of_range"]);
});
