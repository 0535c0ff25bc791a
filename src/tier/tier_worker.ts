// The tier worker: one pass over every tiered partition — discover, then per partition the
// phases of `PartitionTier.pass`. Partitions under local-storage pressure go first; the number
// running at once scales with the backlog, between 1 and `upload_concurrency`. Store calls of
// every partition share one retry policy under one root deadline, which `stop` cancels.
import { type Clock, systemClock } from "../base/clock.ts";
import type { OpClassPacer } from "../../providers/pacer.ts";
import type { RequestMeter } from "../../providers/request_meter.ts";
import { PartBufferPool } from "../../providers/part_pool.ts";
import { Deadline } from "../../providers/retry.ts";
import { RetryingStore } from "../../providers/retrying_store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import type { Config } from "../config/schema.ts";
import { tieredTopic } from "../config/topics.ts";
import { type PartitionId, partitionLabel, partitionsPerTopic } from "../layout/partition.ts";
import type { Logger } from "../log.ts";
import { type DiscoveredPartition, discoverPartitions } from "../partition/discover.ts";
import type { KeySpaceOwner } from "../layout/key_space.ts";
import type { ChosenDeletion } from "../state/delete_lag.ts";
import type { PartitionState } from "../state/segment_state.ts";
import { JournalStateReader, type PartitionHealth } from "../read/state_source.ts";
import type { BrokerClient } from "./broker_client.ts";
import type { BrokerWatch } from "./broker_presence.ts";
import type { EvictionBlock } from "./eviction_gate.ts";
import type { Evictor } from "./evictor.ts";
import { chooseEvictor, describeEviction } from "./eviction_route.ts";
import { partitionHealth } from "./partition_health.ts";
import type { TierObserver } from "./observer.ts";
import { emptyPassReport, type PartitionPassReport, PartitionTier } from "./partition_tier.ts";
import type { PhaseContext } from "./phase.ts";
import { describeProblem, type Problem, problemOf } from "./problem.ts";
import { TokenBucket } from "../cache/token_bucket.ts";
import type { DeleteBudget } from "./phases/retention.ts";
import { Housekeeper } from "./housekeeping/housekeeper.ts";
import { type CleanStopEntry, takeCleanStop, writeCleanStop } from "../state/clean_stop.ts";
import type { JobOutcome } from "./housekeeping/job.ts";

/** What a whole pass did, summed over partitions. */
export interface PassReport {
  partitions: PartitionPassReport[];
  copied: number;
  adopted: number;
  failed: number;
  cleaned: number;
  lost: number;
  evicted: number;
  remoteDeleted: number;
  pending: number;
  /** The partitions' problems, in their order. */
  problems: Problem[];
  /** Store faults kept work from finishing (uploads are stalled). */
  storeUnreachable: boolean;
}

/** A pass's report as `POST /v1/admin/pass` answers it: each problem also in words. */
export interface PassAnswer extends PassReport {
  partitions: (PartitionPassReport & { errors: string[] })[];
  /** The problems as the logs and the status page word them. */
  errors: string[];
}

/** The last finished pass: its report and when it ran (ms since the epoch). */
export interface PassRecord {
  report: PassReport;
  startedAt: number;
  finishedAt: number;
}

/** Everything the tier worker needs from the outside. */
export interface TierEnv {
  config: Config;
  /** The store as configured (metrics may wrap it); the worker adds retries. */
  store: ObjectStore;
  /** Key prefix of the configured backend. */
  prefix: string;
  logger: Logger;
  /** @default systemClock */
  clock?: Clock;
  /** Cancel it to stop: in-flight store calls are aborted, no new work starts. @default never */
  root?: Deadline;
  observer?: TierObserver;
  /** Used when `evict_via` resolves to `broker`. @default a client of `[agent.broker]` */
  broker?: BrokerClient;
  /**
   * Whether a broker runs beside the data directory, for `evict_via = "auto"` without
   * `[agent.broker]`. @default a {@link BrokerPresence} of `agent.data_dir` on the clock
   */
  brokerWatch?: BrokerWatch;
  /** Retry randomness (tests pass a seeded one). @default Math.random */
  rng?: () => number;
  /** Multipart part buffers shared by all partitions. @default part_size × (concurrency + 1) */
  partPool?: PartBufferPool;
  /** Spaces out an operation class after the store throttled it (shared by all partitions). */
  pacer?: OpClassPacer;
  /** Counts the agent's other store traffic, so housekeeping waits until it is idle. */
  meter?: RequestMeter;
  /** This agent as the key space's owner (manifests, tombstones, which manifests are ours). */
  owner?: KeySpaceOwner;
  /** The store in words, for errors. @default `${store.kind} store` */
  describe?: string;
}

