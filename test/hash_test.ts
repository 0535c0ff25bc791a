// XXH3 as tierd computes it: the WebAssembly hashers (Deno) and Bun's native XXH3-64 (the
// compiled binary) give the same checksums — a record, journal or marker checksum written under
// one runtime verifies under the other — including every length class XXH3 treats apart
// (0, 1–3, 4–8, 9–16, 17–128, 129–240, longer, and several parts hashed as one).
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { initHashes, xxh3_128, xxh3_64 } from "../src/hash.ts";
import { REPO_ROOT, runBunScript, tempDir } from "./_util.ts";

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const fromHex = (s: string) => Uint8Array.from(s.match(/../g) ?? [], (x) => parseInt(x, 16));

Deno.test("XXH3 of known inputs (the reference implementation's values)", async () => {
  await initHashes();
  assert.equal(xxh3_64(new Uint8Array(0)), 0x2d06800538d394c2n);
  assert.equal(xxh3_128(new Uint8Array(0)), 0x99aa06d3014798d86001c324468d497fn);
  const abc = new TextEncoder().encode("abc");
  assert.equal(xxh3_64(abc), xxh3_64(abc.subarray(0, 1), abc.subarray(1)), "parts hash as one");
});

Deno.test("Bun's native XXH3-64 equals the WebAssembly one, for every length class", async () => {
  await initHashes();
  const lengths = fc.oneof(
    fc.integer({ min: 0, max: 16 }),
    fc.integer({ min: 17, max: 240 }),
    fc.integer({ min: 241, max: 9000 }),
  );
  const inputs = fc.sample(
    fc.array(
      fc.uint8Array({ minLength: 0, maxLength: 9000 }).chain((b) =>
        lengths.map((n) => b.subarray(0, Math.min(n, b.length)))
      ),
      { minLength: 1, maxLength: 3 },
    ),
    { numRuns: 300, seed: 1301 },
  );
  const tmp = await tempDir("tierd-hash");
  try {
    const file = join(tmp.path, "inputs.json");
    await writeFile(file, JSON.stringify(inputs.map((parts) => parts.map(hex))));
    const script = `import { xxh3_64 } from ${JSON.stringify(join(REPO_ROOT, "src/hash.ts"))};\n` +
      `import { readFileSync } from "node:fs";\n` +
      `if (typeof Bun?.hash?.xxHash3 !== "function") throw new Error("no native XXH3");\n` +
      // Each input is hashed as a view into a larger buffer, as record checksums are.
      `const fromHex = (s) => { const b = Uint8Array.from(s.match(/../g) ?? [], (x) => parseInt(x, 16)); const big = new Uint8Array(b.length + 13).fill(0xa5); big.set(b, 7); return big.subarray(7, 7 + b.length); };\n` +
      `const inputs = JSON.parse(readFileSync(${JSON.stringify(file)}, "utf8"));\n` +
      `console.log(JSON.stringify(inputs.map((p) => xxh3_64(...p.map(fromHex)).toString(16))));\n`;
    const out = await runBunScript(tmp.path, script);
    const native: string[] = JSON.parse(out);
    assert.equal(native.length, inputs.length);
    inputs.forEach((parts, i) => {
      const wasm = xxh3_64(...parts.map((p) => fromHex(hex(p))));
      assert.equal(native[i], wasm.toString(16), `input ${i}: ${parts.map((p) => p.length)} bytes`);
    });
  } finally {
    await tmp.cleanup();
  }
});
