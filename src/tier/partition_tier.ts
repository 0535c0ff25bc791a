// Tiers one partition: opens its ledger and reconciles it at boot, then runs passes — each the
// same sequence of phases (purge check, losses, copy, dangling cleanup, floor, eviction, total
// retention), each phase given its inputs and returning its outcome. One pass at a time.
import type { TopicConfig } from "../config/schema.ts";
import { detectFormat } from "../format/detect.ts";
import type { FormatName } from "../format/types.ts";
import { type PartitionId, partitionLabel } from "../layout/partition.ts";
import type { TornTailInfo } from "../state/journal.ts";
import type { DiscoveredPartition } from "../partition/discover.ts";
import type { SegmentFiles } from "../partition/segments.ts";
import type { ChosenDeletion } from "../state/delete_lag.ts";
import { getSegment, type PartitionState, segmentsOf } from "../state/segment_state.ts";
import { type BootOutcome, reconcileAtBoot, reconcileMarkers, settleReappeared } from "./boot.ts";
import type { CleanStopEntry } from "../state/clean_stop.ts";
import { directoryContradicts } from "../partition/journal_fit.ts";
import { damageOf, type LocalDamage } from "./damage.ts";
import { type EvictionBlock, EvictionGate } from "./eviction_gate.ts";
import type { Evictor } from "./evictor.ts";
import { type KeySpace, PartitionLedger, setJournalAside } from "./partition_ledger.ts";
import { listLocal, type PhaseContext } from "./phase.ts";
import { type Problems, uniqueProblems } from "./problem.ts";
import { cleanupPhase } from "./phases/cleanup.ts";
import { type ChainGap, type CopyOutcome, copyPhase } from "./phases/copy.ts";
import { evictPhase } from "./phases/evict.ts";
import { advanceFloor, detectPurge, recordLosses } from "./phases/floor.ts";
import { type DeleteBudget, retentionPhase } from "./phases/retention.ts";
import { type DamagedSegment, SegmentDamage } from "./segment_damage.ts";
import { type ChainFault, nextUploadFault, type UploadFault } from "./upload_fault.ts";

/** Compact the journal once it grows past this many bytes. */
const COMPACT_BYTES = 1024 * 1024;

/** What one pass over a partition did. */
export interface PartitionPassReport extends Problems {
  partition: string;
  /**
   * Its work met store faults worth retrying (the problems' `storeFault`); false for a pass that
   * failed as a whole, which is reported, not counted as the store's.
   */
  storeUnreachable: boolean;
  copied: number;
  adopted: number;
  failed: number;
  cleaned: number;
  lost: number;
  evicted: number;
  remoteDeleted: number;
  /** Sealed segments still waiting for a copy after this pass. */
  pending: number;
  /** Local retention wants segments evicted that the floor does not cover yet. */
  pressured: boolean;
  floor: bigint;
  /** Holes between consecutive local segments (reported, never hidden). */
  gaps: ChainGap[];
  /** Why eviction waits after this pass, if it does. */
  evictionBlocked?: EvictionBlock;
  /**
   * Sealed segments found damaged and not copied (the floor stops before the first), until
   * their files change or go.
   */
  damaged: DamagedSegment[];
}

/** What opening a partition found: boot reconciliation, and damage or a torn tail before it. */
export interface OpenOutcome extends BootOutcome {
  /** The journal was damaged: set aside, the state rebuilt from the bucket. */
  damage?: LocalDamage;
  /** The journal ended in an incomplete record, cut off. */
  tornTail?: TornTailInfo;
}

/** Options of one pass. */
export interface PassOptions {
  /** How many partitions share the topic's `max_topic_size`. @default 1 */
  partitionsInTopic?: number;
  /** Remote deletions left in the worker's pass. @default delete_batch_per_pass */
  deleteBudget?: DeleteBudget;
}

