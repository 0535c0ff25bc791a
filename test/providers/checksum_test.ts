// The upload checksums against published test vectors: CRC-32 from the CRC catalogue
// (CRC-32/ISO-HDLC's check value; its values of 32 zero and 32 0xFF bytes are the widely listed
// 190a55ad and ff6cab0b), CRC-64/NVME from the NVM Express NVM
// Command Set Specification ("64b CRC Test Cases", 4 KiB patterns) and the CRC catalogue's check
// value, CRC-32C from RFC 3720 (B.4) and the catalogue, MD5 from RFC 1321; then against a
// bit-at-a-time reference over random bytes fed in random chunks.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  bodyChecksum,
  CHECKSUM_ALGORITHMS,
  checksumFromHex,
  checksumHex,
  checksumOf,
  comparableChecksum,
  createChecksum,
  portableCrc32,
  sameChecksum,
} from "../../providers/checksum.ts";
import type { ChecksumAlgorithm } from "../../providers/types.ts";
import { seededRandom } from "../../src/base/rng.ts";

const text = (s: string) => new TextEncoder().encode(s);
const fill = (n: number, f: (i: number) => number) =>
  Uint8Array.from({ length: n }, (_, i) => f(i));

const VECTORS: Array<[ChecksumAlgorithm, string, Uint8Array, string]> = [
  ["crc32", "catalogue check", text("123456789"), "cbf43926"],
  ["crc32", "empty", new Uint8Array(0), "00000000"],
  ["crc32", "32 bytes of 0x00", fill(32, () => 0), "190a55ad"],
  ["crc32", "32 bytes of 0xFF", fill(32, () => 0xff), "ff6cab0b"],
  // NVM Command Set Specification 1.0, 5.2.1.3.5: 4 KiB buffers.
  ["crc64nvme", "4 KiB of 0x00", fill(4096, () => 0), "6482d367eb22b64e"],
  ["crc64nvme", "4 KiB of 0xFF", fill(4096, () => 0xff), "c0ddba7302eca3ac"],
  ["crc64nvme", "4 KiB incrementing", fill(4096, (i) => i & 0xff), "3e729f5f6750449c"],
  ["crc64nvme", "4 KiB decrementing", fill(4096, (i) => 0xff - (i & 0xff)), "9a2df64b8e9e517e"],
  ["crc64nvme", "catalogue check", text("123456789"), "ae8b14860a799888"],
  ["crc64nvme", "empty", new Uint8Array(0), "0000000000000000"],
  // RFC 3720, B.4 (its byte listings are the CRC's little-endian bytes).
  ["crc32c", "32 bytes of 0x00", fill(32, () => 0), "8a9136aa"],
  ["crc32c", "32 bytes of 0xFF", fill(32, () => 0xff), "62a8ab43"],
  ["crc32c", "32 bytes incrementing", fill(32, (i) => i), "46dd794e"],
  ["crc32c", "32 bytes decrementing", fill(32, (i) => 31 - i), "113fdb5c"],
  ["crc32c", "catalogue check", text("123456789"), "e3069283"],
  // RFC 1321, A.5.
  ["md5", "empty", new Uint8Array(0), "d41d8cd98f00b204e9800998ecf8427e"],
  ["md5", "abc", text("abc"), "900150983cd24fb0d6963f7d28e17f72"],
];

Deno.test("checksums: published test vectors", async () => {
  for (const [algorithm, what, bytes, hex] of VECTORS) {
    const got = await checksumOf(algorithm, bytes);
    assert.equal(checksumHex(got), hex, `${algorithm} of ${what}`);
    assert.ok(sameChecksum(got, checksumFromHex(algorithm, hex)));
  }
  // As S3 spells it: base64 of the big-endian digest (MinIO answered this for these bytes).
  assert.equal((await checksumOf("crc64nvme", text("123456789"))).value, "rosUhgp5mIg=");
});

/** CRC-64/NVME one bit at a time, straight from its definition. */
function referenceCrc64Nvme(bytes: Uint8Array): bigint {
  const poly = 0x9a6c9329ac4bc9b5n;
  let crc = 0xffffffffffffffffn;
  for (const b of bytes) {
    crc ^= BigInt(b);
    for (let k = 0; k < 8; k++) crc = crc & 1n ? (crc >> 1n) ^ poly : crc >> 1n;
  }
  return crc ^ 0xffffffffffffffffn;
}

