// The memory of verified local byte ranges (src/read/verified_logs.ts): it answers exactly what
// was marked, keyed by a file identity that any change to the file replaces, and stays bounded.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type FileIdentity,
  identityKey,
  SETTLE_MS,
  VerifiedLogs,
} from "../../src/read/verified_logs.ts";

const NOW = 1_800_000_000_000;
const ns = (ms: number) => BigInt(ms) * 1_000_000n;

function identity(o: Partial<FileIdentity> = {}): FileIdentity {
  const old = ns(NOW - 60_000);
  return { dev: 1n, ino: 7n, size: 4096n, mtimeNs: old, ctimeNs: old, ...o };
}

Deno.test("covers is true exactly for ranges inside the union of what was marked (model)", () => {
  const SIZE = 200;
  const range = fc.tuple(fc.nat({ max: SIZE }), fc.nat({ max: SIZE }))
    .map(([a, b]) => [Math.min(a, b), Math.max(a, b)] as const);
  fc.assert(fc.property(
    fc.array(range, { maxLength: 30 }),
    fc.array(range, { minLength: 1, maxLength: 30 }),
    (marks, queries) => {
      const logs = new VerifiedLogs(4, 1_000);
      const model = new Array<boolean>(SIZE).fill(false);
      for (const [from, to] of marks) {
        logs.mark("f", from, to);
        for (let i = from; i < to; i++) model[i] = true;
      }
      for (const [from, to] of queries) {
        const want = model.slice(from, to).every(Boolean);
        assert.equal(logs.covers("f", from, to), want, `[${from}, ${to}) after ${marks}`);
      }
    },
  ));
});

Deno.test("ranges of one file say nothing of another", () => {
  const logs = new VerifiedLogs();
  logs.mark("a", 0, 100);
  assert.equal(logs.covers("a", 10, 90), true);
  assert.equal(logs.covers("b", 10, 90), false);
});

Deno.test("past its range cap a file keeps the range just marked, and it is still exact", () => {
  const logs = new VerifiedLogs(4, 3);
  for (const at of [0, 20, 40]) logs.mark("f", at, at + 10);
  assert.equal(logs.covers("f", 20, 30), true, "within the cap every range is kept");
  logs.mark("f", 60, 70);
  assert.equal(logs.covers("f", 60, 70), true);
  assert.equal(logs.covers("f", 0, 10), false, "the older ranges went");
});

Deno.test("past its file cap the least recently used file is forgotten", () => {
  const logs = new VerifiedLogs(2);
  logs.mark("a", 0, 10);
  logs.mark("b", 0, 10);
  assert.equal(logs.covers("a", 0, 10), true); // a is now the most recently used
  logs.mark("c", 0, 10);
  assert.equal(logs.files, 2);
  assert.equal(logs.covers("b", 0, 10), false, "b was used least recently");
  assert.equal(logs.covers("a", 0, 10), true);
  assert.equal(logs.covers("c", 0, 10), true);
});

Deno.test("every part of a file's identity is in its key: any change makes a new key", () => {
  const base = identityKey(identity(), NOW)!;
  assert.ok(base);
  const changed: Partial<FileIdentity>[] = [
    { dev: 2n },
    { ino: 8n },
    { size: 4097n },
    { mtimeNs: ns(NOW - 59_000) },
    { ctimeNs: ns(NOW - 59_000) },
  ];
  for (const change of changed) {
    assert.notEqual(
      identityKey(identity(change), NOW),
      base,
      JSON.stringify(change, (_, v) => typeof v === "bigint" ? String(v) : v),
    );
  }
});

Deno.test("a file changed within SETTLE_MS has no key: its verification is not remembered", () => {
  const recent = ns(NOW - SETTLE_MS + 1);
  assert.equal(identityKey(identity({ mtimeNs: recent }), NOW), undefined);
  assert.equal(identityKey(identity({ ctimeNs: recent }), NOW), undefined);
  assert.ok(identityKey(identity({ ctimeNs: ns(NOW - SETTLE_MS) }), NOW));
});