/**
 * How long reads of a partition whose directory went away answer "retry" (a topic being
 * recreated comes back within it); after it, the partition is unknown (its topic was deleted).
 */
const VANISHED_PENDING_MS = 30_000;

/** Keeps one {@link PartitionTier} per partition directory across passes. */
export class TierWorker {
  readonly #config: Config;
  readonly #logger: Logger;
  readonly #shared: Omit<PhaseContext, "log">;
  readonly #prefix: string;
  readonly #evictor: Evictor;
  readonly #partitions = new Map<string, PartitionTier>();
  /** Partitions whose state could not be opened in the last pass, and why. */
  readonly #failedOpen = new Map<string, string>();
  /** Partitions found but not opened yet (journal replay, rebuild from the bucket), by label. */
  readonly #opening = new Map<string, string>();
  /** Every partition found at start was opened (or failed to) once. */
  #started = false;
  /** Partitions whose directory went away while open (ms since the epoch, by label). */
  readonly #vanished = new Map<string, number>();
  /** Journals of partitions not open here (no broker directory), read-only. */
  readonly #journals: JournalStateReader;
  /** Background jobs (manifests, verify pass, sweeps), run between passes. */
  readonly housekeeper: Housekeeper;
  #running?: Promise<PassReport>;
  /** The eviction route was said (at the first pass). */
  #announced = false;
  #lastPass?: PassRecord;
  /** Passes, housekeeping runs and compactions run one at a time, in order. */
  #serial: Promise<unknown> = Promise.resolve();
  /**
   * The last clean stop's entries by label, for the partitions' first open; undefined before the
   * first discovery takes the record. Only a worker that took it writes one at close.
   */
  #cleanStop?: Map<string, CleanStopEntry>;

