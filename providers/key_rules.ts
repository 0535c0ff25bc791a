// Key rules shared by the in-process stores (fs, sim): what a key may be, the order keys list in,
// and the opaque continuation token. Real stores decide these themselves; fs and sim copy S3.
import { Buffer } from "node:buffer";
import { StoreError } from "./types.ts";

/** S3's limit on a key, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 1024;

/** S3's limit on one page of a listing. */
export const MAX_LIST_KEYS = 1000;

const encoder = new TextEncoder();

/** Byte length of `s` in UTF-8. */
export function utf8Length(s: string): number {
  return encoder.encode(s).length;
}

/**
 * Refuses keys no object store accepts: empty, longer than 1024 UTF-8 bytes, or not valid
 * Unicode (a lone surrogate has no UTF-8 form).
 * @throws {StoreError} `Unsupported` with code `InvalidKey`.
 */
export function checkKey(key: string, op: string): void {
  if (key.length === 0) throw invalidKey(key, op, "the key is empty");
  if (!key.isWellFormed()) throw invalidKey(key, op, "the key is not valid Unicode");
  if (utf8Length(key) > MAX_KEY_BYTES) {
    throw invalidKey(key, op, `the key is longer than ${MAX_KEY_BYTES} UTF-8 bytes`);
  }
}

/** The typed error for a key a store cannot hold. */
export function invalidKey(key: string, op: string, why: string): StoreError {
  return new StoreError("Unsupported", `invalid key ${JSON.stringify(key)}: ${why}`, {
    op,
    key,
    code: "InvalidKey",
  });
}

/**
 * Compares two strings in the order of their UTF-8 bytes (= code point order), the order S3 and
 * the other stores list keys in. JavaScript's `<` compares UTF-16 code units, which puts
 * U+10000.. (surrogate pairs) before U+E000..U+FFFF; shifting the units fixes that without
 * encoding.
 */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return a.length - b.length;
}

/** The continuation token for a page that ended at `lastKey`: the key, base64url-encoded. */
export function encodeToken(lastKey: string): string {
  return Buffer.from(lastKey, "utf8").toString("base64url");
}

/**
 * The key a continuation token resumes after.
 * @throws {StoreError} `Malformed` when the token is not one this store handed out.
 */
export function decodeToken(token: string, op: string): string {
  const key = /^[A-Za-z0-9_-]+$/.test(token)
    ? Buffer.from(token, "base64url").toString("utf8")
    : "";
  if (key === "" || encodeToken(key) !== token) {
    throw new StoreError("Malformed", `continuation token ${JSON.stringify(token)} is not valid`, {
      op,
      code: "InvalidToken",
    });
  }
  return key;
}

/** The page size to use for a listing: `maxKeys` clamped to 1..1000, 1000 by default. */
export function pageSize(maxKeys: number | undefined): number {
  if (maxKeys === undefined || !Number.isFinite(maxKeys)) return MAX_LIST_KEYS;
  return Math.min(MAX_LIST_KEYS, Math.max(1, Math.floor(maxKeys)));
}
