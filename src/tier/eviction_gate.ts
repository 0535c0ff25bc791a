// Why a partition's eviction waits, and when to try again. Three things hold it: a consumer
// offset the broker's barrier protects (tierd does not ask the broker for those segments), a
// broker that answered DeleteSegments but kept the segments (tierd backs off exponentially
// before asking again), and a broker running beside the directory while `evict_via = "auto"`
// would unlink (tierd waits until it is stopped). Each change is said once at warn level and
// reported through the observer (`tierd_eviction_blocked`); the status page shows the current
// block.
import type { Clock } from "../base/clock.ts";
import type { PartitionId } from "../layout/partition.ts";
import type { Logger } from "../log.ts";

/** Why eviction waits: the `reason` label of `tierd_eviction_blocked`. */
export type EvictionBlockReason = "consumer_offset" | "broker_kept" | "broker_running";

/** Every reason, for tests and docs. */
export const EVICTION_BLOCK_REASONS: readonly EvictionBlockReason[] = [
  "consumer_offset",
  "broker_kept",
  "broker_running",
];

/** A partition's eviction is waiting. */
export interface EvictionBlock {
  reason: EvictionBlockReason;
  /** Start offset of the oldest segment that waits. */
  segment: bigint;
  /** The lowest offset a consumer or consumer group stored, when known. */
  consumerOffset?: bigint;
  /** What showed the broker running (`broker_running`). */
  evidence?: string;
  /** When tierd asks the broker again (`broker_kept`), ms since the epoch. */
  retryAt?: number;
  /** One line saying why, e.g. "eviction blocked by consumer offset 41". */
  text: string;
}

/** How tierd backs off after DeleteSegments removed nothing: doubling from 2 s up to 5 min. */
export const BROKER_KEPT_BACKOFF = { baseMs: 2_000, maxMs: 300_000 } as const;

/**
 * Eviction waits for the reason `block` gives (thrown by an evictor that found, right before
 * removing, that it must not); the eviction phase records the block instead of a failure.
 */
export class EvictionHeldError extends Error {
  override readonly name = "EvictionHeldError";
  constructor(readonly block: Omit<EvictionBlock, "segment" | "text">) {
    super(block.evidence ?? block.reason);
  }
}

/** The one-line description of a block (its `text`). */
export function describeBlock(b: Omit<EvictionBlock, "text">): string {
  switch (b.reason) {
    case "consumer_offset":
      return `eviction blocked by consumer offset ${b.consumerOffset}: segment ${b.segment} ` +
        "ends after it, and the broker keeps it for its consumers";
    case "broker_kept":
      return `eviction blocked: the broker kept segment ${b.segment} when asked to delete it` +
        (b.consumerOffset === undefined ? "" : ` (lowest consumer offset ${b.consumerOffset})`);
    case "broker_running":
      return `eviction blocked: a broker is running beside the data directory (${b.evidence}); ` +
        "tierd unlinks segment files only while it is stopped — set [agent.broker] to evict " +
        "through it";
  }
}

/** Identifies a request to the evictor: its first segment and the barrier it was made under. */
export function attemptKey(first: bigint, consumerOffset: bigint | undefined): string {
  return `${first}@${consumerOffset ?? "-"}`;
}

/** The backoff after the broker removed nothing: `attempt` 1 waits the base, then doubling. */
export function keptBackoffMs(attempt: number): number {
  return Math.min(BROKER_KEPT_BACKOFF.maxMs, BROKER_KEPT_BACKOFF.baseMs * 2 ** (attempt - 1));
}

/** One partition's eviction block and backoff, across passes. */
export class EvictionGate {
  readonly #id: PartitionId;
  readonly #log: Logger;
  readonly #report: (id: PartitionId, reason: EvictionBlockReason | undefined) => void;
  readonly #clock: Clock;
  #block?: EvictionBlock;
  /** The last request the evictor answered without removing anything. */
  #kept?: { key: string; misses: number; retryAt: number };

  /**
   * @param report told each time the partition's block reason changes (the observer's
   *   `evictionBlocked`); `undefined` once nothing holds it
   */
  constructor(
    id: PartitionId,
    log: Logger,
    clock: Clock,
    report: (id: PartitionId, reason: EvictionBlockReason | undefined) => void = () => {},
  ) {
    this.#id = id;
    this.#log = log;
    this.#clock = clock;
    this.#report = report;
  }

  /** The current block, if eviction waits. */
  get block(): EvictionBlock | undefined {
    return this.#block;
  }

  /** Eviction waits for `block` (a change is logged once at warn level and reported). */
  hold(block: Omit<EvictionBlock, "text">): void {
    const next = { ...block, text: describeBlock(block) };
    const prev = this.#block;
    this.#block = next;
    if (prev?.reason === next.reason && prev.segment === next.segment) return;
    if (prev?.reason !== next.reason) this.#report(this.#id, next.reason);
    this.#log.warn(next.text, {
      reason: next.reason,
      segment: next.segment,
      ...(next.consumerOffset === undefined ? {} : { consumer_offset: next.consumerOffset }),
      ...(next.evidence === undefined ? {} : { evidence: next.evidence }),
      ...(next.retryAt === undefined
        ? {}
        : { retry_in_ms: Math.max(0, next.retryAt - this.#clock.now()) }),
    });
  }

  /** Nothing holds eviction back any more (said once at info level when something did). */
  clear(): void {
    this.#kept = undefined;
    const prev = this.#block;
    if (!prev) return;
    this.#block = undefined;
    this.#report(this.#id, undefined);
    this.#log.info("eviction no longer blocked", { was: prev.reason, segment: prev.segment });
  }

  /** Forgets the block without a log line (the partition is closed). */
  forget(): void {
    if (this.#block) this.#report(this.#id, undefined);
    this.#block = undefined;
    this.#kept = undefined;
  }

  /**
   * True while tierd backs off from asking again what the evictor last answered without
   * removing anything (same first segment, same consumer barrier).
   */
  backingOff(key: string): boolean {
    const kept = this.#kept;
    return kept !== undefined && kept.key === key && this.#clock.now() < kept.retryAt;
  }

  /**
   * The evictor answered a request but removed nothing. The first such answer only starts the
   * backoff (Iggy 0.9 deletes a little after it answers; the next pass records what went); a
   * second one for the same request holds eviction as `broker_kept`.
   */
  keptAll(key: string, first: bigint, consumerOffset: bigint | undefined): void {
    const misses = this.#kept?.key === key ? this.#kept.misses + 1 : 1;
    const retryAt = this.#clock.now() + keptBackoffMs(misses);
    this.#kept = { key, misses, retryAt };
    if (misses >= 2) this.hold({ reason: "broker_kept", segment: first, consumerOffset, retryAt });
  }

  /** The evictor removed something: its backoff starts over. */
  progressed(): void {
    this.#kept = undefined;
  }
}
