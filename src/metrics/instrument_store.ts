// A decorator that counts every object store request by operation and outcome, so the store's
// health shows in `tierd_store_requests_total` whatever layer issued the request.
import { type Clock, systemClock } from "../../providers/clock.ts";
import { decorateStore, type StoreOp } from "../../providers/decorate.ts";
import {
  type DeleteFailure,
  type ObjectStore,
  type PutResult,
  StoreError,
  type StoreErrorKind,
} from "../../providers/types.ts";
import type { TierdMetrics } from "./tierd.ts";

/** The `outcome` label of a failed request: the error kind in snake case, or `aborted`/`error`. */
export function outcomeOf(err: unknown): string {
  if (err instanceof StoreError) return SNAKE[err.kind];
  if (err instanceof DOMException && (err.name === "AbortError" || err.name === "TimeoutError")) {
    return "aborted";
  }
  return "error";
}

const SNAKE: Record<StoreErrorKind, string> = {
  NotFound: "not_found",
  PreconditionFailed: "precondition_failed",
  InvalidRange: "invalid_range",
  Throttled: "throttled",
  Transport: "transport",
  Auth: "auth",
  Malformed: "malformed",
  Unsupported: "unsupported",
};

/**
 * Wraps `store` so every call counts `tierd_store_requests_total{op,outcome}` (outcome `ok`,
 * `already_exists` for a refused conditional create, `partial` for a batch delete with failed
 * keys, or the error kind such as `not_found`), `tierd_store_throttled_total{op}` for throttled
 * answers, and observes `tierd_store_request_duration_seconds{op}`. Results and errors pass
 * through unchanged.
 *
 * @param store the store to observe
 * @param metrics where to count
 * @param options.clock times the requests @default systemClock
 * @returns a store with the same behaviour and `kind`
 */
export function instrumentStore(
  store: ObjectStore,
  metrics: TierdMetrics,
  options: { clock?: Clock } = {},
): ObjectStore {
  const clock = options.clock ?? systemClock;
  return decorateStore(store, async (call) => {
    const { op } = call;
    const started = clock.monotonic();
    try {
      const result = await call.run(call.signal);
      metrics.storeRequests.inc({ op, outcome: successOutcome(op, result) });
      return result;
    } catch (err) {
      const o = outcomeOf(err);
      metrics.storeRequests.inc({ op, outcome: o });
      if (o === "throttled") metrics.storeThrottled.inc({ op });
      throw err;
    } finally {
      metrics.storeRequestDuration.observe({ op }, (clock.monotonic() - started) / 1000);
    }
  });
}

function successOutcome(op: StoreOp, result: unknown): string {
  if (op === "put" || op === "complete_multipart") {
    return (result as PutResult).status === "AlreadyExists" ? "already_exists" : "ok";
  }
  if (op === "delete") return (result as DeleteFailure[]).length === 0 ? "ok" : "partial";
  return "ok";
}
