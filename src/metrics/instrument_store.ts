// A decorator that counts every object store request by operation and outcome, so the store's
// health shows in `tierd_store_requests_total` whatever layer issued the request.
import { type Clock, systemClock } from "../base/clock.ts";
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

/** Each operation and the outcomes it can succeed with. */
const SUCCESS: Record<StoreOp, readonly string[]> = {
  put: ["ok", "already_exists"],
  get: ["ok"],
  head: ["ok"],
  delete: ["ok", "partial"],
  list: ["ok"],
  create_multipart: ["ok"],
  put_part: ["ok"],
  complete_multipart: ["ok", "already_exists"],
  abort_multipart: ["ok"],
  list_multipart_uploads: ["ok"],
};

/** Every operation counted. */
export const STORE_OPS = Object.keys(SUCCESS) as StoreOp[];

/** Every `outcome` a request of `op` can be counted with. */
export function storeOutcomes(op: StoreOp): string[] {
  return [...SUCCESS[op], ...Object.values(SNAKE), "aborted", "error"];
}

/** Store requests answered with throttling since start, every operation summed. */
export function throttledTotal(metrics: TierdMetrics): number {
  return (Object.keys(SUCCESS) as StoreOp[]).reduce(
    (n, op) => n + metrics.storeThrottled.value({ op }),
    0,
  );
}

/**
 * Creates at 0 every `tierd_store_requests_total{op,outcome}`, `tierd_store_throttled_total{op}`
 * and `tierd_store_request_duration_seconds{op}` series, so each shows before its first request.
 */
export function initStoreSeries(metrics: TierdMetrics): void {
  for (const op of Object.keys(SUCCESS) as StoreOp[]) {
    for (const outcome of storeOutcomes(op)) metrics.storeRequests.init({ op, outcome });
    metrics.storeThrottled.init({ op });
    metrics.storeRequestDuration.init({ op });
  }
}

/**
 * Wraps `store` so every call counts `tierd_store_requests_total{op,outcome}` (outcome `ok`,
 * `already_exists` for a refused conditional create, `partial` for a batch delete with failed
 * keys, or the error kind such as `not_found`), `tierd_store_throttled_total{op}` for throttled
 * answers, and observes `tierd_store_request_duration_seconds{op}`. Results and errors pass
 * through unchanged. Every known series starts at 0 ({@link initStoreSeries}).
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
  initStoreSeries(metrics);
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
