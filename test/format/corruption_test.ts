// Damaged segments fail loudly: a FormatError with the right code, the right file and the
// exact byte position of the offending record, frame or index entry — never silent success.
import assert from "node:assert/strict";
import fc from "fast-check";
import type { SegmentCodec } from "../../src/format/codec.ts";
import { codecFor } from "../../src/format/codecs.ts";
import { FormatError } from "../../src/format/errors.ts";
import { generatePartition } from "../../src/format/generate.ts";
import type { Message } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { tempDir } from "../_util.ts";
import { concatBytes } from "../../src/base/bytes.ts";
import { all, assertFormatError, testdata } from "./_fixtures.ts";
import { readFile } from "node:fs/promises";

await initHashes();
const iggy08 = codecFor("iggy-0.8");
const iggy09 = codecFor("iggy-0.9");
const LOG = "seg.log";
const INDEX = "seg.index";
const NEWER = /newer Iggy batch format \(e\.g\. 0\.10\)/;

const log08 = await testdata("iggy-0.8-two-messages.log"); // records at 0 (77 B) and 77 (95 B)
const index08 = await testdata("iggy-0.8-two-messages.index");

/** A 0.9 segment starting at offset 100: the golden batch, then batches at 102..104 and 105. */
const golden09 = await testdata("iggy-0.9-batch-golden.bin");
const msg = (offset: bigint, timestamp: bigint, payload: string, headers = ""): Message => ({
  offset,
  timestamp,
  originTimestamp: timestamp - 7n,
  id: 1000n + offset,
  payload: new TextEncoder().encode(payload),
  userHeaders: new TextEncoder().encode(headers),
});
const batch1 = iggy09.encodeRecord(
  [msg(102n, 6000n, "a"), msg(103n, 6000n, "bb", "h"), msg(104n, 6000n, "ccc")],
  { partitionId: 3 },
);
const batch2 = iggy09.encodeRecord([msg(105n, 7000n, "dddd")], { partitionId: 3 });
const log09 = concatBytes([golden09, batch1, batch2]);
const B1 = golden09.length; // 396
const B2 = B1 + batch1.length;
const index09 = iggy09.encodeIndex([
  { offset: 100n, position: 0, timestamp: 5000n },
  { offset: 102n, position: B1, timestamp: 6000n },
  { offset: 105n, position: B2, timestamp: 7000n },
], { startOffset: 100n, logSize: log09.length });

function walk(codec: SegmentCodec, log: Uint8Array, startOffset: bigint, more = {}) {
  return () => all(codec.walk(log, { file: LOG, startOffset, ...more }));
}
function patched(bytes: Uint8Array, at: number, value: number): Uint8Array {
  const copy = bytes.slice();
  copy[at] = value;
  return copy;
}

Deno.test("the fixtures are valid", () => {
  assert.equal(all(iggy08.walk(log08, { file: LOG, startOffset: 0n })).length, 2);
  assert.equal(all(iggy09.walk(log09, { file: LOG, startOffset: 100n })).length, 3);
  assert.equal(
    iggy09.parseIndex(index09, { file: INDEX, startOffset: 100n, logSize: log09.length }).length,
    3,
  );
});

Deno.test("a truncated record: the log ends inside a header or a body", () => {
  // 0.8: cut inside the second message's header, then inside its payload.
  assertFormatError(walk(iggy08, log08.subarray(0, 100), 0n), {
    code: "straddles_eof",
    file: LOG,
    position: 77,
  });
  assertFormatError(walk(iggy08, log08.subarray(0, 150), 0n), {
    code: "straddles_eof",
    file: LOG,
    position: 77,
  });
  // 0.9: cut inside the second batch's header, then inside its last frame.
  assertFormatError(walk(iggy09, log09.subarray(0, B1 + 100), 100n), {
    code: "straddles_eof",
    file: LOG,
    position: B1,
  });
  assertFormatError(walk(iggy09, log09.subarray(0, B2 - 1), 100n), {
    code: "straddles_eof",
    file: LOG,
    position: B1,
  });
  // Positions are file positions when the buffer is a range of the file.
  assertFormatError(
    walk(iggy09, log09.subarray(B1, B2 - 1), 100n, { filePosition: B1, expectedOffset: 102n }),
    { code: "straddles_eof", file: LOG, position: B1 },
  );
  // …unless the caller reads a range cut at an arbitrary byte.
  assert.equal(
    walk(iggy09, log09.subarray(0, B2 - 1), 100n, { allowPartialTail: true })().length,
    1,
  );
});

