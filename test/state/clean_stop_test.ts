// The clean-stop record: round trips, any change to its bytes refused with a typed error naming
// what is wrong, and taking it removes it whatever it held.
import assert from "node:assert/strict";
import { access, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { initHashes, xxh3_64 } from "../../src/hash.ts";
import {
  CLEAN_STOP_FILE,
  CleanStopDamaged,
  type CleanStopEntry,
  decodeCleanStop,
  encodeCleanStop,
  markerNamesDigest,
  takeCleanStop,
  writeCleanStop,
} from "../../src/state/clean_stop.ts";
import { tempDir } from "../_util.ts";
import { u64 } from "./_arbitraries.ts";

await initHashes();

const count = () => fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
const anyEntry = (): fc.Arbitrary<CleanStopEntry> =>
  fc.record({
    stream: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
    topic: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
    partition: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
    incarnation: u64(),
    generation: u64(),
    journalBytes: count(),
    journalDigest: u64(),
    markers: count(),
    markerNamesDigest: u64(),
  }, { noNullPrototype: true });

const sample: CleanStopEntry = {
  stream: 1,
  topic: 2,
  partition: 3,
  incarnation: 0x9e3779b97f4an,
  generation: 0n,
  journalBytes: 4096,
  journalDigest: 0x0123456789abcdefn,
  markers: 2,
  markerNamesDigest: markerNamesDigest(["00000000000000000000.remote"]),
};

Deno.test("clean-stop record: whatever it holds, it decodes to what was encoded", () => {
  fc.assert(
    fc.property(fc.array(anyEntry(), { maxLength: 20 }), fc.nat(), (entries, at) => {
      assert.deepEqual(decodeCleanStop(encodeCleanStop(entries, at), "r"), entries);
    }),
  );
});

Deno.test("clean-stop record: any one byte changed is refused as damaged, never read as other entries", () => {
  const bytes = encodeCleanStop([sample, { ...sample, partition: 4, markers: 0 }], 1);
  fc.assert(
    fc.property(
      fc.nat({ max: bytes.length - 1 }),
      fc.integer({ min: 1, max: 255 }),
      (at, flip) => {
        const bad = bytes.slice();
        bad[at] ^= flip;
        assert.throws(() => decodeCleanStop(bad, "/s/clean_stop"), CleanStopDamaged);
      },
    ),
  );
});

/** A record of `body` with the checksum line the encoder would write. */
function checksummed(body: unknown): Uint8Array {
  const text = JSON.stringify(body);
  const digest = xxh3_64(new TextEncoder().encode(text)).toString(16).padStart(16, "0");
  return new TextEncoder().encode(`${text}\n${digest}\n`);
}

Deno.test("clean-stop record: a well-checksummed record with a bad field names the field", () => {
  const good = JSON.parse(new TextDecoder().decode(encodeCleanStop([sample], 1)).split("\n")[0]);
  const cases: [unknown, RegExp][] = [
    [
      { ...good, partitions: [{ ...good.partitions[0], journal_bytes: -1 }] },
      /partition entry 0: journal_bytes -1 is not valid/,
    ],
    [
      { ...good, partitions: [{ ...good.partitions[0], incarnation: "xyz" }] },
      /partition entry 0: incarnation "xyz" is not valid/,
    ],
    [
      { ...good, partitions: [{ ...good.partitions[0], generation: "18446744073709551616" }] },
      /generation "18446744073709551616" is not valid/,
    ],
    [{ ...good, version: 2 }, /version 2, expected 1/],
    [{ ...good, kind: "other" }, /kind is not "tierd-clean-stop"/],
    [{ ...good, partitions: {} }, /no partitions list/],
  ];
  for (const [body, message] of cases) {
    assert.throws(
      () => decodeCleanStop(checksummed(body), "/s/clean_stop"),
      (err: unknown) => err instanceof CleanStopDamaged && message.test(err.message),
      String(message),
    );
  }
  assert.throws(() => decodeCleanStop(new Uint8Array(0), "r"), /does not end in a checksum line/);
});

Deno.test("clean-stop record: taking it removes it, damaged or not; without one there is nothing", async () => {
  const dir = await tempDir("tierd-clean-stop");
  try {
    const path = join(dir.path, CLEAN_STOP_FILE);
    assert.deepEqual(await takeCleanStop(dir.path), { kind: "none" });
    await writeCleanStop(dir.path, [sample], 7);
    assert.deepEqual(await takeCleanStop(dir.path), { kind: "taken", entries: [sample] });
    await assert.rejects(access(path), /ENOENT/, "taken means removed");
    assert.deepEqual(await takeCleanStop(dir.path), { kind: "none" }, "taken once only");
    await writeCleanStop(dir.path, [sample], 7);
    const bytes = await readFile(path);
    bytes[3] ^= 1;
    await writeFile(path, bytes);
    const taken = await takeCleanStop(dir.path);
    assert.equal(taken.kind, "damaged");
    assert.match((taken as { error: Error }).error.message, /clean_stop is not usable: .*checksum/);
    await assert.rejects(access(path), /ENOENT/, "a damaged record is removed too");
  } finally {
    await dir.cleanup();
  }
});

Deno.test("clean-stop record: the marker names' digest does not depend on their order", () => {
  fc.assert(
    fc.property(fc.uniqueArray(fc.string(), { maxLength: 30 }), (names) => {
      assert.equal(markerNamesDigest(names), markerNamesDigest([...names].reverse()));
    }),
  );
});
