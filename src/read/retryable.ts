// Which read failures are worth asking again, and after how long: the store slow, down or
// throttling, the chunk cache or the read memory full, the partition's state being opened or
// rebuilt. Every front answers these as "try again" (HTTP 503 + Retry-After, Iggy's transient
// statuses) and never as data that is not there.
import {
  CacheFull,
  FetchTimeout,
  PartitionRebuilding,
  type ReadError,
  StoreUnavailable,
} from "./errors.ts";
import { ReadBudgetExceeded } from "./read_budget.ts";

/** A read failure that may succeed if asked again. */
export type RetryableReadError =
  | StoreUnavailable
  | FetchTimeout
  | CacheFull
  | ReadBudgetExceeded
  | PartitionRebuilding;

/** True when `err` is a read failure worth asking again after `err.retryAfterSeconds`. */
export function isRetryable(err: unknown): err is RetryableReadError & ReadError {
  return err instanceof StoreUnavailable || err instanceof FetchTimeout ||
    err instanceof CacheFull || err instanceof ReadBudgetExceeded ||
    err instanceof PartitionRebuilding;
}
