// What the provider tests share to drive a store through faults: a `fetch` that records what the
// store sends and answers from a handler, the typed-error assertion, and the check that no
// printed form of an error (or a store) carries a secret.
import assert from "node:assert/strict";
import type { FetchFn } from "../../providers/http.ts";
import { StoreError, type StoreErrorKind } from "../../providers/types.ts";

/** A request as the store handed it to `fetch`. */
export interface SeenRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: Uint8Array;
}

/** Answers one request; `n` counts the requests so far, this one included. */
export type FakeHandler = (request: SeenRequest, n: number) => Response | Promise<Response>;

/**
 * A `fetch` that records each request in `seen`, then answers it with `handler`.
 * @example
 * const { fetch, seen } = recordingFetch(() => new Response(null, { status: 503 }));
 */
export function recordingFetch(handler: FakeHandler): { fetch: FetchFn; seen: SeenRequest[] } {
  const seen: SeenRequest[] = [];
  const fetch: FetchFn = async (url, init) => {
    const request: SeenRequest = {
      method: init.method ?? "GET",
      url,
      headers: init.headers as Record<string, string>,
      body: init.body as Uint8Array | undefined,
    };
    seen.push(request);
    return await handler(request, seen.length);
  };
  return { fetch, seen };
}

/**
 * Asserts that `promise` rejects with a {@link StoreError} of `kind`; `check` asserts more.
 * @returns the error
 */
export async function rejectsWith(
  promise: Promise<unknown>,
  kind: StoreErrorKind,
  check?: (err: StoreError) => void,
): Promise<StoreError> {
  let caught: unknown;
  await promise.then(() => assert.fail("expected a failure"), (err) => (caught = err));
  assert.ok(caught instanceof StoreError, `expected a StoreError, got ${caught}`);
  assert.equal(caught.kind, kind, caught.message);
  check?.(caught);
  return caught;
}

/**
 * A `rejectsWith(promise, kind, code?)` for a provider's tests: it also compares the error's
 * code when one is given, then hands the error to `assertClean` (which checks it for secrets).
 */
export function rejectsWithCode(
  assertClean: (err: StoreError) => void,
): (promise: Promise<unknown>, kind: StoreErrorKind, code?: string) => Promise<StoreError> {
  return (promise, kind, code) =>
    rejectsWith(promise, kind, (err) => {
      if (code) assert.equal(err.detail.code, code);
      assertClean(err);
    });
}

/**
 * Asserts that no secret shows in any form `value` takes when printed, logged or serialized:
 * `String(value)`, `Deno.inspect` down to `depth`, and for a StoreError its message and detail.
 * @param secrets each secret with what to call it when it leaks
 */
export function assertNoLeak(
  value: unknown,
  secrets: ReadonlyArray<readonly [secret: string, what: string]>,
  options: { depth?: number } = {},
): void {
  const texts = [String(value), Deno.inspect(value, { depth: options.depth ?? 10 })];
  if (value instanceof StoreError) texts.push(value.message, JSON.stringify(value.detail));
  for (const text of texts) {
    for (const [secret, what] of secrets) {
      assert.ok(!text.includes(secret), `${what} leaked: ${text}`);
    }
  }
}
