// The streamed answers' body: the pieces arrive whole and in order, none is made before it is
// asked for, and what the answer holds is given back exactly once — when it is all taken, when
// the client goes away, or when a piece fails (and then the body errors: never a short body).
import assert from "node:assert/strict";
import fc from "fast-check";
import { piecesOf, pieceStream } from "../../src/base/piece_stream.ts";

const pieceArb = fc.uint8Array({ maxLength: 64 });

/** Pieces from `list`, counting how many were made and whether the source was closed early. */
function source(list: Uint8Array[], failAt = -1) {
  const seen = { made: 0, returned: false };
  const it: Iterator<Uint8Array> = {
    next() {
      if (seen.made === failAt) throw new Error(`piece ${failAt} unreadable`);
      if (seen.made >= list.length) return { done: true, value: undefined };
      return { done: false, value: list[seen.made++] };
    },
    return() {
      seen.returned = true;
      return { done: true, value: undefined };
    },
  };
  return { it, seen };
}

Deno.test("a piece stream carries every piece in order and releases once at the end", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(pieceArb, { maxLength: 20 }), async (list) => {
      const { it } = source(list);
      let released = 0;
      const got = new Uint8Array(
        await new Response(pieceStream(it, { release: () => void released++ })).arrayBuffer(),
      );
      const want = new Uint8Array(list.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of list) want.set(p, (at += p.length) - p.length);
      assert.deepStrictEqual(got, want);
      assert.equal(released, 1);
    }),
    { numRuns: 100 },
  );
});

Deno.test("a client that goes away after k pieces: nothing more is made, released once", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(pieceArb, { minLength: 1, maxLength: 20 }),
      fc.nat(),
      async (list, k0) => {
        const k = k0 % list.length;
        const { it, seen } = source(list);
        let released = 0;
        const reader = pieceStream(it, { release: () => void released++ }).getReader();
        for (let i = 0; i < k; i++) assert.deepStrictEqual((await reader.read()).value, list[i]);
        await reader.cancel();
        assert.equal(released, 1);
        assert.ok(seen.returned, "the source is closed");
        assert.ok(seen.made <= k + 1, `made ${seen.made} pieces for ${k} taken`);
      },
    ),
    { numRuns: 100 },
  );
});

Deno.test("a piece that fails errors the body, is reported once and releases once", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(pieceArb, { minLength: 1, maxLength: 20 }),
      fc.nat(),
      async (list, k0) => {
        const k = k0 % list.length;
        const { it } = source(list, k);
        let released = 0;
        const failures: unknown[] = [];
        const body = pieceStream(it, {
          release: () => void released++,
          failed: (err) => void failures.push(err),
        });
        await assert.rejects(new Response(body).arrayBuffer(), /unreadable/);
        assert.equal(failures.length, 1);
        assert.equal(released, 1);
      },
    ),
    { numRuns: 100 },
  );
});

Deno.test("piecesOf cuts bytes into views of at most the size, covering them exactly", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), fc.integer({ min: 1, max: 64 }), (b, size) => {
      const pieces = [...piecesOf(b, size)];
      assert.ok(pieces.every((p) => p.length > 0 && p.length <= size));
      assert.deepStrictEqual(new Uint8Array(pieces.flatMap((p) => [...p])), b);
      assert.ok(pieces.every((p) => p.buffer === b.buffer), "views, not copies");
    }),
  );
});
