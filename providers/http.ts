// The thin HTTP transport every cloud provider sends through: `fetch` with a per-request
// timeout, bodies always as bounded `Uint8Array`s with an explicit Content-Length (Deno sends a
// ReadableStream chunked, which S3 and Azure reject), and whole-body reads that notice
// truncation. Network failures become `Transport` errors; the caller's abort stays an AbortError.
import { type Clock, systemClock } from "../src/base/clock.ts";
import { where } from "./_errors.ts";
import { concatBytes } from "../src/base/bytes.ts";
import { StoreError } from "./types.ts";

/** The subset of `fetch` the providers use; inject one in tests. */
export type FetchFn = (input: string, init: RequestInit) => Promise<Response>;

/**
 * Set in a request's init by a caller that reads the answer's body itself and keeps the stall
 * deadline while it does ({@link BodyWatch}): a fetch that enforces one (providers/
 * deadline_fetch.ts) then hands the body over as the runtime made it, instead of re-streaming
 * every piece through a timer of its own — which cost a cold read about a third of its fetch CPU.
 */
export const WATCHES_BODY: unique symbol = Symbol("tierd.watchesBody");

/** On an answer to a {@link WATCHES_BODY} request: the stall deadline its body's reader keeps. */
export const BODY_WATCH: unique symbol = Symbol("tierd.bodyWatch");

/** The stall deadline of a body, for the code that reads it. */
export interface BodyWatch {
  /** Longest silence allowed between two pieces (and before the first). */
  stallMs: number;
  clock: Clock;
  /** Ends the request: the body went silent for `stallMs`. @returns the error to throw */
  expire(): Error;
  /** The body was read to its end, or given up: the request's bookkeeping can go. */
  done(): void;
}

/**
 * On an answer whose body the transport already read whole, off the event loop
 * (providers/fetch_workers.ts): the bytes, and whether the body ran past its declared length.
 * `sendHttp` takes them as they are, with the same length checks as a body it reads itself.
 */
export const TAKEN_BODY: unique symbol = Symbol("tierd.takenBody");

/** A body read whole by the transport ({@link TAKEN_BODY}). */
export interface TakenBody {
  bytes: Uint8Array;
  overlong: boolean;
}

/** The {@link BodyWatch} a fetch attached to `response`, if any. */
export function bodyWatchOf(response: Response): BodyWatch | undefined {
  return (response as Response & { [BODY_WATCH]?: BodyWatch })[BODY_WATCH];
}

/** One request, already signed: `url` is sent as given. */
export interface HttpRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** Sent with an explicit Content-Length. PUT and POST without a body send an empty one. */
  body?: Uint8Array;
  signal?: AbortSignal;
  /** Bounds the whole exchange, headers and body. @default 60000 */
  timeoutMs?: number;
}