Deno.test("a flipped payload byte fails the checksum of its record (0.8) or frame (0.9)", () => {
  assertFormatError(walk(iggy08, patched(log08, 77 + 64 + 3, 0x58), 0n), {
    code: "checksum",
    file: LOG,
    position: 77,
    message: /stored 0x3989556d32364ef9/,
  });
  // batch1's second frame starts after the 256-byte header and the first 49-byte frame.
  const frame1 = B1 + 256 + 48 + 1;
  assertFormatError(walk(iggy09, patched(log09, frame1 + 48, 0x41), 100n), {
    code: "checksum",
    file: LOG,
    position: frame1,
    message: /frame 1 of the batch at byte 396/,
  });
  // Checksums are skipped on request; the structure still walks.
  assert.equal(
    walk(iggy09, patched(log09, frame1 + 48, 0x41), 100n, { verify: false })().length,
    3,
  );
});

Deno.test("header fields outside the frame checksums are covered by batch_checksum", () => {
  for (const at of [0, 8, 16, 24, 40, 47]) { // partition_id, base_offset, timestamps, checksum
    assertFormatError(walk(iggy09, patched(log09, B1 + at, log09[B1 + at] ^ 0x01), 100n), {
      code: "checksum",
      file: LOG,
      position: B1,
      message: /batch_checksum mismatch/,
    });
  }
  // A flip of the stored 0.8 checksum itself.
  assertFormatError(walk(iggy08, patched(log08, 80, log08[80] ^ 0x80), 0n), {
    code: "checksum",
    file: LOG,
    position: 77,
  });
});

Deno.test("non-zero reserved bytes are refused as a likely newer format", () => {
  for (const at of [56, 63]) {
    assertFormatError(walk(iggy08, patched(log08, 77 + at, 1), 0n), {
      code: "reserved_nonzero",
      file: LOG,
      position: 77,
      message: NEWER,
    });
  }
  for (const at of [52, 53, 100, 255]) { // 52 is 0.10's `flags` byte
    assertFormatError(walk(iggy09, patched(log09, B1 + at, 1), 100n), {
      code: "reserved_nonzero",
      file: LOG,
      position: B1,
      message: NEWER,
    });
    // Reserved bytes are checked even when checksums are not.
    assertFormatError(walk(iggy09, patched(log09, B1 + at, 1), 100n, { verify: false }), {
      code: "reserved_nonzero",
      file: LOG,
      position: B1,
    });
  }
  const frame2 = B1 + 256 + 49 + 51;
  for (const at of [40, 47]) {
    assertFormatError(walk(iggy09, patched(log09, frame2 + at, 9), 100n), {
      code: "reserved_nonzero",
      file: LOG,
      position: frame2,
      message: NEWER,
    });
  }
});

Deno.test("offsets must be contiguous from the segment start", () => {
  assertFormatError(walk(iggy08, log08, 5n), { code: "offset_gap", file: LOG, position: 0 });
  const skip = concatBytes([
    iggy08.encodeRecord([msg(0n, 100n, "x")], { partitionId: 0 }),
    iggy08.encodeRecord([msg(2n, 100n, "y")], { partitionId: 0 }),
  ]);
  assertFormatError(walk(iggy08, skip, 0n), {
    code: "offset_gap",
    file: LOG,
    position: 65,
    message: /offset 2, expected 1/,
  });
  const gap09 = concatBytes([golden09, batch2]);
  assertFormatError(walk(iggy09, gap09, 100n), { code: "offset_gap", file: LOG, position: B1 });
  // A range's first record may be anywhere at or above the segment start…
  assert.equal(walk(iggy09, batch2, 100n, { filePosition: B2 })().length, 1);
  // …but never below it.
  assertFormatError(walk(iggy09, batch2, 106n, { filePosition: B2 }), {
    code: "offset_gap",
    file: LOG,
    position: B2,
  });
});

Deno.test("impossible lengths", () => {
  // 0.9 batch_length below the header size, and frames that do not tile the blob.
  const short = log09.slice();
  new DataView(short.buffer).setBigUint64(B1 + 32, 100n, true);
  assertFormatError(walk(iggy09, short, 100n), { code: "bad_length", file: LOG, position: B1 });
  const long = log09.slice();
  new DataView(long.buffer).setBigUint64(B1 + 32, BigInt(batch1.length + 1), true);
  assertFormatError(walk(iggy09, long, 100n), { code: "bad_length", file: LOG, position: B1 });
  const zero = log09.slice();
  new DataView(zero.buffer).setUint32(B1 + 48, 0, true);
  assertFormatError(walk(iggy09, zero, 100n), { code: "bad_length", file: LOG, position: B1 });
  // 0.8 payload length over Iggy's 64 MB limit.
  const huge = log08.slice();
  new DataView(huge.buffer).setUint32(52, 64_000_001, true);
  assertFormatError(walk(iggy08, huge, 0n), { code: "bad_length", file: LOG, position: 0 });
  // decodeRecord wants exactly one record.
  assertFormatError(() => iggy09.decodeRecord(log09.subarray(0, B2), { file: LOG }), {
    code: "bad_length",
    file: LOG,
    position: 0,
  });
});

