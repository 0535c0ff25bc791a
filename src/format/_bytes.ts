// Little-endian field access and range checks shared by the Iggy codecs (private to src/format).

/** Iggy's per-message payload limit (`MAX_PAYLOAD_SIZE`, iggy_message.rs). */
export const MAX_PAYLOAD_SIZE = 64_000_000;
/** Iggy's per-message user-headers limit (`MAX_USER_HEADERS_SIZE`, iggy_message.rs). */
export const MAX_USER_HEADERS_SIZE = 100_000;

const U64_MAX = (1n << 64n) - 1n;
const U128_MAX = (1n << 128n) - 1n;
const U64_MASK = U64_MAX;

/** A DataView over exactly the bytes of `buf` (which may be a subarray). */
export function viewOf(buf: Uint8Array): DataView {
  return new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** Reads a u128 LE at `at`. */
export function getU128(v: DataView, at: number): bigint {
  return v.getBigUint64(at, true) | (v.getBigUint64(at + 8, true) << 64n);
}

/**
 * Reads a u64 LE at `at` as a Number, without a BigInt: exact below 2^53, and at or above 2^53
 * whenever the value is (so it still compares as too large against any safe-integer bound).
 */
export function getU64Number(v: DataView, at: number): number {
  return v.getUint32(at + 4, true) * 0x1_0000_0000 + v.getUint32(at, true);
}

/** Writes a u128 LE at `at`. */
export function setU128(v: DataView, at: number, value: bigint): void {
  v.setBigUint64(at, value & U64_MASK, true);
  v.setBigUint64(at + 8, value >> 64n, true);
}

/** Throws a RangeError unless `value` fits in an unsigned 64-bit field. */
export function checkU64(value: bigint, what: string): bigint {
  if (value < 0n || value > U64_MAX) throw new RangeError(`${what} ${value} does not fit in a u64`);
  return value;
}

/** Throws a RangeError unless `value` fits in an unsigned 128-bit field. */
export function checkU128(value: bigint, what: string): bigint {
  if (value < 0n || value > U128_MAX) {
    throw new RangeError(`${what} ${value} does not fit in a u128`);
  }
  return value;
}

/** Throws a RangeError unless `value` is an integer that fits in an unsigned 32-bit field. */
export function checkU32(value: number, what: string): number {
  if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff) {
    throw new RangeError(`${what} ${value} does not fit in a u32`);
  }
  return value;
}

/** True when every byte of `buf[from, to)` is zero. */
export function allZero(buf: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (buf[i] !== 0) return false;
  return true;
}

/** Formats a u64 checksum the way the format documents print them. */
export function hex64(value: bigint): string {
  return "0x" + value.toString(16).padStart(16, "0");
}
