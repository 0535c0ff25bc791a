// What a housekeeping job is given: the partitions it tends (their ledgers), a store view that
// counts against the run's request quota, the persisted state, and the agent's services.
import type { Clock } from "../../base/clock.ts";
import type { ObjectStore } from "../../../providers/types.ts";
import type { Config } from "../../config/schema.ts";
import type { FormatName } from "../../format/types.ts";
import type { Logger } from "../../log.ts";
import type { TierObserver } from "../observer.ts";
import type { KeySpaceOwner } from "../../layout/key_space.ts";
import type { KeySpace, PartitionLedger } from "../partition_ledger.ts";
import type { Problem } from "../problem.ts";
import type { HousekeepingState } from "./state.ts";

/** A partition housekeeping looks after. */
export interface Tended {
  readonly ledger: PartitionLedger;
  readonly format: FormatName | undefined;
  /** The broker's partition directory. */
  readonly dir: string;
}

/** Everything a job works with. */
export interface JobEnv {
  config: Config;
  /** Retries and deadlines included; every call counts against the run's quota. */
  store: ObjectStore;
  clock: Clock;
  log: Logger;
  observer: TierObserver;
  keySpace: KeySpace;
  /** This agent as the key space's owner (absent in unit tests). */
  owner?: KeySpaceOwner;
  targets: readonly Tended[];
  state: HousekeepingState;
}

/** What a job did, for the log line and the status page. */
export interface JobOutcome {
  job: string;
  /** False when the quota ran out (or a failure stopped it) before the job was done. */
  complete: boolean;
  /** Counters by name (`checked`, `missing`, `deleted`, …). */
  counts: Record<string, number>;
  /** Its failures (kind `housekeeping`), the quota running out not among them. */
  problems: Problem[];
}
