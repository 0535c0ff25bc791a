// The status a binary-front client gets when a poll tierd answers fails (Iggy's error codes,
// core/common/src/error/iggy_error.rs). A read that may succeed later (the store slow or down,
// the read memory full, a partition being rebuilt, names that changed meaning mid-poll) is, at
// 0.9, `TransientNotAccepted` (58), which the 0.9 SDK replays on the same connection every 50 ms
// for up to 30 s (core/sdk/src/tcp/tcp_client.rs); 0.8 has no such code, and its reconnecting
// codes would cost a consumer-group member its membership, so it gets `TaskTimeout` (12001),
// which the SDKs' consumers report and poll again after. Anything else (damaged or lost data, a
// fault of tierd's) is the generic `Error` (1). The client's connection stays open either way,
// and nothing is forwarded to the broker as if tierd had judged the poll.
import { PollNotJudged } from "../iggy_front/plan.ts";
import { isRetryable } from "../read/retryable.ts";
import type { BrokerVersion } from "./poll.ts";
import { IGGY_ERROR } from "./wire.ts";

/** Iggy's `TaskTimeout`: a 0.8 client's "failed now, poll again". */
export const STATUS_TRANSIENT_08 = 12001;

/** True when a poll that failed with `err` may succeed if asked again. */
export function isTransient(err: unknown): boolean {
  return isRetryable(err) || err instanceof PollNotJudged;
}

/** The status to answer a failed poll with, for a broker of `version`. */
export function statusOf(err: unknown, version: BrokerVersion): number {
  if (!isTransient(err)) return IGGY_ERROR.ERROR;
  return version === "iggy-0.9" ? IGGY_ERROR.TRANSIENT_NOT_ACCEPTED : STATUS_TRANSIENT_08;
}