Deno.test("checksums: CRC-64/NVME streamed in random chunks equals the bitwise reference", async () => {
  const random = seededRandom(11);
  for (const size of [1, 7, 1000, 65_537]) {
    const bytes = fill(size, () => Math.floor(random() * 256));
    const h = await createChecksum("crc64nvme");
    for (let at = 0; at < size;) {
      const n = 1 + Math.floor(random() * 5000);
      h.update(bytes.subarray(at, at + n));
      at += n;
    }
    const hex = referenceCrc64Nvme(bytes).toString(16).padStart(16, "0");
    assert.equal(checksumHex(h.digest()), hex, `${size} bytes`);
  }
});

/** CRC-32 (reflected 0xedb88320, all-ones in and out) one bit at a time. */
function referenceCrc32(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const b of bytes) {
    crc ^= b;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

Deno.test("checksums: CRC-32 streamed in any chunks equals the bitwise reference, and one call over the whole, native or portable", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uint8Array({ maxLength: 20_000 }),
      fc.array(fc.nat({ max: 5000 }), { maxLength: 12 }),
      async (bytes, cuts) => {
        const h = await createChecksum("crc32");
        let at = 0;
        for (const n of cuts) {
          h.update(bytes.subarray(at, at + n));
          at = Math.min(bytes.length, at + n);
        }
        h.update(bytes.subarray(at));
        const hex = referenceCrc32(bytes).toString(16).padStart(8, "0");
        const streamed = h.digest();
        assert.equal(checksumHex(streamed), hex);
        assert.deepEqual(await checksumOf("crc32", bytes), streamed);
        const portable = cuts.reduce(
          (acc, n) => ({
            at: acc.at + n,
            crc: portableCrc32(bytes.subarray(acc.at, acc.at + n), acc.crc),
          }),
          { at: 0, crc: 0 },
        );
        assert.equal(
          portableCrc32(bytes.subarray(portable.at), portable.crc),
          referenceCrc32(bytes),
        );
        assert.throws(() => h.update(bytes), /after its digest/);
      },
    ),
    { numRuns: 60 },
  );
});

Deno.test("checksums: a verifier prefers a full-object checksum it can compute, fastest first", () => {
  assert.equal(comparableChecksum(undefined), undefined);
  assert.equal(
    comparableChecksum([{ algorithm: "crc64nvme", value: "x", type: "composite" }]),
    undefined,
  );
  const md5 = { algorithm: "md5", value: "1B2M2Y8AsgTpgAmY7PhCfg==", type: "full" } as const;
  const crc = { algorithm: "crc32c", value: "AAAAAA==", type: "full" } as const;
  assert.equal(comparableChecksum([md5, crc]), crc);
  assert.equal(comparableChecksum([md5]), md5);
});

Deno.test("checksums: a stored value not of its algorithm's length is no checksum of it (moto's 4-byte crc64nvme of a multipart upload)", () => {
  // What moto answers for a FULL_OBJECT CRC64NVME multipart upload: 4 bytes under the name.
  const moto = { algorithm: "crc64nvme", value: "VtCd3Q==", type: "full" } as const;
  assert.equal(comparableChecksum([moto]), undefined, "not comparable: the copy is read back");
  const etag = { algorithm: "md5", value: "1B2M2Y8AsgTpgAmY7PhCfg==", type: "full" } as const;
  assert.equal(comparableChecksum([moto, etag]), etag, "a comparable one beside it still counts");
  for (const value of ["", "abc", "!!!!!!!!!!!=", "COIxExZ9Lt8", "COIxExZ9Lt8=="]) {
    assert.equal(
      comparableChecksum([{ algorithm: "crc64nvme", value, type: "full" }]),
      undefined,
      JSON.stringify(value),
    );
  }
  assert.ok(comparableChecksum([{ algorithm: "crc64nvme", value: "COIxExZ9Lt8=", type: "full" }]));
  const sha = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
  assert.ok(comparableChecksum([{ algorithm: "sha256", value: sha, type: "full" }]));
});

Deno.test("bodyChecksum: a given checksum of the algorithm is taken as it is; else the body is hashed", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uint8Array({ maxLength: 2000 }),
      fc.constantFrom(...CHECKSUM_ALGORITHMS),
      fc.constantFrom(...CHECKSUM_ALGORITHMS),
      async (bytes, algorithm, givenAlgorithm) => {
        const given = { algorithm: givenAlgorithm, value: "given" };
        const got = await bodyChecksum(algorithm, bytes, [given]);
        if (givenAlgorithm === algorithm) assert.equal(got, given);
        else assert.deepEqual(got, await checksumOf(algorithm, bytes));
        assert.deepEqual(
          await bodyChecksum(algorithm, bytes, undefined),
          await checksumOf(algorithm, bytes),
        );
      },
    ),
    { numRuns: 40 },
  );
});
