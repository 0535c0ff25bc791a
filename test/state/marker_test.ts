// The .remote marker: exact layout, round trips, corruption detection, and durable writes.
import assert from "node:assert/strict";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { initHashes, xxh3_64 } from "../../src/hash.ts";
import {
  decodeMarker,
  encodeMarker,
  type Marker,
  MARKER_SIZE,
  MarkerError,
  readMarker,
  writeMarker,
} from "../../src/state/marker.ts";
import { tempDir } from "../_util.ts";
import { u128, u64 } from "./_arbitraries.ts";

await initHashes();

const anyMarker = (): fc.Arbitrary<Marker> =>
  fc.record({
    flags: fc.integer({ min: 0, max: 0xffff }),
    startOffset: u64(),
    endOffset: u64(),
    size: u64(),
    indexSize: u64(),
    startTimestamp: u64(),
    endTimestamp: u64(),
    maxTimestamp: u64(),
    incarnation: u64(),
    generation: u64(),
    logChecksum: u128(),
  }, { noNullPrototype: true });

const sample: Marker = {
  flags: 0,
  startOffset: 1000n,
  endOffset: 1999n,
  size: 1_048_576n,
  indexSize: 16_000n,
  startTimestamp: 1_700_000_000_000_000n,
  endTimestamp: 1_700_000_000_500_000n,
  maxTimestamp: 1_700_000_000_600_000n,
  incarnation: 0x0123456789abcdefn,
  generation: 2n,
  logChecksum: 0x00112233445566778899aabbccddeeffn,
};

function markerError(fn: () => unknown): MarkerError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof MarkerError, `expected MarkerError, got ${err}`);
    return err;
  }
  assert.fail("expected a MarkerError");
}

Deno.test("marker layout matches docs/architecture.md byte for byte", () => {
  const bytes = encodeMarker(sample);
  const view = new DataView(bytes.buffer);
  assert.equal(bytes.length, 128);
  assert.equal(new TextDecoder().decode(bytes.subarray(0, 8)), "IGGYREMT");
  assert.equal(view.getUint16(8, true), 1);
  assert.equal(view.getUint16(10, true), 0);
  assert.equal(view.getUint32(12, true), 0);
  assert.equal(view.getBigUint64(16, true), 1000n);
  assert.equal(view.getBigUint64(24, true), 1999n);
  assert.equal(view.getBigUint64(32, true), 1_048_576n);
  assert.equal(view.getBigUint64(40, true), 16_000n);
  assert.equal(view.getBigUint64(48, true), sample.startTimestamp);
  assert.equal(view.getBigUint64(56, true), sample.endTimestamp);
  assert.equal(view.getBigUint64(64, true), sample.maxTimestamp);
  assert.equal(view.getBigUint64(72, true), sample.incarnation);
  assert.equal(view.getBigUint64(80, true), 2n);
  // u128 checksum, low 64 bits first.
  assert.equal(view.getBigUint64(88, true), 0x8899aabbccddeeffn);
  assert.equal(view.getBigUint64(96, true), 0x0011223344556677n);
  assert.equal(view.getBigUint64(104, true), xxh3_64(bytes.subarray(0, 104)));
  assert.deepEqual([...bytes.subarray(112)], new Array(16).fill(0));
});

Deno.test("every marker round-trips (property, 2000 runs)", () => {
  fc.assert(
    fc.property(anyMarker(), (m) => {
      const bytes = encodeMarker(m);
      assert.equal(bytes.length, MARKER_SIZE);
      assert.deepEqual(decodeMarker(bytes, "m.remote"), m);
    }),
    { numRuns: 2000 },
  );
});

Deno.test("any single flipped byte is detected with the right code (property, 3000 runs)", () => {
  fc.assert(
    fc.property(
      anyMarker(),
      fc.nat(MARKER_SIZE - 1),
      fc.integer({ min: 1, max: 255 }),
      (m, at, mask) => {
        const bytes = encodeMarker(m);
        bytes[at] ^= mask;
        const err = markerError(() => decodeMarker(bytes, "p/1.remote"));
        const expected = at < 8 ? "magic" : at < 10 ? "version" : at < 112 ? "checksum" : "padding";
        assert.equal(err.code, expected, `flip at ${at}`);
        assert.equal(err.file, "p/1.remote");
        assert.match(err.message, /p\/1\.remote/);
      },
    ),
    { numRuns: 3000 },
  );
});

