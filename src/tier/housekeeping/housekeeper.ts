// Runs the housekeeping jobs — manifests, the verify pass, the orphan sweep, the multipart sweep —
// each on its own cadence, when the agent is idle (fewer than `idle_threshold_rps` store
// requests per second for `idle_timeout`) and in any case at least once per `interval`. One run
// spends at most `request_quota` requests; what is left waits for the next run. Runs never
// overlap a tier pass (the worker serializes them). State survives restarts.
import type { RequestMeter } from "../../../providers/request_meter.ts";
import type { RetryingStore } from "../../../providers/retrying_store.ts";
import type { Config } from "../../config/schema.ts";
import type { Logger } from "../../log.ts";
import type { TierObserver } from "../observer.ts";
import type { KeySpaceOwner } from "../../layout/key_space.ts";
import type { KeySpace } from "../partition_ledger.ts";
import type { JobEnv, JobOutcome, Tended } from "./job.ts";
import { manifestsDue, uploadManifests } from "./manifest_upload.ts";
import { multipartSweepDue, sweepMultipart } from "./multipart_sweep.ts";
import { orphanSweepDue, sweepOrphans } from "./orphan_sweep.ts";
import { RequestQuota } from "./quota.ts";
import { type HousekeepingState, loadHousekeepingState, saveHousekeepingState } from "./state.ts";
import { verifyCopies, verifyDue } from "./verify.ts";
import type { Clock } from "../../base/clock.ts";

/** What the status page shows of housekeeping. */
export interface HousekeepingStatus {
  lastRun?: number;
  /** The last run's jobs. */
  lastJobs: JobOutcome[];
  requestsUsed: number;
  verifyInProgress: boolean;
  lastVerifyCompleted?: number;
  /** Evicted segments whose only copy was found missing or damaged. */
  unrepairable: number;
}

/** Options of {@linkcode Housekeeper}. */
export interface HousekeeperOptions {
  config: Config;
  store: RetryingStore;
  clock: Clock;
  logger: Logger;
  observer?: TierObserver;
  keySpace: KeySpace;
  /** This agent as the key space's owner (named in manifests and tombstones). */
  owner?: KeySpaceOwner;
  /** The partitions to tend (the tier worker's open ones). */
  targets: () => readonly Tended[];
  /** Store traffic other than housekeeping's own; absent: never idle, runs once per interval. */
  meter?: RequestMeter;
}

const JOBS = [
  { due: manifestsDue, run: uploadManifests },
  { due: verifyDue, run: verifyCopies },
  { due: orphanSweepDue, run: sweepOrphans },
  { due: multipartSweepDue, run: sweepMultipart },
] as const;

/** Schedules and runs housekeeping. */
export class Housekeeper {
  readonly #o: HousekeeperOptions;
  #state?: HousekeepingState;
  #last: JobOutcome[] = [];
  #used = 0;

  constructor(options: HousekeeperOptions) {
    this.#o = options;
  }

  /** True when the agent has been idle for `idle_timeout`. */
  idle(): boolean {
    const hk = this.#o.config.tiered_storage.housekeeping;
    if (!this.#o.meter) return false;
    return this.#o.meter.rate(hk.idle_timeout) < hk.idle_threshold_rps;
  }

  /**
   * Runs the due jobs when the agent is idle, or when `interval` has passed since the last run,
   * or always with `force` (`run --once`).
   * @returns what the jobs did, or undefined when no run was due
   */
  async maybeRun(options: { force?: boolean } = {}): Promise<JobOutcome[] | undefined> {
    const state = await this.#loadState();
    const now = this.#o.clock.now();
    const hk = this.#o.config.tiered_storage.housekeeping;
    const overdue = state.lastRun === undefined || now - state.lastRun >= hk.interval;
    if (!options.force && !overdue && !this.idle()) return undefined;
    const env = this.#env(state);
    const due = JOBS.filter((j) => j.due(env, now));
    if (due.length === 0 && !overdue && !options.force) return undefined;
    return await this.#run(state, due.map((j) => j.run));
  }

  async #run(
    state: HousekeepingState,
    jobs: ((env: JobEnv) => Promise<JobOutcome>)[],
  ): Promise<JobOutcome[]> {
    const hk = this.#o.config.tiered_storage.housekeeping;
    const quota = new RequestQuota(hk.request_quota);
    const deadline = this.#o.store.deadline(hk.interval);
    const outcomes: JobOutcome[] = [];
    try {
      const store = quota.wrap(this.#o.store.within(deadline, "housekeeping"));
      for (const job of jobs) {
        if (quota.spent || this.#o.store.root.expired()) break;
        outcomes.push(await job({ ...this.#env(state), store }));
      }
    } finally {
      deadline.dispose();
      state.lastRun = this.#o.clock.now();
      await saveHousekeepingState(this.#o.config.agent.state_dir, state);
    }
    this.#last = outcomes;
    this.#used = quota.used;
    const busy = outcomes.some((o) =>
      o.problems.length > 0 || !o.complete || Object.values(o.counts).some((n) => n > 0)
    );
    const line = {
      requests: quota.used,
      quota: hk.request_quota,
      jobs: Object.fromEntries(outcomes.map((o) => [o.job, { ...o.counts, done: o.complete }])),
    };
    if (busy) this.#o.logger.info("housekeeping run finished", line);
    else this.#o.logger.debug("housekeeping run finished", line);
    return outcomes;
  }

  /** The status page's view. */
  status(): HousekeepingStatus {
    const s = this.#state;
    return {
      lastRun: s?.lastRun,
      lastJobs: this.#last,
      requestsUsed: this.#used,
      verifyInProgress: s ? Object.keys(s.verify.cursor).length > 0 : false,
      lastVerifyCompleted: s?.verify.lastCompleted,
      unrepairable: s?.verify.reported.length ?? 0,
    };
  }

  async #loadState(): Promise<HousekeepingState> {
    this.#state ??= await loadHousekeepingState(this.#o.config.agent.state_dir);
    return this.#state;
  }

  #env(state: HousekeepingState): Omit<JobEnv, "store"> {
    const o = this.#o;
    return {
      config: o.config,
      clock: o.clock,
      log: o.logger,
      observer: o.observer ?? {},
      keySpace: o.keySpace,
      owner: o.owner,
      targets: o.targets().filter((t) => t.ledger.state.incarnation !== undefined),
      state,
    };
  }
}
