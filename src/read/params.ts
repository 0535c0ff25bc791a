// Validation of read parameters as users type them (HTTP query, CLI flags): decimal integers
// only, in range, so a bad value is refused with a message naming it and never reaches a file.

/** Largest `max_bytes` a read accepts: 64 MiB, the largest chunk the cache works in. */
export const MAX_READ_BYTES = 64 * 1024 * 1024;
/** `max_bytes` when a request does not give one: 1 MiB. */
export const DEFAULT_READ_BYTES = 1024 * 1024;

const U64_MAX = (1n << 64n) - 1n;
const U32_MAX = 0xffff_ffff;

/** A read parameter that is missing, malformed or out of range. */
export class ParamError extends Error {
  override readonly name = "ParamError";
  /**
   * @param param the parameter's name as the user wrote it
   * @param message what is wrong, naming the parameter and value
   */
  constructor(readonly param: string, message: string) {
    super(message);
  }
}

function show(text: string): string {
  return JSON.stringify(text.length > 40 ? text.slice(0, 40) + "…" : text);
}

/**
 * Parses an unsigned 64-bit decimal integer (an offset or a timestamp).
 *
 * @throws {ParamError} for anything but 1–20 decimal digits up to 2^64 − 1
 */
export function parseU64(text: string, param: string): bigint {
  if (!/^\d{1,20}$/.test(text)) {
    throw new ParamError(
      param,
      `${param} must be a non-negative decimal integer, got ${show(text)}`,
    );
  }
  const n = BigInt(text);
  if (n > U64_MAX) throw new ParamError(param, `${param} ${text} does not fit in 64 bits`);
  return n;
}

/**
 * Parses a stream, topic or partition id (Iggy ids are u32).
 *
 * @throws {ParamError} for anything but a decimal integer up to 2^32 − 1
 */
export function parseId(text: string, param: string): number {
  if (!/^\d{1,10}$/.test(text) || Number(text) > U32_MAX) {
    throw new ParamError(param, `${param} must be a decimal integer id, got ${show(text)}`);
  }
  return Number(text);
}

/**
 * Parses `max_bytes`: a decimal integer in 1..{@link MAX_READ_BYTES}.
 *
 * @param text the value, or undefined for {@link DEFAULT_READ_BYTES}
 * @throws {ParamError} when it is not a decimal integer or out of range
 */
export function parseMaxBytes(text: string | undefined, param = "max_bytes"): number {
  if (text === undefined) return DEFAULT_READ_BYTES;
  if (!/^\d{1,20}$/.test(text)) {
    throw new ParamError(param, `${param} must be a decimal integer, got ${show(text)}`);
  }
  return checkMaxBytes(Number(text), param);
}

/**
 * Checks a byte budget is within 1..{@link MAX_READ_BYTES}.
 *
 * @throws {ParamError} when it is not
 */
export function checkMaxBytes(n: number, param = "max_bytes"): number {
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_READ_BYTES) {
    throw new ParamError(
      param,
      `${param} must be between 1 and ${MAX_READ_BYTES} (64 MiB), got ${n}`,
    );
  }
  return n;
}

/** A read's start: exactly one of an offset and a timestamp. */
export type ReadStart = { offset: bigint; timestamp?: undefined } | {
  timestamp: bigint;
  offset?: undefined;
};

/**
 * Parses the start of a read from optional `offset` and `timestamp` values.
 *
 * @throws {ParamError} when both or neither are given, or the one given is malformed
 */
export function parseStart(
  offset: string | undefined,
  timestamp: string | undefined,
  names = { offset: "offset", timestamp: "timestamp" },
): ReadStart {
  if ((offset === undefined) === (timestamp === undefined)) {
    throw new ParamError(
      offset === undefined ? names.offset : names.timestamp,
      `give exactly one of ${names.offset} and ${names.timestamp}`,
    );
  }
  return offset !== undefined
    ? { offset: parseU64(offset, names.offset) }
    : { timestamp: parseU64(timestamp!, names.timestamp) };
}