/** A response with its whole body read. */
export interface HttpResponse {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

/** Where the request belongs, for error messages and `StoreError.detail`. */
export interface HttpContext {
  op: string;
  key?: string;
  /** Removes secrets from any text that goes into an error message. */
  redact?: (text: string) => string;
  /** Where the request timeout runs. @default systemClock */
  clock?: Clock;
}

const EMPTY = new Uint8Array(0);
const DEFAULT_TIMEOUT_MS = 60_000;

class RequestTimeout extends Error {
  override readonly name = "RequestTimeout";
}

/**
 * Sends one HTTP request and reads the whole response body.
 * @returns the status, headers and body; any status is returned, none is thrown
 * @throws {StoreError} `Transport` on connection failure, timeout, a reset mid-body or a body
 *   shorter (or longer) than its Content-Length
 * @throws the caller's `signal.reason` (an AbortError by default) when `signal` aborts
 */
export async function sendHttp(
  fetchFn: FetchFn,
  request: HttpRequest,
  context: HttpContext,
): Promise<HttpResponse> {
  const redact = context.redact ?? ((text: string) => text);
  const fail = (message: string, cause?: unknown, status?: number) => {
    const text = `${where(context.op, context.key)}: ${message}`;
    const clean = redact(text);
    // A cause whose text needed scrubbing would carry the secret along; drop it.
    const keepCause = cause !== undefined && clean === text;
    return new StoreError("Transport", clean, {
      op: context.op,
      key: context.key,
      status,
    }, keepCause ? { cause } : undefined);
  };

  const outer = request.signal;
  outer?.throwIfAborted();
  const controller = new AbortController();
  const timeoutMs = request.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // A deadline, not something to wait for: it never keeps the process alive.
  const cancelTimer = (context.clock ?? systemClock).setTimer(
    timeoutMs,
    () => controller.abort(new RequestTimeout(`timed out after ${timeoutMs} ms`)),
    { unref: true },
  );
  const onAbort = () => controller.abort(outer?.reason);
  outer?.addEventListener("abort", onAbort, { once: true });
  const rethrow = (err: unknown, during: string, status?: number): never => {
    if (outer?.aborted) throw outer.reason;
    const reason = controller.signal.reason;
    if (reason instanceof RequestTimeout) throw fail(`${reason.message} (${during})`, err, status);
    throw fail(`${during}: ${errorText(err)}`, err, status);
  };

  try {
    const headers: Record<string, string> = { "accept-encoding": "identity", ...request.headers };
    let body: Uint8Array | undefined = request.body;
    if (body === undefined && (request.method === "PUT" || request.method === "POST")) {
      body = EMPTY;
    }
    if (body !== undefined) headers["content-length"] = String(body.byteLength);

    let response: Response;
    try {
      response = await fetchFn(request.url, {
        method: request.method,
        headers,
        body: body as BodyInit | undefined,
        redirect: "manual",
        signal: controller.signal,
        [WATCHES_BODY]: true,
      } as RequestInit);
    } catch (err) {
      return rethrow(err, "request failed");
    }

    const status = response.status;
    const watch = bodyWatchOf(response);
    const taken = (response as Response & { [TAKEN_BODY]?: TakenBody })[TAKEN_BODY];
    if (
      request.method === "HEAD" || status === 204 || status === 304 ||
      (!response.body && !taken)
    ) {
      watch?.done();
      await response.body?.cancel().catch(() => {});
      return { status, headers: response.headers, body: EMPTY };
    }
    const expected = declaredLength(response.headers);
    const length = Number.isSafeInteger(expected) ? expected : undefined;
    let bytes: Uint8Array;
    let overlong = false;
    try {
      ({ bytes, overlong } = taken ? taken : watch
        // Under a stall deadline the pieces are counted as they come, each copied once into a
        // buffer of the declared size: in Bun a third less CPU than a deadline wrapper that
        // re-streams them for the runtime to gather (a store fetch is the cold read's main cost).
        ? await readBody(response.body!, length, watch)
        : length !== undefined && length <= WHOLE_BODY_MAX
        // Framed by its length, the body is taken whole by the runtime; truncation is still
        // caught below.
        ? whole(new Uint8Array(await response.arrayBuffer()), length)
        : await readBody(response.body!, length));
    } catch (err) {
      return rethrow(err, `connection lost while reading the ${status} response body`, status);
    } finally {
      watch?.done();
    }
    if (overlong) {
      throw fail(`overlong body: more than the ${expected} bytes declared`, undefined, status);
    }
    if (Number.isSafeInteger(expected) && expected !== bytes.byteLength) {
      throw fail(
        `truncated body: got ${bytes.byteLength} of ${expected} bytes`,
        undefined,
        status,
      );
    }
    return { status, headers: response.headers, body: bytes };
  } finally {
    cancelTimer();
    outer?.removeEventListener("abort", onAbort);
  }
}

/**
 * The body length `headers` declare, NaN when they declare none to trust (absent, or the length
 * of an encoded body).
 */
export function declaredLength(headers: Headers): number {
  const declared = headers.get("content-length");
  return declared !== null && !headers.has("content-encoding") ? Number(declared) : NaN;
}

/** A body taken whole, and whether it ran past its declared length (HTTP framing stops that). */
function whole(bytes: Uint8Array, expected: number): { bytes: Uint8Array; overlong: boolean } {
  return { bytes, overlong: bytes.length > expected };
}

/** Bodies of at most this many declared bytes are taken whole by the runtime (a chunk at most). */
const WHOLE_BODY_MAX = 64 * 1024 * 1024;

/**
 * Reads a response body whole. With its length declared, each piece is copied once into a
 * buffer of that size, not gathered and joined (an 8 MiB chunk fetch arrives in hundreds of
 * pieces); a body that runs past it stops being read there. Under `watch`, a silence of
 * `watch.stallMs` ends the request and the read throws the watch's error; one timer keeps it,
 * re-armed for what is left of the deadline when it finds pieces came meanwhile.
 *
 * @param expected the declared `content-length`, when it can be trusted
 * @param watch the body's stall deadline
 * @returns the bytes (fewer than `expected` when the body ended early), and whether it ran over
 * @throws the watch's error when the body went silent
 */
export async function readBody(
  body: ReadableStream<Uint8Array>,
  expected: number | undefined,
  watch?: BodyWatch,
): Promise<{ bytes: Uint8Array; overlong: boolean }> {
  const reader = body.getReader();
  let lastPiece = watch?.clock.monotonic() ?? 0;
  let stalled: Error | undefined;
  let cancelTimer: (() => void) | undefined;
  const check = () => {
    const silent = watch!.clock.monotonic() - lastPiece;
    if (silent < watch!.stallMs) {
      cancelTimer = watch!.clock.setTimer(watch!.stallMs - silent, check, { unref: true });
      return;
    }
    stalled = watch!.expire();
    // A pending read then ends as if the body had: `stalled` says why.
    reader.cancel(stalled).catch(() => {});
  };
  if (watch) cancelTimer = watch.clock.setTimer(watch.stallMs, check, { unref: true });
  const next = async () => {
    const piece = await reader.read();
    if (stalled) throw stalled;
    if (watch) lastPiece = watch.clock.monotonic();
    return piece;
  };
  try {
    if (expected === undefined) {
      const pieces: Uint8Array[] = [];
      for (;;) {
        const { done, value } = await next();
        if (done) return { bytes: concatBytes(pieces), overlong: false };
        pieces.push(value);
      }
    }
    const out = new Uint8Array(expected);
    let at = 0;
    for (;;) {
      const { done, value } = await next();
      if (done) return { bytes: at === expected ? out : out.subarray(0, at), overlong: false };
      if (at + value.length > expected) {
        await reader.cancel().catch(() => {});
        return { bytes: out, overlong: true };
      }
      out.set(value, at);
      at += value.length;
    }
  } catch (err) {
    throw stalled ?? err;
  } finally {
    cancelTimer?.();
  }
}

/** The total size from `Content-Range: bytes a-b/total`, undefined when absent or `*`. */
export function totalFromContentRange(value: string | null): number | undefined {
  const match = value && /^bytes\s+(?:\d+-\d+|\*)\/(\d+)$/.exec(value.trim());
  return match ? Number(match[1]) : undefined;
}

/** True for a 2xx status: the answer a request was sent for. */
export function isOk(status: number): boolean {
  return status >= 200 && status < 300;
}

/** Bun's advice to its developers, appended to some fetch errors; nothing an operator can do. */
const RUNTIME_HINT =
  /\s*For more information, pass `verbose: true` in the second argument to fetch\(\)\.?/g;

/** `text` without the runtime's advice to its developers (see {@link errorText}). */
export function withoutRuntimeHint(text: string): string {
  return text.replace(RUNTIME_HINT, "");
}

/** A one-line description of a thrown value, following `cause` chains (fetch nests the OS error). */
export function errorText(err: unknown): string {
  const parts: string[] = [];
  let current: unknown = err;
  for (let depth = 0; current !== undefined && current !== null && depth < 4; depth++) {
    if (current instanceof Error) {
      const message = withoutRuntimeHint(current.message);
      if (message && !parts.includes(message)) parts.push(message);
      current = current.cause;
    } else {
      parts.push(String(current));
      break;
    }
  }
  return parts.join(": ") || "unknown error";
}
