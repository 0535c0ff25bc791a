// sendHttp reads a whole body, however it arrives: in many pieces into one buffer of its
// declared length, without a length by joining the pieces; a body shorter or longer than its
// Content-Length is a Transport error, never bytes handed on as if whole.
import assert from "node:assert/strict";
import fc from "fast-check";
import { errorText, sendHttp } from "../../providers/http.ts";
import { StoreError } from "../../providers/types.ts";

/** A response whose body arrives as `pieces`, with the given headers. */
function answer(pieces: Uint8Array[], headers: Record<string, string>) {
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      if (i < pieces.length) c.enqueue(pieces[i++]);
      else c.close();
    },
  });
  return () => Promise.resolve(new Response(body, { status: 206, headers }));
}

const get = { method: "GET", url: "http://store.invalid/k", headers: {} };

Deno.test("a body in any number of pieces is read whole, with or without its length", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 40 }),
      fc.boolean(),
      async (pieces, declared) => {
        const whole = Uint8Array.from(pieces.flatMap((p) => [...p]));
        const headers: Record<string, string> = declared
          ? { "content-length": String(whole.length) }
          : {};
        const res = await sendHttp(answer(pieces, headers), get, { op: "get", key: "k" });
        assert.deepEqual(res.body, whole);
        assert.equal(res.body.byteLength, whole.length);
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("a body shorter or longer than its Content-Length is a Transport error", async () => {
  const piece = new Uint8Array(100).fill(7);
  for (
    const [pieces, length, message] of [
      [[piece], 150, /truncated body: got 100 of 150 bytes/],
      [[piece, piece], 150, /overlong body: more than the 150 bytes declared/],
    ] as const
  ) {
    await assert.rejects(
      sendHttp(answer([...pieces], { "content-length": String(length) }), get, {
        op: "get",
        key: "k",
      }),
      (err) => err instanceof StoreError && err.kind === "Transport" && message.test(err.message),
    );
  }
});

Deno.test("errorText: Bun's advice to its developers is not passed on to operators", () => {
  const reset = new TypeError(
    "ECONNRESET: The socket connection was closed unexpectedly. For more information, pass " +
      "`verbose: true` in the second argument to fetch()",
  );
  assert.equal(errorText(reset), "ECONNRESET: The socket connection was closed unexpectedly.");
  assert.equal(
    errorText(new Error("request failed", { cause: reset })),
    "request failed: ECONNRESET: The socket connection was closed unexpectedly.",
  );
});
