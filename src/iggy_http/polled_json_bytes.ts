// The poll answer's messages written straight into bytes, the same bytes `messageJson` would
// encode to (polled_json.ts, whose layout they share): payloads in base64 without an
// intermediate string, so that an answer of tens of MiB makes little garbage besides its pieces.
import type { PolledMessage } from "../iggy_front/remote_read.ts";
import { messageJsonAround } from "./polled_json.ts";

const ALPHABET = new TextEncoder().encode(
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
);
const PAD = 0x3d; // =
const encoder = new TextEncoder();

/** Bytes of `bytes` in base64 (padded). */
export function base64Length(n: number): number {
  return 4 * Math.ceil(n / 3);
}

/** Writes `bytes` in base64 into `out` at `at`; @returns the end */
export function writeBase64(bytes: Uint8Array, out: Uint8Array, at: number): number {
  const n = bytes.length;
  let i = 0;
  for (; i + 3 <= n; i += 3) {
    const v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out[at++] = ALPHABET[v >>> 18];
    out[at++] = ALPHABET[(v >>> 12) & 63];
    out[at++] = ALPHABET[(v >>> 6) & 63];
    out[at++] = ALPHABET[v & 63];
  }
  if (i < n) {
    const two = i + 1 < n;
    const v = (bytes[i] << 16) | (two ? bytes[i + 1] << 8 : 0);
    out[at++] = ALPHABET[v >>> 18];
    out[at++] = ALPHABET[(v >>> 12) & 63];
    out[at++] = two ? ALPHABET[(v >>> 6) & 63] : PAD;
    out[at++] = PAD;
  }
  return at;
}

/** A message's JSON before its payload and after it, as bytes. */
function around(p: PolledMessage): { head: Uint8Array; tail: Uint8Array } {
  const { head, tail } = messageJsonAround(p);
  return { head: encoder.encode(head), tail: encoder.encode(tail) };
}

/**
 * Messages `from`.. as JSON, `,`-separated (a `,` first unless `from` is 0), into one piece of
 * about `pieceBytes` (more when one message alone is larger).
 * @returns the piece and the index of the first message not in it
 */
export function messagesPiece(
  messages: PolledMessage[],
  from: number,
  pieceBytes: number,
): { bytes: Uint8Array; next: number } {
  const parts: { head: Uint8Array; tail: Uint8Array; payload: Uint8Array }[] = [];
  let size = 0;
  let next = from;
  while (next < messages.length) {
    const { head, tail } = around(messages[next]);
    const payload = messages[next].message.payload;
    const bytes = (next > 0 ? 1 : 0) + head.length + base64Length(payload.length) + tail.length;
    if (parts.length > 0 && size + bytes > pieceBytes) break;
    parts.push({ head, tail, payload });
    size += bytes;
    next++;
  }
  const out = new Uint8Array(size);
  let at = 0;
  parts.forEach((part, i) => {
    if (from + i > 0) out[at++] = 0x2c; // ,
    out.set(part.head, at);
    at += part.head.length;
    at = writeBase64(part.payload, out, at);
    out.set(part.tail, at);
    at += part.tail.length;
  });
  return { bytes: out, next };
}
