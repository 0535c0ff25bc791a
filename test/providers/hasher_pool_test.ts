// Reused hashers give the digests fresh ones give, however streams interleave and whatever an
// earlier stream left in the instance; a spent stream refuses to go on.
import assert from "node:assert/strict";
import fc from "fast-check";
import { checksumOf, createChecksum } from "../../providers/checksum.ts";
import { createXxh128Stream, initHashes, xxh3_128 } from "../../src/hash.ts";

await initHashes();

Deno.test("reused streams digest what a one-shot hash of the same bytes gives (property)", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 4 }), {
        minLength: 1,
        maxLength: 6,
      }),
      async (bodies) => {
        // All streams open at once, fed in turns, digested in order: instances come back and
        // are taken again by the next round.
        for (let round = 0; round < 2; round++) {
          const crcs = await Promise.all(bodies.map(() => createChecksum("crc64nvme")));
          const xxhs = await Promise.all(bodies.map(() => createXxh128Stream()));
          bodies.forEach((pieces, i) => {
            for (const p of pieces) {
              crcs[i].update(p);
              xxhs[i].update(p);
            }
          });
          for (const [i, pieces] of bodies.entries()) {
            const whole = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
            let at = 0;
            for (const p of pieces) whole.set(p, (at += p.length) - p.length);
            assert.deepEqual(crcs[i].digest(), await checksumOf("crc64nvme", whole));
            assert.equal(xxhs[i].digest(), xxh3_128(whole));
          }
        }
      },
    ),
    { numRuns: 50 },
  );
});

Deno.test("a spent stream refuses another update or digest", async () => {
  const h = await createChecksum("md5");
  h.digest();
  assert.throws(() => h.update(new Uint8Array(1)), /after its digest/);
  assert.throws(() => h.digest(), /digested twice/);
});