/** The tiering of one partition directory, across passes. */
export class PartitionTier {
  readonly ledger: PartitionLedger;
  /** The broker's partition directory. */
  readonly dir: string;
  #boot: OpenOutcome;
  readonly #ctx: PhaseContext;
  readonly #evictor: Evictor;
  readonly #gate: EvictionGate;
  readonly #reportedGaps = new Set<string>();
  /** When each remote copy was first found deletable (the retention phase's delete_grace). */
  readonly #deletableSince = new Map<string, number>();
  readonly #damage = new SegmentDamage();
  /** What total retention chose in the last pass and left unjournaled. */
  #chosenDeletions: readonly ChosenDeletion[] = [];
  #uploadFault?: UploadFault;
  #format?: FormatName;
  #lastPass?: PartitionPassReport;
  #closed = false;

  private constructor(
    ctx: PhaseContext,
    ledger: PartitionLedger,
    part: DiscoveredPartition,
    evictor: Evictor,
    boot: OpenOutcome,
  ) {
    this.#ctx = ctx;
    this.ledger = ledger;
    this.dir = part.dir;
    this.#evictor = evictor;
    this.#gate = new EvictionGate(
      ledger.id,
      ctx.log,
      ctx.clock,
      (id, reason) => ctx.observer.evictionBlocked?.(id, reason),
    );
    this.#boot = boot;
    ctx.observer.markersUnread?.(boot.markersUnread);
  }

  /**
   * Opens (replaying) the partition's journal and reconciles it with its directory and markers.
   * @param ctx the worker's services, with this partition's logger
   * @param cleanStop its entry in the clean-stop record the last stop left, if any
   */
  static async open(
    ctx: PhaseContext,
    part: DiscoveredPartition,
    keySpace: KeySpace,
    evictor: Evictor,
    cleanStop?: CleanStopEntry,
  ): Promise<PartitionTier> {
    const stateRoot = ctx.config.agent.state_dir;
    let tornTail: TornTailInfo | undefined;
    const options = {
      onTornTail: (t: TornTailInfo) => {
        tornTail = t;
        ctx.observer.journalTornTail?.(t.path);
        ctx.log.warn("journal torn tail truncated", {
          path: t.path,
          valid_bytes: t.validBytes,
          dropped_bytes: t.droppedBytes,
          reason: t.reason,
        });
      },
    };
    let ledger: PartitionLedger;
    let damage: LocalDamage | undefined;
    try {
      ledger = await PartitionLedger.open(stateRoot, part, keySpace, options);
    } catch (err) {
      damage = damageOf(err);
      if (!damage) throw err;
      // Loud and contained: the bad journal is kept for inspection, and the partition is
      // rebuilt from the bucket before it does anything else.
      const keptAt = await setJournalAside(stateRoot, part, ctx.clock.now());
      damage = { ...damage, keptAt };
      ctx.observer.stateDamaged?.(partitionLabel(part), damage.reason);
      ctx.log.error("partition journal damaged: kept aside, rebuilding from the bucket", {
        path: damage.path,
        position: damage.position,
        reason: damage.reason,
        kept_at: keptAt,
      });
      ledger = await PartitionLedger.open(stateRoot, part, keySpace, options);
    }
    try {
      const boot = await reconcileAtBoot(ctx, ledger, part, keySpace, cleanStop);
      return new PartitionTier(ctx, ledger, part, evictor, { ...boot, damage, tornTail });
    } catch (err) {
      await ledger.close();
      throw err;
    }
  }

  get id(): PartitionId {
    return this.ledger.id;
  }

  /** What opening the partition found, and what the first pass's read of its markers added. */
  get boot(): OpenOutcome {
    return this.#boot;
  }

  /** `"{s}/{t}/{p}"`. */
  get label(): string {
    return this.ledger.label;
  }

  /** The partition's folded state (read-only). */
  get state(): PartitionState {
    return this.ledger.state;
  }

  /** The report of the last finished pass. */
  get lastPass(): PartitionPassReport | undefined {
    return this.#lastPass;
  }

  /**
   * Remote copies total retention chose in the last pass and has not started deleting (they
   * wait for `delete_grace` or the delete budget): part of the remote-deletion lag.
   */
  get chosenDeletions(): readonly ChosenDeletion[] {
    return this.#chosenDeletions;
  }

  /**
   * The store faults keeping this partition's copies from landing, since when and the latest
   * (see `upload_fault.ts`); undefined while its last pass met none.
   */
  get uploadFault(): UploadFault | undefined {
    return this.#uploadFault;
  }

  /** Why this partition's eviction waits, if it does. */
  get evictionBlock(): EvictionBlock | undefined {
    return this.#gate.block;
  }

  /** The partition's detected (or configured) segment format, once known. */
  get format(): FormatName | undefined {
    return this.#format;
  }

  /**
   * One full pass: copy sealed segments, clean dangling ones (and copy what they freed),
   * evict under local retention, then apply total retention to remote copies.
   */
  async pass(topic: TopicConfig, options: PassOptions = {}): Promise<PartitionPassReport> {
    const ctx = this.#ctx;
    const ledger = this.ledger;
    let segments = await listLocal(ctx, this.dir);
    const contradiction = ledger.state.incarnation !== undefined
      ? directoryContradicts(segments, ledger.state)
      : undefined;
    if (contradiction && contradiction.kind !== "restarted_below_floor") {
      // Changed behind the agent's back under the same inode (the read path answers "retry"
      // meanwhile): the bytes decide, as at boot.
      ctx.log.warn("the broker's directory no longer fits the journal", {
        reason: contradiction.reason,
      });
      const settled = await settleReappeared(ctx, ledger, {
        device: ledger.state.device ?? 0,
        inode: ledger.state.inode ?? 0,
      }, segments);
      if (settled.kind === "new") {
        this.#deletableSince.clear();
        this.#chosenDeletions = [];
        this.#reportedGaps.clear();
      }
      segments = await listLocal(ctx, this.dir);
    }
    if (this.#boot.markersUnread > 0) await this.#readUnreadMarkers(segments);
    const format = await this.#formatOf(segments);
    await detectPurge(ctx, ledger, segments);
    const lost = await recordLosses(ctx, ledger, segments);
    this.#damage.keepOnly(new Set(segments.map((s) => s.start)));
    const copyInput = {
      segments,
      format,
      reportedGaps: this.#reportedGaps,
      damage: this.#damage,
      storageClass: topic.storage_class,
    };
    // The work that moves the copy chain — copy, cleanup, copy again — and its store faults,
    // each timed when its phase ended (a failure ends the copy phase; cleanups are short).
    const faults: ChainFault[] = [];
    const chain = async <P extends Problems>(phase: Promise<P>): Promise<P> => {
      const out = await phase;
      const at = ctx.clock.now();
      for (const problem of out.problems) if (problem.storeFault) faults.push({ at, problem });
      return out;
    };
    const copied = [await chain(copyPhase(ctx, ledger, copyInput))];
    const cleanup = await chain(cleanupPhase(ctx, ledger, { segments, format }));
    if (cleanup.cleaned + cleanup.adopted > 0) {
      copied.push(await chain(copyPhase(ctx, ledger, copyInput)));
    }
    this.#uploadFault = nextUploadFault(this.#uploadFault, {
      faults,
      progressed: sum(copied, (c) => c.copied + c.adopted) + cleanup.adopted > 0,
    });
    await advanceFloor(ctx, ledger);
    const evict = await evictPhase(ctx, ledger, {
      dir: this.dir,
      segments,
      format,
      topic,
      evictor: this.#evictor,
      gate: this.#gate,
    });
    const after = await listLocal(ctx, this.dir);
    const retention = await retentionPhase(ctx, ledger, {
      dir: this.dir,
      segments: after,
      topic,
      partitionsInTopic: options.partitionsInTopic ?? 1,
      budget: options.deleteBudget ??
        { remaining: ctx.config.tiered_storage.delete_batch_per_pass },
      deletableSince: this.#deletableSince,
    });
    this.#chosenDeletions = retention.chosen;
    const phases: Problems[] = [...copied, cleanup, evict, retention];
    const report: PartitionPassReport = {
      partition: this.label,
      copied: sum(copied, (c) => c.copied),
      adopted: sum(copied, (c) => c.adopted) + cleanup.adopted,
      failed: sum(copied, (c) => c.failed),
      cleaned: cleanup.cleaned,
      lost,
      evicted: evict.evicted,
      remoteDeleted: retention.remoteDeleted,
      pending: this.#pending(after),
      pressured: evict.pressured,
      floor: ledger.state.floor,
      gaps: uniqueGaps(copied.flatMap((c) => c.gaps)),
      ...(this.#gate.block ? { evictionBlocked: this.#gate.block } : {}),
      damaged: this.#damage.list(),
      problems: uniqueProblems(phases.flatMap((p) => p.problems)),
      storeUnreachable: phases.some((p) => p.problems.some((q) => q.storeFault)),
    };
    ctx.observer.segmentsDamaged?.(this.id, report.damaged.length);
    if (ledger.journalSize > COMPACT_BYTES) await this.compact();
    this.#lastPass = report;
    return report;
  }

  /**
   * Reads and checks the markers boot trusted from the clean-stop record, as boot does after a
   * crash: damage found here is quarantined, and what it changes is added to the boot outcome.
   */
  async #readUnreadMarkers(segments: readonly SegmentFiles[]): Promise<void> {
    const found = await reconcileMarkers(this.#ctx, this.ledger, segments);
    const unread = this.#boot.markersUnread;
    this.#boot = {
      ...this.#boot,
      quarantined: [...this.#boot.quarantined, ...found.quarantined],
      evictionsRecorded: this.#boot.evictionsRecorded + found.evictionsRecorded,
      adopted: this.#boot.adopted + found.adopted,
      markersUnread: 0,
    };
    this.#ctx.observer.markersUnread?.(-unread);
  }

  /**
   * This partition's entry for the clean-stop record, once its journal is closed: undefined
   * while markers boot trusted are still unread (the next boot reads them all), or before it has
   * an incarnation.
   */
  cleanStopEntry(): Promise<CleanStopEntry | undefined> {
    if (this.#boot.markersUnread > 0) return Promise.resolve(undefined);
    return this.ledger.cleanStopEntry();
  }

  /** Sealed segments with no record yet, plus dangling ones: copies still to do. */
  #pending(segments: readonly SegmentFiles[]): number {
    const state = this.ledger.state;
    return segments.filter((s) =>
      s.sealed && getSegment(state, state.generation, s.start) === undefined
    ).length + segmentsOf(state).filter((r) => r.state === "DANGLING").length;
  }

  async #formatOf(segments: readonly SegmentFiles[]): Promise<FormatName | undefined> {
    const configured = this.#ctx.config.agent.format;
    if (configured !== "auto") return (this.#format = configured);
    if (this.#format) return this.#format;
    for (const s of segments) {
      if (s.logSize === 0) continue;
      this.#format = await detectFormat(s.logPath, s.indexPath);
      if (this.#format) return this.#format;
    }
    return undefined;
  }

  /** Rewrites the journal as a snapshot of the current state. */
  compact(): Promise<void> {
    return this.ledger.compact(this.#ctx.clock.now());
  }

  /**
   * Closes the journal (and withdraws the partition's eviction block, and its unread markers,
   * from the metrics).
   */
  close(): Promise<void> {
    this.#gate.forget();
    if (!this.#closed) this.#ctx.observer.markersUnread?.(-this.#boot.markersUnread);
    this.#closed = true;
    return this.ledger.close();
  }
}

/** A report of a pass that has done nothing (yet). */
export function emptyPassReport(partition: string, floor: bigint): PartitionPassReport {
  return {
    partition,
    copied: 0,
    adopted: 0,
    failed: 0,
    cleaned: 0,
    lost: 0,
    evicted: 0,
    remoteDeleted: 0,
    pending: 0,
    pressured: false,
    floor,
    gaps: [],
    damaged: [],
    problems: [],
    storeUnreachable: false,
  };
}

function sum(outcomes: readonly CopyOutcome[], f: (o: CopyOutcome) => number): number {
  return outcomes.reduce((n, o) => n + f(o), 0);
}

function uniqueGaps(gaps: readonly ChainGap[]): ChainGap[] {
  const seen = new Set<string>();
  return gaps.filter((g) => {
    const key = `${g.afterEnd}:${g.nextStart}`;
    return !seen.has(key) && seen.add(key) !== undefined;
  });
}
