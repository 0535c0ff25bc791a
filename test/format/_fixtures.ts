// Helpers for the format tests: the golden test vectors (test/fixtures/data/), message
// arbitraries, and an assertion for FormatErrors.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { FormatError, type FormatErrorCode } from "../../src/format/errors.ts";
import type { Message } from "../../src/format/types.ts";

/** `test/fixtures/data/`: the golden vectors and their README, kept in the repository. */
export const TESTDATA = new URL("../fixtures/data/", import.meta.url);

/** Reads one test vector file. */
export async function testdata(name: string): Promise<Uint8Array> {
  return new Uint8Array(await readFile(fileURLToPath(new URL(name, TESTDATA))));
}

/** The path of a test vector file. */
export function testdataPath(name: string): string {
  return fileURLToPath(new URL(name, TESTDATA));
}

/** Asserts that `fn` throws a FormatError with this code, file and position. */
export function assertFormatError(
  fn: () => unknown,
  expected: { code: FormatErrorCode; file: string; position: number; message?: RegExp },
): FormatError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  return checkFormatError(caught, expected);
}

/** As {@link assertFormatError}, for a promise. */
export async function assertRejectsFormat(
  p: Promise<unknown>,
  expected: { code: FormatErrorCode; file: string; position: number; message?: RegExp },
): Promise<FormatError> {
  let caught: unknown;
  try {
    await p;
  } catch (err) {
    caught = err;
  }
  return checkFormatError(caught, expected);
}

function checkFormatError(
  caught: unknown,
  expected: { code: FormatErrorCode; file: string; position: number; message?: RegExp },
): FormatError {
  assert.ok(caught instanceof FormatError, `expected a FormatError, got ${caught}`);
  assert.deepEqual(
    { code: caught.code, file: caught.file, position: caught.position },
    { code: expected.code, file: expected.file, position: expected.position },
    caught.message,
  );
  assert.ok(caught.message.startsWith(`${expected.file} @ byte ${expected.position}: `));
  if (expected.message) assert.match(caught.message, expected.message);
  return caught;
}

/** Drains a generator (a walk) into an array. */
export function all<T>(it: Iterable<T>): T[] {
  return [...it];
}

const U64_MAX = (1n << 64n) - 1n;

/** Payloads and user-header blobs: often empty, sometimes a few hundred bytes. */
const bytesArb = fc.oneof(
  fc.constant(new Uint8Array(0)),
  fc.uint8Array({ maxLength: 40 }),
  fc.uint8Array({ minLength: 100, maxLength: 400 }),
);

/** The per-message fields a record does not tie to its neighbours. */
const bodyArb = fc.record({
  id: fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
  payload: bytesArb,
  userHeaders: bytesArb,
});

/** A run of Iggy 0.8 messages with contiguous offsets from `startOffset` (1..6 messages). */
export const messages08Arb: fc.Arbitrary<{ startOffset: bigint; messages: Message[] }> = fc
  .record({
    startOffset: fc.bigInt({ min: 0n, max: U64_MAX - 10n }),
    bodies: fc.array(
      fc.record({
        body: bodyArb,
        timestamp: fc.bigInt({ min: 0n, max: U64_MAX }),
        originTimestamp: fc.bigInt({ min: 0n, max: U64_MAX }),
      }),
      { minLength: 1, maxLength: 6 },
    ),
  })
  .map(({ startOffset, bodies }) => ({
    startOffset,
    messages: bodies.map((b, i) => ({
      offset: startOffset + BigInt(i),
      timestamp: b.timestamp,
      originTimestamp: b.originTimestamp,
      ...b.body,
    })),
  }));

/** One Iggy 0.9 batch's worth of message fields (offsets assigned later). */
const batchArb = fc.record({
  timestamp: fc.bigInt({ min: 0n, max: U64_MAX }),
  originBase: fc.bigInt({ min: 0n, max: U64_MAX - 0xffff_ffffn }),
  bodies: fc.array(
    fc.record({ body: bodyArb, delta: fc.oneof(fc.constant(0), fc.nat(0xffff_ffff)) }),
    { minLength: 1, maxLength: 6 },
  ),
});

/** A run of Iggy 0.9 batches with contiguous offsets from `startOffset` (1..4 batches). */
export const batches09Arb: fc.Arbitrary<
  { startOffset: bigint; partitionId: number; batches: Message[][] }
> = fc
  .record({
    startOffset: fc.bigInt({ min: 0n, max: U64_MAX - 100n }),
    partitionId: fc.nat(),
    batches: fc.array(batchArb, { minLength: 1, maxLength: 4 }),
  })
  .map(({ startOffset, partitionId, batches }) => {
    let next = startOffset;
    return {
      startOffset,
      partitionId,
      batches: batches.map((b) =>
        b.bodies.map((m) => ({
          offset: next++,
          timestamp: b.timestamp,
          originTimestamp: b.originBase + BigInt(m.delta),
          ...m.body,
        }))
      ),
    };
  });