Deno.test("any truncation or extension is detected as size (property, 1000 runs)", () => {
  fc.assert(
    fc.property(
      anyMarker(),
      fc.oneof(fc.nat(MARKER_SIZE - 1), fc.integer({ min: MARKER_SIZE + 1, max: 4096 })),
      (m, length) => {
        const good = encodeMarker(m);
        const bytes = new Uint8Array(length);
        bytes.set(good.subarray(0, Math.min(length, MARKER_SIZE)));
        const err = markerError(() => decodeMarker(bytes, "x.remote"));
        assert.equal(err.code, "size");
        assert.match(err.message, new RegExp(`x\\.remote: ${length} bytes`));
      },
    ),
    { numRuns: 1000 },
  );
});

Deno.test("non-zero reserved bytes under a valid checksum are refused", () => {
  const bytes = encodeMarker(sample);
  const view = new DataView(bytes.buffer);
  view.setUint32(12, 1, true);
  view.setBigUint64(104, xxh3_64(bytes.subarray(0, 104)), true);
  assert.equal(markerError(() => decodeMarker(bytes, "r.remote")).code, "padding");
});

Deno.test("encodeMarker refuses out-of-range fields", () => {
  assert.throws(() => encodeMarker({ ...sample, flags: 0x10000 }), RangeError);
  assert.throws(() => encodeMarker({ ...sample, endOffset: 1n << 64n }), RangeError);
  assert.throws(() => encodeMarker({ ...sample, size: -1n }), RangeError);
  assert.throws(() => encodeMarker({ ...sample, logChecksum: 1n << 128n }), RangeError);
});

Deno.test("writeMarker/readMarker on real files; no temp file left; overwrite", async () => {
  const dir = await tempDir("tierd-marker");
  try {
    const path = join(dir.path, "00000000000000001000.remote");
    await writeMarker(path, sample);
    assert.deepEqual(await readMarker(path), sample);
    assert.deepEqual(await readdir(dir.path), ["00000000000000001000.remote"]);
    assert.deepEqual(await readFile(path), Buffer.from(encodeMarker(sample)));

    const next = { ...sample, generation: 3n, flags: 1 };
    await writeMarker(path, next);
    assert.deepEqual(await readMarker(path), next);
    assert.deepEqual(await readdir(dir.path), ["00000000000000001000.remote"]);
  } finally {
    await dir.cleanup();
  }
});

Deno.test("readMarker names the file of a damaged marker", async () => {
  const dir = await tempDir("tierd-marker");
  try {
    const path = join(dir.path, "7.remote");
    const bytes = encodeMarker(sample);
    bytes[40] ^= 0x80;
    await writeFile(path, bytes);
    await assert.rejects(
      readMarker(path),
      (err: unknown) => err instanceof MarkerError && err.code === "checksum" && err.file === path,
    );
    await writeFile(path, bytes.subarray(0, 100));
    await assert.rejects(readMarker(path), (err: unknown) => (err as MarkerError).code === "size");
  } finally {
    await dir.cleanup();
  }
});

Deno.test("a reader racing writeMarker sees no file or a whole valid marker (200 rewrites)", async () => {
  const dir = await tempDir("tierd-marker");
  try {
    const path = join(dir.path, "race.remote");
    let done = false;
    let seen = 0;
    const reader = (async () => {
      while (!done) {
        try {
          const m = await readMarker(path);
          assert.equal(m.startOffset, sample.startOffset);
          seen++;
        } catch (err) {
          // Before the first rename the marker simply does not exist yet.
          assert.equal((err as NodeJS.ErrnoException).code, "ENOENT", String(err));
        }
      }
    })();
    for (let i = 0; i < 200; i++) await writeMarker(path, { ...sample, generation: BigInt(i) });
    done = true;
    await reader;
    assert.ok(seen > 0);
    assert.equal((await readMarker(path)).generation, 199n);
    assert.deepEqual(await readdir(dir.path), ["race.remote"]);
  } finally {
    await dir.cleanup();
  }
});

Deno.test("a failed writeMarker leaves no marker and no temp file", async () => {
  const dir = await tempDir("tierd-marker");
  try {
    // The rename cannot replace a non-empty directory: the write fails after the temp file.
    const path = join(dir.path, "blocked.remote");
    await mkdir(join(path, "child"), { recursive: true });
    await assert.rejects(writeMarker(path, sample));
    assert.deepEqual(await readdir(dir.path), ["blocked.remote"]);
    assert.deepEqual(await readdir(path), ["child"]);
    // A missing directory fails before anything is written.
    await assert.rejects(writeMarker(join(dir.path, "nope", "1.remote"), sample), /ENOENT/);
    assert.deepEqual(await readdir(dir.path), ["blocked.remote"]);
  } finally {
    await dir.cleanup();
  }
});
