// Failures of the Iggy-compatible listener, answered the way the broker answers: a refusal of
// the broker's (401 for an unknown or expired token, 403, 404 …) is passed on as it came —
// status, headers and body; tierd's own failures use the broker's error body
// (`ErrorResponse {id, code, reason, field}`, core/server/src/http/error.rs in 0.8.0 and 0.9,
// `error_response` there sets `id` to the HTTP status), with `Retry-After` on a 503 so the SDKs'
// retry of transient errors applies.
import { ReadError } from "../read/errors.ts";
import { isRetryable } from "../read/retryable.ts";
import { PollNotJudged } from "../iggy_front/plan.ts";

/** The broker refused a call tierd made with the client's token; its answer goes back as is. */
export class BrokerRefused extends Error {
  override readonly name = "BrokerRefused";
  /**
   * @param status the broker's status
   * @param headers the broker's response headers (hop-by-hop ones already dropped)
   * @param body the broker's body
   */
  constructor(
    readonly status: number,
    readonly headers: Headers,
    readonly body: Uint8Array<ArrayBuffer>,
    what: string,
  ) {
    super(`the broker answered ${what} with HTTP ${status}`);
  }
}

/** tierd cannot answer: rendered in the broker's error shape. */
export class IggyHttpError extends Error {
  override readonly name = "IggyHttpError";
  /**
   * @param status HTTP status
   * @param code snake_case code (the body's `code`)
   * @param reason a sentence (the body's `reason`)
   * @param headers extra headers (`retry-after`)
   */
  constructor(
    readonly status: number,
    readonly code: string,
    readonly reason: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(reason);
  }
}

/**
 * The listener's answer for an error thrown while serving a poll.
 *
 * | error | status |
 * | --- | --- |
 * | BrokerRefused | the broker's, with its body |
 * | IggyHttpError | its own |
 * | StoreUnavailable, FetchTimeout, CacheFull, ReadBudgetExceeded, PartitionRebuilding, PollNotJudged | 503 + Retry-After |
 * | any other ReadError (data loss, corrupt bytes) | 500 |
 * | anything else | 500 `internal` |
 */
export function errorResponse(err: unknown): Response {
  if (err instanceof BrokerRefused) {
    const nullBody = err.status === 204 || err.status === 304;
    return new Response(nullBody ? null : err.body, { status: err.status, headers: err.headers });
  }
  const e = toIggyHttpError(err);
  const body = JSON.stringify({ id: e.status, code: e.code, reason: e.reason, field: null });
  return new Response(body, {
    status: e.status,
    headers: { "content-type": "application/json", ...e.headers },
  });
}

/** The typed form of any failure. */
export function toIggyHttpError(err: unknown): IggyHttpError {
  if (err instanceof IggyHttpError) return err;
  if (err instanceof PollNotJudged) {
    return new IggyHttpError(503, "poll_not_judged", err.message, {
      "retry-after": String(err.retryAfterSeconds),
    });
  }
  if (err instanceof ReadError) {
    const retry = isRetryable(err)
      ? String(Math.max(1, Math.ceil(err.retryAfterSeconds)))
      : undefined;
    return retry
      ? new IggyHttpError(503, err.code, err.message, { "retry-after": retry })
      : new IggyHttpError(500, err.code, err.message);
  }
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return new IggyHttpError(500, "internal", message);
}
