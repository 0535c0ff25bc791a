// The sizes Iggy's stats answer are read as the range of bytes they allow: decimal units rounded
// to two places, or a binary unit that byte-unit chose because it states the size exactly.
import assert from "node:assert/strict";
import { humanSizeRange } from "./_iggy_checks.ts";

Deno.test("Iggy's human sizes, decimal and binary, as byte ranges", () => {
  assert.deepEqual(humanSizeRange("154 B"), { min: 154, max: 154 });
  assert.deepEqual(humanSizeRange("1.05 MB"), { min: 1_045_000, max: 1_055_000 });
  const kib = humanSizeRange("3068.25 KiB"); // what a 0.8.0 server answered for 3,141,888 B
  assert.ok(kib.min <= 3_141_888 && 3_141_888 <= kib.max, JSON.stringify(kib));
  assert.ok(Math.abs(kib.max - kib.min - 10.24) < 1e-6, "as wide as the last decimal: 0.01 KiB");
  assert.ok(humanSizeRange("2 MiB").min <= 2 * 1024 * 1024);
  for (const bad of ["1.05 XB", "1.05MB", "", "MB"]) assert.throws(() => humanSizeRange(bad));
});
