// The poll answer's messages written as bytes are exactly the broker's JSON text that
// `messageJson` makes, whatever the payload (every length modulo 3, any byte), the user headers
// and the integers, and however the messages are cut into pieces.
import assert from "node:assert/strict";
import fc from "fast-check";
import type { PolledMessage } from "../../src/iggy_front/remote_read.ts";
import { messageJson } from "../../src/iggy_http/polled_json.ts";
import { messagesPiece, writeBase64 } from "../../src/iggy_http/polled_json_bytes.ts";

const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
const message: fc.Arbitrary<PolledMessage> = fc.record({
  checksum: u64,
  message: fc.record({
    offset: u64,
    timestamp: u64,
    originTimestamp: u64,
    id: fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
    payload: fc.uint8Array({ maxLength: 3000 }),
    userHeaders: fc.uint8Array({ maxLength: 64 }),
  }),
});

Deno.test("base64 written as bytes is the base64 of the bytes", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
      const out = new Uint8Array(4 * Math.ceil(bytes.length / 3));
      assert.equal(writeBase64(bytes, out, 0), out.length);
      assert.equal(new TextDecoder().decode(out), btoa(String.fromCharCode(...bytes)));
    }),
    { numRuns: 500 },
  );
});

Deno.test("messages written as bytes, in pieces of any size, are the broker's JSON text", () => {
  fc.assert(
    fc.property(
      fc.array(message, { maxLength: 12 }),
      fc.integer({ min: 1, max: 8000 }),
      (messages, pieceBytes) => {
        const pieces: Uint8Array[] = [];
        for (let at = 0; at < messages.length;) {
          const piece = messagesPiece(messages, at, pieceBytes);
          assert.ok(piece.next > at, "every piece takes at least one message");
          pieces.push(piece.bytes);
          at = piece.next;
        }
        const text = pieces.map((p) => new TextDecoder().decode(p)).join("");
        assert.equal(text, messages.map(messageJson).join(","));
      },
    ),
    { numRuns: 300 },
  );
});
