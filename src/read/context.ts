// Everything the read path needs from the running agent (or the CLI): config, store, the
// RangeReader remote bytes come through, the journal state source and the index LRU.
import { type Clock, systemClock } from "../base/clock.ts";
import type { ObjectStore } from "../../providers/types.ts";
import type { RangeReader } from "../cache/types.ts";
import type { Config } from "../config/schema.ts";
import type { FormatName } from "../format/types.ts";
import { type Logger, silentLogger } from "../log.ts";
import type { TierdMetrics } from "../metrics/tierd.ts";
import { DirectRangeReader } from "./direct_reader.ts";
import { IndexCache } from "./index_cache.ts";
import { LocalListings } from "./local_listing.ts";
import type { PartitionBirths } from "./partition_births.ts";
import { JournalStateReader, type PartitionStateSource } from "./state_source.ts";
import type { ReadBudget } from "./read_budget.ts";
import { VerifiedLogs } from "./verified_logs.ts";

/** The read path's dependencies; build one with {@link createReadContext}. */
export interface ReadContext {
  readonly config: Config;
  /** The store (for `.index` objects and format metadata; `.log` bytes go through `reader`). */
  readonly store: ObjectStore;
  /** Key prefix of the configured backend. */
  readonly prefix: string;
  /** Serves `.log` byte ranges: the chunk cache, or a {@link DirectRangeReader}. */
  readonly reader: RangeReader;
  readonly states: PartitionStateSource;
  readonly indexes: IndexCache;
  /** Listings of the broker's partition directories, reused while they are unchanged. */
  readonly listings: LocalListings;
  /** Detected formats by partition directory identity (a partition never changes format). */
  readonly formats: Map<string, FormatName>;
  /** Byte ranges of sealed local segments already verified, by file identity. */
  readonly verifiedLogs: VerifiedLogs;
  readonly metrics?: TierdMetrics;
  readonly logger: Logger;
  /** How long a read waits for the store before answering "retry later". */
  readonly fetchTimeoutMs: number;
  /** Bytes reads may hold in memory at once, node-wide (the HTTP API reserves from it). */
  readonly budget?: ReadBudget;
  /** Time: segment quiescence, read deadlines, fetch durations. */
  readonly clock: Clock;
  /**
   * The broker's births of partitions, checked after its metadata changed (`tierd run` with
   * `[agent.broker] http_url`); none: the directory and the journal alone decide.
   */
  readonly births?: PartitionBirths;
}

/** Options of {@link createReadContext}; everything but config, store and prefix has a default. */
export interface ReadContextOptions {
  config: Config;
  store: ObjectStore;
  prefix: string;
  /** @default a DirectRangeReader over `store` */
  reader?: RangeReader;
  /** @default a JournalStateReader over `agent.state_dir` */
  states?: PartitionStateSource;
  /** @default a 64 MiB IndexCache */
  indexes?: IndexCache;
  metrics?: TierdMetrics;
  /** @default silentLogger */
  logger?: Logger;
  /** @default config.tiered_storage.fetch_timeout */
  fetchTimeoutMs?: number;
  /** The node-wide read memory budget; none: reads are not limited. */
  budget?: ReadBudget;
  /** @default systemClock */
  clock?: Clock;
  births?: PartitionBirths;
}

/** Builds a {@link ReadContext}, filling in defaults. */
export function createReadContext(o: ReadContextOptions): ReadContext {
  return {
    config: o.config,
    store: o.store,
    prefix: o.prefix,
    reader: o.reader ?? new DirectRangeReader(o.store, { metrics: o.metrics, clock: o.clock }),
    states: o.states ?? new JournalStateReader(o.config.agent.state_dir),
    indexes: o.indexes ?? new IndexCache(),
    listings: new LocalListings(o.clock ?? systemClock),
    formats: new Map(),
    verifiedLogs: new VerifiedLogs(),
    metrics: o.metrics,
    logger: o.logger ?? silentLogger,
    fetchTimeoutMs: o.fetchTimeoutMs ?? o.config.tiered_storage.fetch_timeout,
    budget: o.budget,
    clock: o.clock ?? systemClock,
    births: o.births,
  };
}
