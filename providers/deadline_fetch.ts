// A `fetch` that gives up on a store that stops answering: the answer's first byte (its status
// and headers) must come within `firstByteMs` of the request, and each piece of its body within
// `stallMs` of the one before. A large body that keeps flowing may take as long as it needs;
// only silence is cut; a caller that reads the body itself (sendHttp, through `WATCHES_BODY`)
// gets it unwrapped and keeps the stall deadline while it reads. `openStore` wraps the stores'
// fetch with it (`fetch_timeout` for both), so every request of the read path and of the worker
// has these deadlines besides the transport's whole-request timeout (providers/http.ts).
import { type Clock, systemClock } from "../src/base/clock.ts";
import { BODY_WATCH, type BodyWatch, type FetchFn, WATCHES_BODY } from "./http.ts";

/** The deadlines of {@link deadlineFetch}, in milliseconds. */
export interface ResponseDeadlines {
  /** From sending a request without a body to its status and headers. */
  firstByteMs: number;
  /** Between two pieces of a response body (and from the headers to the first piece). */
  stallMs: number;
  /** Where the deadlines run. @default systemClock */
  clock?: Clock;
}

/** A store that went silent past one of the deadlines. */
export class ResponseDeadlineError extends Error {
  override readonly name = "ResponseDeadlineError";
}

/**
 * Wraps `fetchFn` so that an answer that does not start, or stops, in time fails: the request
 * is aborted and the call (or the body read) rejects with {@link ResponseDeadlineError}, which
 * `sendHttp` reports as a retryable `Transport` error.
 *
 * A request that sends a body (an upload) is exempt from the first-byte deadline: no answer can
 * start before the upload ends, and `fetch` does not tell how the upload is going; the
 * transport's whole-request timeout bounds it. Its answer's body is small, so it gets no stall
 * deadline either (S3 may keep a slow CompleteMultipartUpload alive with spaces).
 *
 * @param fetchFn the fetch to send with
 * @param deadlines the deadlines
 * @returns a fetch with the same signature
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * // A transport whose answer never starts: the first-byte deadline gives up on it.
 * const silent = (_input: string, init: RequestInit) =>
 *   new Promise<Response>((_, reject) =>
 *     init.signal?.addEventListener("abort", () => reject(init.signal!.reason))
 *   );
 * const guarded = deadlineFetch(silent, { firstByteMs: 10, stallMs: 10 });
 * await assert.rejects(guarded("http://127.0.0.1:9/", { method: "GET" }));
 * // In a store: new S3Store({ ...options, fetch: deadlineFetch(fetch, { firstByteMs: 5000, stallMs: 5000 }) })
 * ```
 */
export function deadlineFetch(fetchFn: FetchFn, deadlines: ResponseDeadlines): FetchFn {
  const clock = deadlines.clock ?? systemClock;
  return async (input, init) => {
    if (sendsBody(init)) return await fetchFn(input, init);
    const controller = new AbortController();
    const outer = init.signal ?? undefined;
    const onAbort = () => controller.abort(outer?.reason);
    if (outer?.aborted) onAbort();
    else outer?.addEventListener("abort", onAbort, { once: true });
    const release = () => outer?.removeEventListener("abort", onAbort);
    const expire = (what: string) =>
      controller.abort(new ResponseDeadlineError(`the store went silent: ${what}`));
    // Rejects once the request is aborted, for whatever reason: a body read never outlives it.
    const aborted = new Promise<never>((_, reject) => {
      const fail = () => reject(controller.signal.reason);
      if (controller.signal.aborted) fail();
      else controller.signal.addEventListener("abort", fail, { once: true });
    });
    aborted.catch(() => {});

    let response: Response;
    const cancelFirstByte = clock.setTimer(
      deadlines.firstByteMs,
      () => expire(`no answer within ${deadlines.firstByteMs} ms`),
    );
    try {
      const pending = fetchFn(input, { ...init, signal: controller.signal });
      // An answer that turns up after the deadline is dropped, its connection released.
      pending.then((late) => {
        if (controller.signal.aborted) late.body?.cancel().catch(() => {});
      }, () => {});
      response = await Promise.race([pending, aborted]);
    } catch (err) {
      release();
      throw controller.signal.aborted ? controller.signal.reason : err;
    } finally {
      cancelFirstByte();
    }
    if (!response.body || NULL_BODY.has(response.status)) {
      release();
      return response;
    }
    if ((init as { [WATCHES_BODY]?: boolean })[WATCHES_BODY]) {
      // The caller reads the body and keeps the stall deadline itself (sendHttp): the body goes
      // to it as the runtime made it.
      const watch: BodyWatch = {
        stallMs: deadlines.stallMs,
        clock,
        expire: () => {
          expire(`no byte of the body for ${deadlines.stallMs} ms`);
          return controller.signal.reason;
        },
        done: release,
      };
      Object.defineProperty(response, BODY_WATCH, { value: watch });
      return response;
    }
    const reader = response.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(stream) {
        const cancelStall = clock.setTimer(
          deadlines.stallMs,
          () => expire(`no byte of the body for ${deadlines.stallMs} ms`),
        );
        try {
          const read = reader.read();
          read.catch(() => {});
          const { done, value } = await Promise.race([read, aborted]);
          if (done) {
            release();
            stream.close();
          } else stream.enqueue(value);
        } catch (err) {
          release();
          reader.cancel(err).catch(() => {});
          stream.error(controller.signal.aborted ? controller.signal.reason : err);
        } finally {
          cancelStall();
        }
      },
      async cancel(reason) {
        release();
        await reader.cancel(reason);
      },
    });
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/** Statuses whose answers never carry a body. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** True when the request carries a body (PUT, POST with bytes). */
function sendsBody(init: RequestInit): boolean {
  const body = init.body;
  if (body === undefined || body === null) return false;
  return !(body instanceof Uint8Array) || body.byteLength > 0;
}
