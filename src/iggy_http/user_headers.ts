// A message's `user_headers` exactly as the broker's JSON writes them (`impl Serialize for
// IggyMessage`, core/common/src/types/message/iggy_message.rs, alike in 0.8.0 and 0.9): no blob
// is `[]`; a blob that validates (core/binary_protocol/src/primitives/user_headers.rs: kind ≠ 0,
// field length 1..=255, whole key/value pairs) and whose kinds are known and of the right size
// (wire_conversions.rs `user_headers_from_wire`) becomes a list of
// `{"key":{"kind","value"},"value":{"kind","value"}}` with values in base64, ordered as Iggy's
// `BTreeMap<HeaderKey, HeaderValue>` orders them — by kind code, then key bytes — a repeated key
// keeping its last value; any other blob is the base64 string of its bytes.
import { Buffer } from "node:buffer";
import { HEADER_KINDS } from "../read/json.ts";

/** Fixed value sizes by kind code (`HeaderKind::expected_size`); 0 = any. */
const KIND_SIZES = [0, 0, 0, 1, 1, 2, 4, 8, 16, 1, 2, 4, 8, 16, 4, 8];

/** base64 of a byte range. */
export function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

interface Field {
  kind: number;
  bytes: Uint8Array;
}

/** The TLV fields of a blob, or undefined when it does not validate. */
function fields(blob: Uint8Array): Field[] | undefined {
  const v = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  const out: Field[] = [];
  let p = 0;
  while (p < blob.length) {
    if (blob.length - p < 5) return undefined;
    const kind = blob[p];
    const len = v.getUint32(p + 1, true);
    if (kind === 0 || len < 1 || len > 255 || blob.length - p - 5 < len) return undefined;
    out.push({ kind, bytes: blob.subarray(p + 5, p + 5 + len) });
    p += 5 + len;
  }
  return out.length % 2 === 0 ? out : undefined;
}

function known(f: Field): boolean {
  return f.kind >= 1 && f.kind <= 15 &&
    (KIND_SIZES[f.kind] === 0 || f.bytes.length === KIND_SIZES[f.kind]);
}

function compareKeys(a: Field, b: Field): number {
  if (a.kind !== b.kind) return a.kind - b.kind;
  const n = Math.min(a.bytes.length, b.bytes.length);
  for (let i = 0; i < n; i++) if (a.bytes[i] !== b.bytes[i]) return a.bytes[i] - b.bytes[i];
  return a.bytes.length - b.bytes.length;
}

function fieldJson(f: Field): string {
  return `{"kind":"${HEADER_KINDS[f.kind]}","value":"${base64(f.bytes)}"}`;
}

/**
 * The JSON text of a message's `user_headers` value.
 * @param blob the raw user-headers bytes of the message (empty for none)
 */
export function userHeadersJson(blob: Uint8Array): string {
  if (blob.length === 0) return "[]";
  const all = fields(blob);
  if (!all) return `"${base64(blob)}"`;
  const pairs: { key: Field; value: Field }[] = [];
  for (let i = 0; i < all.length; i += 2) {
    const key = all[i];
    const value = all[i + 1];
    if (!known(key) || !known(value)) return `"${base64(blob)}"`;
    const same = pairs.find((p) => compareKeys(p.key, key) === 0);
    if (same) same.value = value;
    else pairs.push({ key, value });
  }
  pairs.sort((a, b) => compareKeys(a.key, b.key));
  return `[${
    pairs.map((p) => `{"key":${fieldJson(p.key)},"value":${fieldJson(p.value)}}`).join(",")
  }]`;
}