Deno.test("index entries past the end of the log", () => {
  // 0.8: the second entry ends at byte 172 but the log was cut to 150.
  assertFormatError(
    () => iggy08.parseIndex(index08, { file: INDEX, startOffset: 0n, logSize: 150 }),
    { code: "index_past_eof", file: INDEX, position: 16 },
  );
  // 0.9: the third entry starts at B2 but the log ends there.
  assertFormatError(
    () => iggy09.parseIndex(index09, { file: INDEX, startOffset: 100n, logSize: B2 }),
    { code: "index_past_eof", file: INDEX, position: 48 },
  );
});

Deno.test("unsorted index entries", () => {
  const swapped08 = concatBytes([index08.subarray(16), index08.subarray(0, 16)]);
  assertFormatError(
    () => iggy08.parseIndex(swapped08, { file: INDEX, startOffset: 0n, logSize: 172 }),
    { code: "offset_gap", file: INDEX, position: 0 }, // a dense index must start at 0
  );
  const backwards08 = index08.slice();
  new DataView(backwards08.buffer).setUint32(20, 70, true); // END 70 < previous END 77
  assertFormatError(
    () => iggy08.parseIndex(backwards08, { file: INDEX, startOffset: 0n, logSize: 172 }),
    { code: "index_unsorted", file: INDEX, position: 16 },
  );
  const repeated08 = concatBytes([index08.subarray(0, 16), index08.subarray(0, 16)]);
  assertFormatError(
    () => iggy08.parseIndex(repeated08, { file: INDEX, startOffset: 0n, logSize: 172 }),
    { code: "index_unsorted", file: INDEX, position: 16 },
  );
  const swapped09 = concatBytes([
    index09.subarray(0, 24),
    index09.subarray(48),
    index09.subarray(24, 48),
  ]);
  assertFormatError(
    () => iggy09.parseIndex(swapped09, { file: INDEX, startOffset: 100n, logSize: log09.length }),
    { code: "index_unsorted", file: INDEX, position: 48 },
  );
  assertFormatError(
    () => iggy09.parseIndex(index09, { file: INDEX, startOffset: 101n, logSize: log09.length }),
    { code: "offset_gap", file: INDEX, position: 0 },
  );
});

Deno.test("a trailing partial index entry", () => {
  assertFormatError(
    () =>
      iggy08.parseIndex(concatBytes([index08, new Uint8Array(5)]), {
        file: INDEX,
        startOffset: 0n,
        logSize: 172,
      }),
    { code: "truncated", file: INDEX, position: 32 },
  );
  assertFormatError(
    () =>
      iggy09.parseIndex(index09.subarray(0, 60), {
        file: INDEX,
        startOffset: 100n,
        logSize: log09.length,
      }),
    { code: "truncated", file: INDEX, position: 48 },
  );
});

for (const format of ["iggy-0.8", "iggy-0.9"] as const) {
  Deno.test(`${format}: flipping any single byte of a valid log makes walk(verify) throw a FormatError`, async () => {
    const dir = await tempDir("tierd-flip");
    try {
      const [segment] = await generatePartition({
        format,
        dataDir: dir.path,
        stream: 1,
        topic: 2,
        partition: 3,
        messages: 40,
        segmentSize: 1 << 20,
        payloadSize: 20,
        messagesPerBatch: 5,
      });
      const log = new Uint8Array(await readFile(segment.logPath));
      const codec = codecFor(format);
      const ok = all(codec.walk(log, { file: LOG, startOffset: 0n }));
      assert.equal(ok.reduce((n, r) => n + r.messageCount, 0), 40);
      const mustThrow = (bad: Uint8Array, what: string) => {
        try {
          all(codec.walk(bad, { file: LOG, startOffset: 0n, verify: true }));
        } catch (err) {
          assert.ok(err instanceof FormatError, `${what}: ${err}`);
          return;
        }
        assert.fail(`${what} went unnoticed`);
      };
      for (let at = 0; at < log.length; at++) { // every byte, lowest and highest bit
        mustThrow(patched(log, at, log[at] ^ 0x01), `flipping bit 0 of byte ${at}`);
        mustThrow(patched(log, at, log[at] ^ 0x80), `flipping bit 7 of byte ${at}`);
      }
      fc.assert(
        fc.property(fc.nat(log.length - 1), fc.integer({ min: 1, max: 255 }), (at, xor) => {
          mustThrow(patched(log, at, log[at] ^ xor), `xor ${xor} at byte ${at}`);
        }),
        { numRuns: 2000 },
      );
    } finally {
      await dir.cleanup();
    }
  });
}