  constructor(env: TierEnv) {
    const ts = env.config.tiered_storage;
    const clock = env.clock ?? env.root?.clock ?? systemClock;
    const observer = env.observer ?? {};
    const logger = env.logger;
    this.#config = env.config;
    this.#logger = logger;
    this.#prefix = env.prefix;
    this.#journals = new JournalStateReader(env.config.agent.state_dir);
    const store = new RetryingStore(env.store, {
      root: env.root ?? Deadline.after(Infinity, undefined, { clock }),
      clock,
      rng: env.rng,
      maxBackoffMs: ts.upload_loop_backoff_max,
      pacer: env.pacer,
      onRetry: ({ op, key, attempt, delayMs, err }) => {
        // Two store faults in a row: the store is not answering; say so now, not when the
        // deadline runs out (a successful copy sets the gauge back to 0).
        if (attempt >= 2) observer.stalled?.(1);
        logger.debug("store operation retried", { op, key, attempt, delay_ms: delayMs, err });
      },
    });
    this.#shared = {
      config: env.config,
      store,
      clock,
      observer,
      // One pool of part buffers for the whole worker: memory stays near
      // part_size × (upload_concurrency + 1) however many partitions upload at once.
      partPool: env.partPool ?? new PartBufferPool(ts.part_size, ts.upload_concurrency + 1),
      // Reads-back of copies whose store keeps no checksum honour the download limit too (a
      // bucket of their own, at the same rate as the read path's).
      readBandwidth: new TokenBucket(ts.fetch_bandwidth, { clock }),
      owner: env.owner,
      storeDescription: env.describe,
    };
    this.#evictor = chooseEvictor(env, clock);
    this.housekeeper = new Housekeeper({
      config: env.config,
      store,
      clock,
      logger,
      observer,
      keySpace: { prefix: env.prefix, clusterId: env.config.agent.cluster_id },
      owner: env.owner,
      targets: () => this.partitions,
      meter: env.meter,
    });
  }

  /** The partitions found by the last pass. */
  get partitions(): PartitionTier[] {
    return [...this.#partitions.values()];
  }

  /** Why each partition's eviction waits, by label (`"{s}/{t}/{p}"`), for the status page. */
  evictionBlocks(): Map<string, EvictionBlock> {
    const out = new Map<string, EvictionBlock>();
    for (const p of this.#partitions.values()) {
      const block = p.evictionBlock;
      if (block) out.set(p.label, block);
    }
    return out;
  }

  /**
   * The live state of a partition this worker tiers (for the read path). A partition with a
   * journal but no broker directory (a host restored without `--with-data`, before its broker
   * made the directory) is served from its journal, read-only, as `tierd read` would.
   */
  state(id: PartitionId): Promise<PartitionState | undefined> {
    const p = this.partitions.find((a) =>
      a.id.stream === id.stream && a.id.topic === id.topic && a.id.partition === id.partition
    );
    if (p) return Promise.resolve(p.state);
    const label = partitionLabel(id);
    // A partition whose directory this worker saw go (its topic deleted) has no state to read
    // from: its old journal describes another topic's data.
    if (this.#failedOpen.has(label) || this.#vanished.has(label)) return Promise.resolve(undefined);
    return this.#journals.state(id);
  }

  /** How a partition's local state stands (rebuilt from the bucket, or not openable now). */
  health(id: PartitionId): PartitionHealth | undefined {
    const label = partitionLabel(id);
    const failed = this.#failedOpen.get(label);
    if (failed) return { state: "failed", detail: failed };
    const opening = this.#opening.get(label);
    if (opening) return { state: "opening", detail: opening };
    const p = this.partitions.find((a) => a.label === label);
    return p && partitionHealth(p.boot);
  }

  /**
   * The remote copies total retention chose in a partition's last pass and has not started
   * deleting (see `PartitionStateSource.chosenDeletions`).
   */
  chosenDeletions(id: PartitionId): readonly ChosenDeletion[] | undefined {
    const label = partitionLabel(id);
    return this.partitions.find((a) => a.label === label)?.chosenDeletions;
  }

  /**
   * Why a partition's state is not known yet (see `PartitionStateSource.pending`): the agent is
   * starting, or opening it now, or could not open it (tried again every pass).
   */
  pending(id: PartitionId): string | undefined {
    const label = partitionLabel(id);
    const opening = this.#opening.get(label);
    if (opening) return opening;
    const failed = this.#failedOpen.get(label);
    if (failed) return `its state could not be opened (${failed}); tried again every pass`;
    if (!this.#started) return "the agent is starting: journals are replayed, partitions opened";
    const gone = this.#vanished.get(label);
    if (gone !== undefined && this.#shared.clock.now() - gone < VANISHED_PENDING_MS) {
      return "the broker's directory is gone: the topic was deleted, or is being recreated";
    }
    return undefined;
  }

  /** Rewrites every partition's journal as a snapshot (between passes). */
  compact(): Promise<{ partitions: number }> {
    return this.#exclusively(async () => {
      for (const p of this.#partitions.values()) await p.compact();
      return { partitions: this.#partitions.size };
    });
  }

  /**
   * Runs the housekeeping jobs that are due (between passes, never during one); with `force`
   * whether the agent is idle or not.
   */
  housekeep(options: { force?: boolean } = {}): Promise<JobOutcome[] | undefined> {
    return this.#exclusively(() => this.housekeeper.maybeRun(options));
  }

  #exclusively<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#serial.then(work);
    this.#serial = run.catch(() => {});
    return run;
  }

  /**
   * Finds and opens every tiered partition (journal replay and boot reconciliation) without
   * running a pass; the first pass does it too.
   * @returns how many partitions are open
   */
  open(): Promise<number> {
    return this.#exclusively(async () => (await this.#discover()).partitions.length);
  }

  /** Runs one pass; a call while a pass runs joins that pass. */
  pass(): Promise<PassReport> {
    this.#running ??= this.#exclusively(async () => {
      const startedAt = this.#shared.clock.now();
      const report = await this.#pass();
      this.#lastPass = { report, startedAt, finishedAt: this.#shared.clock.now() };
      return report;
    }).finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  /** The last finished pass (for the status page); undefined before the first one ends. */
  get lastPass(): PassRecord | undefined {
    return this.#lastPass;
  }

  /** Partitions whose state could not be opened, with why (tried again every pass). */
  get failedToOpen(): ReadonlyMap<string, string> {
    return this.#failedOpen;
  }

  #stopped(): boolean {
    return this.#shared.store.root.expired();
  }

  async #pass(): Promise<PassReport> {
    if (!this.#announced) {
      this.#announced = true;
      const line = await describeEviction(this.#config, this.#evictor);
      if (line) this.#logger.info(line.msg, line.fields);
    }
    const { partitions, failed } = await this.#discover();
    // Pressured partitions first, then those with the most waiting work.
    partitions.sort((a, b) =>
      Number(b.lastPass?.pressured ?? false) - Number(a.lastPass?.pressured ?? false) ||
      (b.lastPass?.pending ?? 1) - (a.lastPass?.pending ?? 1)
    );
    const perTopic = partitionsPerTopic(partitions.map((p) => p.id));
    const ts = this.#config.tiered_storage;
    const budget: DeleteBudget = { remaining: ts.delete_batch_per_pass };
    const backlog = partitions.filter((p) => (p.lastPass?.pending ?? 1) > 0).length;
    const width = Math.max(1, Math.min(ts.upload_concurrency, backlog));
    const reports: PartitionPassReport[] = [];
    let next = 0;
    const lane = async () => {
      while (next < partitions.length && !this.#stopped()) {
        const p = partitions[next++];
        const topic = tieredTopic(this.#config, p.id)!;
        try {
          reports.push(
            await p.pass(topic, {
              partitionsInTopic: perTopic(p.id),
              deleteBudget: budget,
            }),
          );
        } catch (err) {
          // A partition that disappeared mid-pass (or a local I/O failure) stops only itself.
          this.#logger.error("partition pass failed", { partition: p.label, err });
          reports.push({
            ...emptyPassReport(p.label, p.state.floor),
            problems: [problemOf({ kind: "partition", what: `partition ${p.label}` }, err)],
          });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(width, partitions.length) }, lane));
    reports.push(...failed);
    reports.sort((a, b) => a.partition.localeCompare(b.partition));
    const report = summarize(reports);
    this.#shared.observer.stalled?.(report.storeUnreachable && report.pending > 0 ? 1 : 0);
    return report;
  }

  /**
   * Finds the tiered partitions, opening new (or recreated) ones and closing vanished ones. A
   * partition that cannot be opened (its state volume full, the bucket unreachable while its
   * state is rebuilt) is reported failed for this pass and tried again next pass; it never
   * stops the others.
   */
  async #discover(): Promise<{ partitions: PartitionTier[]; failed: PartitionPassReport[] }> {
    const config = this.#config;
    const found = await discoverPartitions(
      config.agent.data_dir,
      (id) => tieredTopic(config, id) !== undefined,
    );
    const seen = new Set<string>();
    const out: PartitionTier[] = [];
    const failed: PartitionPassReport[] = [];
    // Every partition not open yet is "opening" until it is: its reads answer "retry".
    for (const part of found) {
      const open = this.#partitions.get(part.dir);
      if (open && open.state.device === part.device && open.state.inode === part.inode) continue;
      const label = partitionLabel(part);
      if (!this.#failedOpen.has(label)) {
        this.#opening.set(label, "the agent is opening its state (journal, markers, the bucket)");
      }
    }
    const first = this.#cleanStop === undefined;
    if (first) this.#cleanStop = await this.#takeCleanStop();
    try {
      await this.#openAll(found, seen, out, failed);
    } finally {
      this.#opening.clear();
      this.#started = true;
    }
    if (first) {
      this.#sayMarkersUnread(out, this.#cleanStop!.size);
      this.#cleanStop!.clear(); // for the first opens only; the map stays: this worker took it
    }
    for (const [dir, p] of this.#partitions) {
      if (!seen.has(dir)) {
        this.#vanished.set(p.label, this.#shared.clock.now());
        this.#logger.info("partition directory gone; its work stops", { partition: p.label });
        this.#shared.observer.segmentsDamaged?.(p.id, 0);
        await p.close();
        this.#partitions.delete(dir);
      }
    }
    return { partitions: out, failed };
  }

  async #openAll(
    found: DiscoveredPartition[],
    seen: Set<string>,
    out: PartitionTier[],
    failed: PartitionPassReport[],
  ): Promise<void> {
    const config = this.#config;
    for (const part of found) {
      seen.add(part.dir);
      let p = this.#partitions.get(part.dir);
      if (p && (p.state.device !== part.device || p.state.inode !== part.inode)) {
        await p.close(); // the directory was recreated: reopen to settle its incarnation
        this.#partitions.delete(part.dir);
        p = undefined;
      }
      if (!p) {
        const label = partitionLabel(part);
        const log = this.#logger.child({ partition: label });
        try {
          p = await PartitionTier.open(
            {
              ...this.#shared,
              log,
              rebuildProgress: (progress) =>
                this.#opening.set(
                  label,
                  `rebuilding its state from the bucket: ${progress.pages} pages, ` +
                    `${progress.keys} keys listed so far`,
                ),
            },
            part,
            { prefix: this.#prefix, clusterId: config.agent.cluster_id },
            this.#evictor,
            this.#cleanStop?.get(label),
          );
        } catch (err) {
          this.#failedOpen.set(label, (err as Error).message);
          this.#opening.delete(label);
          log.error("cannot open the partition's state; tried again next pass", { err });
          const problem = problemOf({ kind: "partition_open", what: `partition ${label}` }, err);
          failed.push({
            ...emptyPassReport(label, -1n),
            problems: [problem],
            storeUnreachable: problem.storeFault,
            pending: 1,
          });
          continue;
        }
        this.#partitions.set(part.dir, p);
        this.#failedOpen.delete(label);
        this.#opening.delete(label);
        this.#vanished.delete(label);
      }
      out.push(p);
    }
  }

  /**
   * Takes the last clean stop's record (see `state/clean_stop.ts`), saying when there is none or
   * it is damaged: then every marker is read before ready.
   */
  async #takeCleanStop(): Promise<Map<string, CleanStopEntry>> {
    const taken = await takeCleanStop(this.#config.agent.state_dir);
    if (taken.kind === "damaged") {
      this.#logger.warn("clean-stop record not usable: every marker is read before ready", {
        err: taken.error,
      });
      return new Map();
    }
    if (taken.kind === "none") {
      this.#logger.info(
        "no clean-stop record (first start, or the last stop was not clean): every marker is " +
          "read before ready",
      );
      return new Map();
    }
    return new Map(taken.entries.map((e) => [partitionLabel(e), e]));
  }

  /** Says how many markers boot trusted, when the record had entries. */
  #sayMarkersUnread(opened: readonly PartitionTier[], entries: number): void {
    if (entries === 0) return;
    const trusted = opened.filter((p) => p.boot.markersUnread > 0);
    const markers = trusted.reduce((n, p) => n + p.boot.markersUnread, 0);
    this.#logger.info(
      "markers trusted from the clean-stop record; each partition's first pass reads them",
      {
        partitions: trusted.length,
        markers,
        read_at_boot: opened.length - trusted.length,
      },
    );
  }

  /**
   * Waits for a running pass, then closes every partition's journal, and writes the clean-stop
   * record (when this worker took one at its first discovery): an entry for each partition whose
   * markers this run read. A failure to write it is said, never thrown: the next boot reads
   * every marker instead.
   */
  async close(): Promise<void> {
    await this.#serial;
    const entries: CleanStopEntry[] = [];
    for (const p of this.#partitions.values()) {
      await p.close();
      if (this.#cleanStop === undefined) continue;
      try {
        const entry = await p.cleanStopEntry();
        if (entry) entries.push(entry);
      } catch (err) {
        this.#logger.warn("partition left out of the clean-stop record", {
          partition: p.label,
          err,
        });
      }
    }
    this.#partitions.clear();
    if (this.#cleanStop === undefined) return;
    try {
      await writeCleanStop(this.#config.agent.state_dir, entries, this.#shared.clock.now());
    } catch (err) {
      this.#logger.warn("clean-stop record not written: the next boot reads every marker", {
        err,
      });
    }
  }
}

function summarize(reports: PartitionPassReport[]): PassReport {
  const sum = (f: (r: PartitionPassReport) => number) => reports.reduce((n, r) => n + f(r), 0);
  return {
    partitions: reports,
    copied: sum((r) => r.copied),
    adopted: sum((r) => r.adopted),
    failed: sum((r) => r.failed),
    cleaned: sum((r) => r.cleaned),
    lost: sum((r) => r.lost),
    evicted: sum((r) => r.evicted),
    remoteDeleted: sum((r) => r.remoteDeleted),
    pending: sum((r) => r.pending),
    problems: reports.flatMap((r) => r.problems),
    storeUnreachable: reports.some((r) => r.storeUnreachable),
  };
}

/**
 * The answer of `POST /v1/admin/pass`: the report, its problems typed (`problems`) and, as it has
 * always said them, in words (`errors`), for the pass and for each partition.
 */
export function passAnswer(report: PassReport): PassAnswer {
  const words = (r: { problems: readonly Problem[] }) => r.problems.map(describeProblem);
  return {
    ...report,
    partitions: report.partitions.map((p) => ({ ...p, errors: words(p) })),
    errors: words(report),
  };
}
