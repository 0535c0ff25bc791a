// How the read path waits for the store (private to src/read): at most `fetch_timeout` per read,
// without cancelling the fetch, and with store failures turned into typed read errors.
import { type Clock, withTimeout } from "../base/clock.ts";
import { confirmAbsent } from "../../providers/absence.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import { CacheFullError, CacheTimeoutError } from "../cache/types.ts";
import { FormatError } from "../format/errors.ts";
import {
  CacheFull,
  FetchTimeout,
  ReadError,
  RemoteObjectMissing,
  SegmentCorrupt,
  StoreFailed,
  StoreUnavailable,
} from "./errors.ts";

/** When a read stops waiting for the store (a time on `clock.monotonic()`). */
export interface ReadDeadline {
  at: number;
  timeoutMs: number;
  clock: Clock;
}

/** A deadline `timeoutMs` from now on `clock`. */
export function deadlineIn(timeoutMs: number, clock: Clock): ReadDeadline {
  return { at: clock.monotonic() + timeoutMs, timeoutMs, clock };
}

/**
 * Waits for `pending` until the deadline, then throws {@link FetchTimeout} — leaving `pending`
 * running, so a fetch that completes later still fills the cache for the retry.
 */
export function within<T>(pending: Promise<T>, deadline: ReadDeadline, key: string): Promise<T> {
  const { clock } = deadline;
  return withTimeout(
    pending,
    deadline.at - clock.monotonic(),
    () => new FetchTimeout(key, deadline.timeoutMs),
    { clock },
  );
}

/** Seconds a client should wait before retrying a throttled or unreachable store. */
const RETRY_AFTER_THROTTLED = 2;
const RETRY_AFTER_TRANSPORT = 1;

/** Seconds a client should wait when the cache is full: trimming runs at least this often. */
const RETRY_AFTER_CACHE_FULL = 1;

/**
 * Turns whatever a store or RangeReader (the chunk cache) threw while reading `key` into a
 * typed read error. Other errors pass through.
 */
export function readFailure(err: unknown, key: string, segment?: bigint): unknown {
  if (err instanceof ReadError) return err;
  if (err instanceof CacheTimeoutError) return new FetchTimeout(key, err.timeoutMs);
  if (err instanceof CacheFullError) return new CacheFull(key, RETRY_AFTER_CACHE_FULL, err);
  if (err instanceof StoreError) {
    switch (err.kind) {
      case "NotFound":
        return new RemoteObjectMissing(key, segment, { cause: err });
      case "Throttled":
        return new StoreUnavailable(key, RETRY_AFTER_THROTTLED, err);
      case "Transport":
        return new StoreUnavailable(key, RETRY_AFTER_TRANSPORT, err);
      default:
        return new StoreFailed(key, err);
    }
  }
  if (err instanceof FormatError) return new SegmentCorrupt("remote", key, err);
  return err;
}

/**
 * Confirms a missing object before the read calls it data loss: one `NotFound` may be the store
 * wavering. Gone for real (a HEAD, then a listing agree) gives the error back; found after all
 * gives "present" (read it again); a store fault while asking gives a `StoreUnavailable` (retry).
 */
export async function confirmMissing(
  store: ObjectStore,
  err: RemoteObjectMissing,
  deadline: ReadDeadline,
): Promise<RemoteObjectMissing | StoreUnavailable | "present"> {
  try {
    const gone = await within(confirmAbsent(store, err.key), deadline, err.key);
    return gone ? err : "present";
  } catch (cause) {
    if (cause instanceof StoreError && cause.kind === "Throttled") {
      return new StoreUnavailable(err.key, RETRY_AFTER_THROTTLED, cause);
    }
    return new StoreUnavailable(err.key, RETRY_AFTER_TRANSPORT, cause as Error);
  }
}
