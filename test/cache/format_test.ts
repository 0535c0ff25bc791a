// The chunk file header and the access table: round trips, and every damaged byte is caught.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AccessTableError,
  decodeAccessTable,
  encodeAccessTable,
  type TableEntry,
} from "../../src/cache/access_table.ts";
import {
  blocksCovering,
  CHUNK_DATA_ALIGN,
  CHUNK_VERSION,
  ChunkCorruptError,
  chunkFileSize,
  decodeChunkHeader,
  encodeChunkHeader,
  headerLengthOf,
  verifyBlocks,
} from "../../src/cache/chunk_format.ts";
import { initHashes } from "../../src/hash.ts";

await initHashes();

const hex16 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map((n) =>
  n.toString(16).padStart(16, "0")
);

Deno.test("a chunk header round-trips and its blocks verify, in both layouts", () => {
  fc.assert(
    fc.property(
      hex16,
      fc.nat(1 << 30),
      fc.uint8Array({ minLength: 0, maxLength: 3000 }),
      fc.integer({ min: 1, max: 700 }),
      fc.constantFrom(1, CHUNK_VERSION),
      (name, start, data, blockSize, version) => {
        const range = { start, end: start + data.length };
        const header = encodeChunkHeader(name, range, data, blockSize, version);
        if (version === CHUNK_VERSION) {
          assert.equal(header.length + data.length, chunkFileSize(data.length, blockSize));
          assert.equal(header.length % CHUNK_DATA_ALIGN, 0, "the data starts on a page boundary");
        } else {
          assert.equal(header.length, 48 + 8 * Math.ceil(data.length / blockSize) + 8);
        }
        const h = decodeChunkHeader(header, "f");
        assert.deepEqual([h.name, h.start, h.end, h.blockSize], [
          name,
          range.start,
          range.end,
          blockSize,
        ]);
        assert.equal(h.headerLength, header.length);
        const b = blocksCovering(h, 0, data.length);
        verifyBlocks(h, b.first, data.subarray(b.dataStart, b.dataEnd), "f");
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("any flipped bit in a chunk header (its padding included) or its data is detected", () => {
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 1, maxLength: 2000 }),
      fc.nat(),
      fc.integer({ min: 0, max: 7 }),
      fc.constantFrom(1, CHUNK_VERSION),
      (data, at, bit, version) => {
        const header = encodeChunkHeader(
          "0123456789abcdef",
          { start: 0, end: data.length },
          data,
          256,
          version,
        );
        const file = new Uint8Array(header.length + data.length);
        file.set(header);
        file.set(data, header.length);
        file[at % file.length] ^= 1 << bit;
        assert.throws(() => {
          const h = decodeChunkHeader(file.subarray(0, header.length), "f");
          verifyBlocks(h, 0, file.subarray(header.length), "f");
        }, ChunkCorruptError);
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("a header claiming a huge block count is refused before its length is allocated", () => {
  const data = new Uint8Array(10);
  const header = encodeChunkHeader("0123456789abcdef", { start: 0, end: 10 }, data, 1);
  const view = new DataView(header.buffer);
  // 2^31 one-byte blocks: a consistent geometry whose header would take 16 GiB.
  view.setBigUint64(32, 2n ** 31n, true);
  view.setUint32(40, 2 ** 31, true);
  assert.throws(() => headerLengthOf(header, "f"), /too long/);
});

const entryArb: fc.Arbitrary<TableEntry> = fc.record({
  name: hex16,
  bytes: fc.nat(Number.MAX_SAFE_INTEGER),
  tier: fc.constantFrom("prefetched", "cold", "main"),
}).map((e) => ({ ...e }));

Deno.test("the access table round-trips in order, and damage is refused", () => {
  fc.assert(
    fc.property(fc.array(entryArb, { maxLength: 50 }), fc.nat(), (entries, at) => {
      const bytes = encodeAccessTable(entries);
      assert.deepEqual(decodeAccessTable(bytes), entries);
      const bad = bytes.slice();
      bad[at % bad.length] ^= 0x40;
      assert.throws(() => decodeAccessTable(bad), AccessTableError);
      assert.throws(() => decodeAccessTable(bytes.subarray(0, bytes.length - 1)), AccessTableError);
    }),
    { numRuns: 200 },
  );
});
