// The one error type of the HTTP API: an HTTP status plus a stable code, rendered by `onError`
// as `{ "error": code, "message": text }`. Read-path errors map onto it here.
import {
  OffsetBelowRetention,
  OffsetInGap,
  OffsetPastEnd,
  ReadError,
  SegmentCorrupt,
} from "../read/errors.ts";
import { ParamError } from "../read/params.ts";
import { isRetryable } from "../read/retryable.ts";

/** Statuses the API answers errors with. */
export type ApiErrorStatus = 400 | 401 | 403 | 404 | 410 | 416 | 500 | 502 | 503;

/** An API failure: status, machine-readable code, human message and extra response headers. */
export class ApiError extends Error {
  override readonly name = "ApiError";

  /**
   * @param status the HTTP status
   * @param code a stable snake_case code (the `error` field)
   * @param message a sentence naming what is wrong (the `message` field)
   * @param headers extra response headers (`Retry-After`, `WWW-Authenticate`)
   */
  constructor(
    readonly status: ApiErrorStatus,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/**
 * The API error for anything a handler threw:
 *
 * | error | status | code |
 * | --- | --- | --- |
 * | ParamError | 400 | bad_parameter |
 * | UnknownPartition | 404 | unknown_partition |
 * | OffsetPastEnd | 404 | offset_past_end |
 * | OffsetBelowRetention | 416 | offset_below_retention |
 * | OffsetInGap | 410 + x-tierd-gap | offset_gap |
 * | RemoteObjectMissing | 500 | remote_object_missing |
 * | SegmentCorrupt (local) | 500 | local_data_corrupt |
 * | SegmentCorrupt (remote) | 502 | remote_data_corrupt |
 * | StoreFailed | 502 | store_failed |
 * | StoreUnavailable, FetchTimeout, CacheFull, ReadBudgetExceeded, PartitionRebuilding | 503 + Retry-After | store_unavailable, fetch_timeout, cache_full, read_budget_exceeded, partition_rebuilding |
 * | anything else | 500 | internal |
 */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ParamError) return new ApiError(400, "bad_parameter", err.message);
  if (err instanceof ReadError) {
    const retry = isRetryable(err);
    const status: ApiErrorStatus = err instanceof OffsetBelowRetention
      ? 416
      : err instanceof OffsetInGap
      ? 410
      : err instanceof OffsetPastEnd || err.code === "unknown_partition"
      ? 404
      : retry
      ? 503
      : err.code === "store_failed" || (err instanceof SegmentCorrupt && err.where === "remote")
      ? 502
      : 500;
    const headers: Record<string, string> = {};
    if (retry) headers["retry-after"] = String(Math.max(1, Math.ceil(err.retryAfterSeconds)));
    if (err instanceof OffsetInGap) {
      headers["x-tierd-gap"] = `${err.gap.from}-${err.gap.to ?? ""}`;
    }
    return new ApiError(status, err.code, err.message, headers);
  }
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return new ApiError(500, "internal", message);
}
