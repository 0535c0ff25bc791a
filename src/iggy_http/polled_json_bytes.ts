// The poll answer's messages written straight into bytes, the same bytes `messageJson` would
// encode to (polled_json.ts, whose layout they share): the header's names from bytes encoded
// once, its numbers and the payload's base64 written in place, so that an answer of tens of MiB
// makes little garbage besides its pieces (a string per number).
import type { PolledMessage } from "../iggy_front/remote_read.ts";
import {
  fieldOpening,
  HEADER_FIELDS,
  PAYLOAD_OPENING,
  USER_HEADERS_OPENING,
} from "./polled_json.ts";
import { userHeadersJson } from "./user_headers.ts";

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

const OPENINGS = HEADER_FIELDS.map((_, i) => encoder.encode(fieldOpening(i)));
const PAYLOAD = encoder.encode(PAYLOAD_OPENING);
const USER_HEADERS = encoder.encode(USER_HEADERS_OPENING);
/** Digits of the largest header value (a u128 id). */
const MAX_DIGITS = 39;
/** Bytes of a message's JSON besides its payload's base64 and user headers, at most. */
const FIXED_BYTES = 1 + OPENINGS.reduce((n, o) => n + o.length + MAX_DIGITS, 0) + PAYLOAD.length +
  USER_HEADERS.length + 1;

/** Writes `text` as UTF-8 into `out` at `at`; @returns the end */
function writeText(text: string, out: Uint8Array, at: number): number {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 0x7f) return at - i + encoder.encodeInto(text, out.subarray(at - i)).written;
    out[at++] = c;
  }
  return at;
}

function writeBytes(bytes: Uint8Array, out: Uint8Array, at: number): number {
  out.set(bytes, at);
  return at + bytes.length;
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
  // What the messages take at most, to size the piece once.
  let bound = 0;
  let next = from;
  const userHeaders: string[] = [];
  while (next < messages.length) {
    const m = messages[next].message;
    const json = userHeadersJson(m.userHeaders);
    const most = FIXED_BYTES + base64Length(m.payload.length) + 3 * json.length;
    if (next > from && bound + most > pieceBytes) break;
    userHeaders.push(json);
    bound += most;
    next++;
  }
  const out = new Uint8Array(bound);
  let at = 0;
  for (let i = from; i < next; i++) {
    const p = messages[i];
    if (i > 0) out[at++] = 0x2c; // ,
    for (let f = 0; f < HEADER_FIELDS.length; f++) {
      at = writeBytes(OPENINGS[f], out, at);
      at = writeText(String(HEADER_FIELDS[f][1](p)), out, at);
    }
    at = writeBytes(PAYLOAD, out, at);
    at = writeBase64(p.message.payload, out, at);
    at = writeBytes(USER_HEADERS, out, at);
    at = writeText(userHeaders[i - from], out, at);
    out[at++] = 0x7d; // }
  }
  return { bytes: out.subarray(0, at), next };
}
