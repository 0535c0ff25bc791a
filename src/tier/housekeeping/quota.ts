// A housekeeping run spends at most `request_quota` store requests: every job's store calls go
// through one counting view, and the call after the last allowed one fails with
// `QuotaExhausted` (not a store fault, so it is never retried) — the job stops where it is and
// the next run goes on from there.
import { decorateStore } from "../../../providers/decorate.ts";
import type { ObjectStore } from "../../../providers/types.ts";

/** The run's request quota is spent; the job stops and resumes next run. */
export class QuotaExhausted extends Error {
  override readonly name = "QuotaExhausted";
  constructor(readonly quota: number) {
    super(`housekeeping request quota of ${quota} spent; the rest waits for the next run`);
  }
}

/** Counts the requests of one housekeeping run against its quota. */
export class RequestQuota {
  #used = 0;
  constructor(readonly limit: number) {}

  /** Requests sent so far. */
  get used(): number {
    return this.#used;
  }

  /** True once the quota is spent. */
  get spent(): boolean {
    return this.#used >= this.limit;
  }

  /** A view of `store` whose every request counts; refused once the quota is spent. */
  wrap(store: ObjectStore): ObjectStore {
    return decorateStore(store, (call) => {
      if (this.#used >= this.limit) return Promise.reject(new QuotaExhausted(this.limit));
      this.#used++;
      return call.run(call.signal);
    });
  }
}
