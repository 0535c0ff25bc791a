// The chunks kept in memory after they land: never more bytes than the cap; a take answers
// exactly the chunk's bytes or nothing; a chunk read to its end, dropped or evicted is gone;
// when full, the newest landing is the one not kept unless older ones went unread too long.
import assert from "node:assert/strict";
import fc from "fast-check";
import { LandedChunks } from "../../src/cache/landed.ts";

type Op =
  | { op: "put"; name: number; size: number }
  | { op: "take"; name: number; from: number; len: number }
  | { op: "drop"; name: number }
  | { op: "wait"; ms: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    op: fc.constant("put" as const),
    name: fc.nat(5),
    size: fc.integer({ min: 1, max: 40 }),
  }),
  fc.record({
    op: fc.constant("take" as const),
    name: fc.nat(5),
    from: fc.nat(40),
    len: fc.nat(40),
  }),
  fc.record({ op: fc.constant("drop" as const), name: fc.nat(5) }),
  fc.record({ op: fc.constant("wait" as const), ms: fc.nat(60) }),
);

/** The bytes of chunk `name` put with `size` at `serial`: distinct for every put. */
function bytesOf(name: number, size: number, serial: number): Uint8Array {
  return Uint8Array.from({ length: size }, (_, i) => (name * 31 + serial * 7 + i) & 0xff);
}

Deno.test("landed chunks follow their model: cap, exact bytes, read-to-end, newest not kept when full", () => {
  fc.assert(
    fc.property(
      fc.array(opArb, { maxLength: 60 }),
      fc.integer({ min: 0, max: 100 }),
      (ops, cap) => {
        let now = 0;
        const maxAge = 25;
        const landed = new LandedChunks(cap, maxAge, () => now);
        // The model: name -> { bytes, at } in insertion order.
        const model = new Map<number, { bytes: Uint8Array; at: number }>();
        const held = () => [...model.values()].reduce((n, c) => n + c.bytes.length, 0);
        ops.forEach((o, serial) => {
          const key = String(o.op === "wait" ? 0 : o.name);
          switch (o.op) {
            case "put": {
              const bytes = bytesOf(o.name, o.size, serial);
              model.delete(o.name);
              for (const [n, c] of model) {
                if (held() + o.size <= cap || now - c.at < maxAge) break;
                model.delete(n);
              }
              const fits = held() + o.size <= cap;
              if (fits) model.set(o.name, { bytes, at: now });
              assert.equal(landed.put(key, bytes), fits);
              break;
            }
            case "take": {
              const c = model.get(o.name);
              const from = Math.min(o.from, c?.bytes.length ?? o.from);
              const to = from + o.len;
              const got = landed.take(key, from, to);
              if (c === undefined || to > c.bytes.length) {
                assert.equal(got, undefined);
              } else {
                assert.deepStrictEqual(got, c.bytes.subarray(from, to));
                if (to === c.bytes.length) model.delete(o.name);
              }
              break;
            }
            case "drop":
              model.delete(o.name);
              landed.drop(key);
              break;
            case "wait":
              now += o.ms;
              break;
          }
          assert.equal(landed.bytes, held());
          assert.ok(landed.bytes <= cap, `${landed.bytes} bytes held over a cap of ${cap}`);
        });
      },
    ),
    { numRuns: 500 },
  );
});

Deno.test("a chunk larger than the cap is never kept, and clear lets everything go", () => {
  const landed = new LandedChunks(10, 1000, () => 0);
  assert.equal(landed.put("a", new Uint8Array(11)), false);
  assert.equal(landed.take("a", 0, 1), undefined);
  assert.equal(landed.put("b", new Uint8Array(4)), true);
  landed.clear();
  assert.equal(landed.bytes, 0);
  assert.equal(landed.take("b", 0, 1), undefined);
});
