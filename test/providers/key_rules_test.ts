import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import fc from "fast-check";
import { compareUtf8, decodeToken, encodeToken, pageSize } from "../../providers/key_rules.ts";
import { StoreError } from "../../providers/types.ts";

const anyKey = fc.string({ unit: "grapheme", minLength: 1, maxLength: 12 });

Deno.test("compareUtf8 orders like the UTF-8 bytes", () => {
  fc.assert(
    fc.property(anyKey, anyKey, (a, b) => {
      const expected = Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b)));
      return Math.sign(compareUtf8(a, b)) === expected;
    }),
    { numRuns: 2000 },
  );
  assert.ok(compareUtf8("\uff5e", "\u{1f600}") < 0, "U+FF5E before U+1F600, unlike UTF-16 order");
  assert.ok(compareUtf8("a-b", "a/b") < 0 && compareUtf8("a/b", "a0") < 0);
  assert.equal(compareUtf8("same", "same"), 0);
});

Deno.test("continuation tokens round-trip and strangers are Malformed", () => {
  fc.assert(fc.property(anyKey, (key) => decodeToken(encodeToken(key), "list") === key));
  for (const bad of ["", "not a token", "====", "+/+/"]) {
    assert.throws(
      () => decodeToken(bad, "list"),
      (err: unknown) => err instanceof StoreError && err.kind === "Malformed",
    );
  }
});

Deno.test("pageSize clamps to S3's 1..1000", () => {
  assert.equal(pageSize(undefined), 1000);
  assert.equal(pageSize(5000), 1000);
  assert.equal(pageSize(0), 1);
  assert.equal(pageSize(2.7), 2);
  assert.equal(pageSize(NaN), 1000);
});
