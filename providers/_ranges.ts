// Byte ranges the same way in every store: what a range may be, the error for one that starts at
// or past the end, and for the HTTP stores the `Range` value they send and the reading of the
// answer (a 206 with its Content-Range, or a 200 carrying the whole object).
import { type HttpResponse, totalFromContentRange } from "./http.ts";
import { type GetOptions, StoreError } from "./types.ts";

/** A ranged get's `[start, start + length)`. */
export type ByteRange = NonNullable<GetOptions["range"]>;

/** How a range error words its message. */
export interface RangeWording {
  /** What the message starts with; fs and sim say `""`. @default `get {key}: ` */
  lead?: string;
  /** What the range reads from. @default "object" */
  noun?: string;
}

/**
 * Refuses what is not a byte range: a start or length that is not a safe integer, a start
 * below 0, a length below 1.
 * @throws {StoreError} `InvalidRange` with code `InvalidRange`
 */
export function checkRange(range: ByteRange, key: string, wording: RangeWording = {}): void {
  const { start, length } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(length) || start < 0 || length < 1) {
    throw new StoreError(
      "InvalidRange",
      `${leadOf(key, wording)}range ${start}+${length} is not a byte range`,
      { op: "get", key, code: "InvalidRange" },
    );
  }
}

/** The error (HTTP 416) for a range starting at `start` of an object of `size` bytes, or past. */
export function rangeError(
  key: string,
  start: number,
  size: number,
  wording: RangeWording = {},
): StoreError {
  return new StoreError(
    "InvalidRange",
    `${leadOf(key, wording)}range starts at ${start}, ${
      wording.noun ?? "object"
    } has ${size} bytes`,
    { op: "get", key, status: 416, code: "InvalidRange" },
  );
}

function leadOf(key: string, wording: RangeWording): string {
  return wording.lead ?? `get ${key}: `;
}

/**
 * The byte span `[start, end)` a ranged get returns from an object of `size` bytes: a range
 * running past the end is clamped, like S3. The in-process stores' (fs, sim) range rule.
 * @throws {StoreError} `InvalidRange` when the range starts at or past the end, or is empty.
 */
export function resolveRange(
  range: ByteRange | undefined,
  size: number,
  key: string,
): [number, number] {
  if (!range) return [0, size];
  checkRange(range, key, { lead: "" });
  if (range.start >= size) throw rangeError(key, range.start, size, { lead: "" });
  return [range.start, Math.min(size, range.start + range.length)];
}

/** The `Range` value for [start, start + length); a zero length asks for one byte. */
export function rangeHeader(range: ByteRange): string {
  return `bytes=${range.start}-${range.start + Math.max(range.length, 1) - 1}`;
}

/** How {@link rangedBody} words its errors and how far it trusts a 206. */
export interface RangedBodyOptions extends RangeWording {
  /** The service's `Malformed` error for an answer it cannot read (`why` names the fault). */
  malformed: (why: string) => StoreError;
  /**
   * Take a 206 as the range even when it starts at or past the total it names (S3's reading).
   * Otherwise such a 206 — Azurite's answer to a range starting at the end — is `InvalidRange`.
   * @default false
   */
  trustPartial?: boolean;
}

/**
 * The bytes and object size a GET answered with. Without a range: the whole body. A 206: the
 * body, cut to the range's length, and the total from Content-Range. A 200 to a ranged request
 * (the server sent the whole object): the range cut out of it.
 * @throws {StoreError} `options.malformed(…)` for a 206 without a usable Content-Range;
 *   `InvalidRange` for a range that starts at or past the end of the object
 */
export function rangedBody(
  response: HttpResponse,
  range: ByteRange | undefined,
  key: string,
  options: RangedBodyOptions,
): { bytes: Uint8Array; size: number } {
  const body = response.body;
  if (!range) return { bytes: body, size: body.byteLength };
  if (response.status === 206) {
    const size = totalFromContentRange(response.headers.get("content-range"));
    if (size === undefined) throw options.malformed("206 without a usable Content-Range");
    if (!options.trustPartial && range.start >= size) {
      throw rangeError(key, range.start, size, options);
    }
    const bytes = body.byteLength > range.length ? body.subarray(0, range.length) : body;
    return { bytes, size };
  }
  const size = body.byteLength;
  if (range.start >= size) throw rangeError(key, range.start, size, options);
  return { bytes: body.slice(range.start, range.start + range.length), size };
}
