// The verify pass's part checks against a model: the CRC-32 of each part-sized slice of the
// file, whatever chunks the bytes arrive in; and the upload's check of what it reads against them
// passes the same bytes (handing each part on with its CRC-32) and refuses any one byte changed,
// a part more or a part fewer.
import assert from "node:assert/strict";
import fc from "fast-check";
import { crc32, crc32Checksum } from "../../providers/checksum.ts";
import { partReadVerifier, SegmentChangedError } from "../../src/tier/copy_segment.ts";
import { PartCrc32 } from "../../src/tier/part_checks.ts";

/** Feeds `bytes` to a new PartCrc32 in chunks cut at `cuts` (lengths, any). */
function checksOf(bytes: Uint8Array, partSize: number, cuts: number[]) {
  const parts = new PartCrc32(partSize);
  let at = 0;
  for (const n of cuts) {
    parts.update(bytes.subarray(at, at + n));
    at = Math.min(bytes.length, at + n);
  }
  parts.update(bytes.subarray(at));
  return parts.finish();
}

/** The parts an upload reads: part-sized slices, the last shorter; one (empty) for no bytes. */
function slices(bytes: Uint8Array, partSize: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; at += partSize) out.push(bytes.subarray(at, at + partSize));
  return out.length > 0 ? out : [bytes];
}

const input = fc.record({
  bytes: fc.uint8Array({ maxLength: 3000 }),
  partSize: fc.integer({ min: 1, max: 700 }),
  cuts: fc.array(fc.nat({ max: 900 }), { maxLength: 10 }),
});

Deno.test("part checks: one CRC-32 per part-sized slice, whatever the chunks", () => {
  fc.assert(
    fc.property(input, ({ bytes, partSize, cuts }) => {
      const checks = checksOf(bytes, partSize, cuts);
      assert.equal(checks.partSize, partSize);
      assert.deepEqual(checks.crc32, slices(bytes, partSize).map((p) => crc32(p)));
    }),
  );
});

Deno.test("part checks: the upload's reads pass when they are the verified bytes, and fail on any change", () => {
  fc.assert(
    fc.property(input, fc.nat(), fc.integer({ min: 1, max: 255 }), (x, where, flip) => {
      const { bytes, partSize, cuts } = x;
      const checks = checksOf(bytes, partSize, cuts);
      const same = partReadVerifier("seg.log", checks);
      for (const part of slices(bytes, partSize)) {
        // Each part read goes on with its CRC-32, sent in place of taking it again.
        assert.deepEqual(same.update(part), [crc32Checksum(crc32(part))]);
      }
      same.verify();

      const refused = (run: () => void, why: RegExp) =>
        assert.throws(
          run,
          (err: unknown) => err instanceof SegmentChangedError && why.test(err.message),
        );
      if (bytes.length > 0) {
        const changed = bytes.slice();
        changed[where % bytes.length] ^= flip;
        const v = partReadVerifier("seg.log", checks);
        refused(() => {
          for (const part of slices(changed, partSize)) v.update(part);
        }, /changed after they were verified/);
      }
      const grown = partReadVerifier("seg.log", checks);
      for (const part of slices(bytes, partSize)) grown.update(part);
      refused(() => grown.update(new Uint8Array(1)), /grew/);
      if (checks.crc32.length > 1) {
        const shrunk = partReadVerifier("seg.log", checks);
        for (const part of slices(bytes, partSize).slice(0, -1)) shrunk.update(part);
        refused(() => shrunk.verify(), /shrank/);
      }
    }),
  );
});
