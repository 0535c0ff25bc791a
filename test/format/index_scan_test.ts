// The 0.9 index is validated without a BigInt per field (its u64s compared as u32 halves): it
// must accept and refuse exactly what a plain BigInt reading does, with the same error, for any
// values, those past 2^32 and 2^53 included — the read path trusts its seeks to it.
import assert from "node:assert/strict";
import fc from "fast-check";
import { FormatError } from "../../src/format/errors.ts";
import { iggy09, INDEX_ENTRY_SIZE_09, scanIndex09 } from "../../src/format/iggy09.ts";
import type { ParseIndexOptions } from "../../src/format/codec.ts";
import type { IndexEntry } from "../../src/format/types.ts";
import { parseSegmentIndex } from "../../src/read/segment_index.ts";

/** The reference: every field read as a BigInt and compared as one. */
function referenceParse(index: Uint8Array, ctx: ParseIndexOptions): IndexEntry[] {
  const v = new DataView(index.buffer, index.byteOffset, index.byteLength);
  const count = Math.floor(index.length / INDEX_ENTRY_SIZE_09);
  const entries: IndexEntry[] = [];
  let prev: { offset: bigint; position: bigint } | undefined;
  for (let i = 0; i < count; i++) {
    const at = i * INDEX_ENTRY_SIZE_09;
    const offset = v.getBigUint64(at, true);
    const timestamp = v.getBigUint64(at + 8, true);
    const position = v.getBigUint64(at + 16, true);
    if (offset < ctx.startOffset) throw new FormatError("offset_gap", ctx.file, at, "");
    if (prev && (offset <= prev.offset || position <= prev.position)) {
      throw new FormatError("index_unsorted", ctx.file, at, "");
    }
    if (position >= BigInt(ctx.logSize)) throw new FormatError("index_past_eof", ctx.file, at, "");
    entries.push({ offset, position: Number(position), timestamp });
    prev = { offset, position };
  }
  if (index.length % INDEX_ENTRY_SIZE_09 !== 0) {
    throw new FormatError("truncated", ctx.file, count * INDEX_ENTRY_SIZE_09, "");
  }
  return entries;
}

const U64_MAX = (1n << 64n) - 1n;
/** u64 values around the edges the halves meet: 2^32, 2^53, 2^64. */
const u64Arb = fc.oneof(
  fc.bigInt({ min: 0n, max: U64_MAX }),
  fc.bigInt({ min: 0n, max: 1n << 20n }),
  fc.constantFrom(0n, (1n << 32n) - 1n, 1n << 32n, (1n << 53n) - 1n, 1n << 53n, U64_MAX),
  fc.bigInt({ min: (1n << 32n) - 8n, max: (1n << 32n) + 8n }),
);

/** An index: mostly rising entries (some steps zero or backwards), maybe a torn tail. */
const indexArb = fc.record({
  start: u64Arb,
  first: fc.record({ offset: u64Arb, position: u64Arb }),
  steps: fc.array(
    fc.record({
      offset: fc.oneof(fc.bigInt({ min: 1n, max: 1n << 36n }), fc.bigInt({ min: -3n, max: 3n })),
      position: fc.oneof(fc.bigInt({ min: 1n, max: 1n << 36n }), fc.bigInt({ min: -3n, max: 3n })),
      timestamp: u64Arb,
    }),
    { maxLength: 30 },
  ),
  logSize: fc.oneof(
    fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
    fc.integer({ min: 0, max: 2 ** 38 }),
  ),
  torn: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: INDEX_ENTRY_SIZE_09 - 1 })),
}).map(({ start, first, steps, logSize, torn }) => {
  const wrap = (x: bigint) => ((x % (U64_MAX + 1n)) + U64_MAX + 1n) % (U64_MAX + 1n);
  const bytes = new Uint8Array((steps.length + 1) * INDEX_ENTRY_SIZE_09 + torn);
  const v = new DataView(bytes.buffer);
  let { offset, position } = first;
  for (let i = 0; i <= steps.length; i++) {
    if (i > 0) {
      offset = wrap(offset + steps[i - 1].offset);
      position = wrap(position + steps[i - 1].position);
    }
    const at = i * INDEX_ENTRY_SIZE_09;
    v.setBigUint64(at, offset, true);
    v.setBigUint64(at + 8, i > 0 ? steps[i - 1].timestamp : 0n, true);
    v.setBigUint64(at + 16, position, true);
  }
  return { bytes, ctx: { file: "p.index", startOffset: start, logSize } };
});

function outcome(f: () => IndexEntry[]): IndexEntry[] | { code: string; position: number } {
  try {
    return f();
  } catch (err) {
    if (!(err instanceof FormatError)) throw err;
    return { code: err.code, position: err.position };
  }
}

Deno.test("iggy-0.9: the index scan accepts and refuses exactly what BigInt comparisons do", () => {
  fc.assert(
    fc.property(indexArb, ({ bytes, ctx }) => {
      const want = outcome(() => referenceParse(bytes, ctx));
      assert.deepEqual(outcome(() => iggy09.parseIndex(bytes, ctx)), want);
      let count = -1;
      const scanned = outcome(() => {
        count = scanIndex09(bytes, ctx);
        return [];
      });
      if (Array.isArray(want)) {
        assert.equal(count, want.length);
        // The kept-bytes index a read seeks in reads the same entries and record starts.
        const index = parseSegmentIndex(iggy09, bytes, ctx);
        assert.deepEqual(Array.from({ length: index.count }, (_, i) => index.entry(i)), want);
        assert.deepEqual(index.recordStarts(), [
          0,
          ...want.map((e) => e.position).filter((p) => p > 0),
        ]);
      } else {
        assert.deepEqual(scanned, want);
      }
    }),
    { numRuns: 2000 },
  );
});

Deno.test("iggy-0.9: an index refusal names the entry with its real u64 values", () => {
  const bytes = new Uint8Array(2 * INDEX_ENTRY_SIZE_09);
  const v = new DataView(bytes.buffer);
  v.setBigUint64(0, (1n << 40n) + 5n, true);
  v.setBigUint64(16, (1n << 33n) + 1n, true);
  v.setBigUint64(24, (1n << 40n) + 5n, true); // the same offset again
  v.setBigUint64(40, (1n << 33n) + 2n, true);
  const ctx = { file: "p.index", startOffset: 1n << 40n, logSize: 2 ** 34 };
  assert.throws(() => scanIndex09(bytes, ctx), (err: FormatError) => {
    assert.equal(err.code, "index_unsorted");
    assert.match(err.message, /entry 1 \(offset 1099511627781, byte 8589934594\)/);
    assert.match(err.message, /entry 0 \(offset 1099511627781, byte 8589934593\)/);
    return true;
  });
  v.setBigUint64(24, (1n << 40n) + 6n, true);
  assert.throws(
    () => scanIndex09(bytes, { ...ctx, logSize: 2 ** 33 + 2 }),
    /entry 1 \(offset 1099511627782\) points at byte 8589934594, past the end of the 8589934594-byte log/,
  );
});
