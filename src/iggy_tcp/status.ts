// The status a binary-front client gets when a poll tierd answers fails (Iggy 0.8.0 and 0.9
// core/common/src/error/iggy_error.rs): a read that may succeed later (the store slow or down,
// the read memory full, a partition being rebuilt, names that changed meaning mid-poll) is
// `TaskTimeout` (12001), which the SDKs' consumers report and poll again after; anything else
// (damaged or lost data, a fault of tierd's) is the generic `Error` (1). Either way the client's
// connection stays open, and nothing is forwarded to the broker as if tierd had judged the poll.
import { PollNotJudged } from "../iggy_front/plan.ts";
import { CacheFull, FetchTimeout, PartitionRebuilding, StoreUnavailable } from "../read/errors.ts";
import { ReadBudgetExceeded } from "../read/read_budget.ts";

/** Iggy's `TaskTimeout`: a transient failure; poll again. */
export const STATUS_TRANSIENT = 12001;
/** Iggy's generic `Error`. */
export const STATUS_ERROR = 1;

/** True when a poll that failed with `err` may succeed if asked again. */
export function isTransient(err: unknown): boolean {
  return err instanceof StoreUnavailable || err instanceof FetchTimeout ||
    err instanceof CacheFull || err instanceof ReadBudgetExceeded ||
    err instanceof PartitionRebuilding || err instanceof PollNotJudged;
}

/** The status to answer a failed poll with. */
export function statusOf(err: unknown): number {
  return isTransient(err) ? STATUS_TRANSIENT : STATUS_ERROR;
}
