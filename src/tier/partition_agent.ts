// Tiers one partition (DESIGN §5, §6): keeps its journal, copies sealed segments oldest first,
// cleans up dangling copies, evicts local copies under local retention (markers first), and
// applies total retention to remote copies under the consumer barrier. One pass at a time.
import { unlink } from "node:fs/promises";
import { join } from "node:path";
import type { PartBufferPool } from "../../providers/part_pool.ts";
import { Deadline, withRetry } from "../../providers/retry.ts";
import { classify, type ObjectStore } from "../../providers/types.ts";
import type { Config, TopicConfig } from "../config/schema.ts";
import { readSegmentBounds } from "../format/bounds.ts";
import { detectFormat } from "../format/detect.ts";
import type { FormatName } from "../format/types.ts";
import { hex128 } from "../hash.ts";
import type { Logger } from "../log.ts";
import { deletableUnder, readConsumerBarrier } from "../partition/consumer_offsets.ts";
import type { DiscoveredPartition } from "../partition/discover.ts";
import { newIncarnation } from "../partition/incarnation.ts";
import { type PartitionId, partitionLabel, segmentStem } from "../partition/layout.ts";
import { listSegments, type SegmentFiles } from "../partition/segments.ts";
import { fsyncDir } from "../state/durable.ts";
import type { JournalEvent } from "../state/events.ts";
import { Journal } from "../state/journal.ts";
import { writeMarker } from "../state/marker.ts";
import {
  applyEvent,
  checkEvent,
  fold,
  getSegment,
  type PartitionState,
  type SegmentRecord,
  segmentsOf,
  snapshotEvents,
} from "../state/segment_state.ts";
import type { BrokerClient } from "./broker_client.ts";
import {
  CopyMismatchError,
  copySegment,
  SegmentChangedError,
  type SegmentSource,
  verifyCopy,
} from "./copy_segment.ts";
import { hashFile } from "./file_hash.ts";
import { computeFloor } from "./floor.ts";
import { type RemoteLocation, segmentKeys } from "./keys.ts";
import type { OpClass, OpClassPacer } from "./pacer.ts";
import { keepIndexCopy, markerPaths, partitionStateDir, scanMarkers } from "./markers.ts";
import type { SegmentMeta } from "./metadata.ts";
import type { TierObserver } from "./observer.ts";
import { chooseEvictions, chooseRetentionDeletes } from "./policy.ts";

/** Compact the journal once it grows past this many bytes. */
const COMPACT_BYTES = 1024 * 1024;

/** What one pass over a partition did. */
export interface PartitionPassReport {
  partition: string;
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
  gaps: { afterEnd: bigint; nextStart: bigint }[];
  errors: string[];
  /** True when a failure was a store fault worth retrying (transport, throttling). */
  storeUnreachable: boolean;
}

/** Deletions left in this pass, shared by every partition (`delete_batch_per_pass`). */
export interface DeleteBudget {
  remaining: number;
}

/** Everything a partition agent needs from the outside. */
export interface TierEnv {
  config: Config;
  store: ObjectStore;
  /** Key prefix of the configured backend. */
  prefix: string;
  logger: Logger;
  now?: () => number;
  signal?: AbortSignal;
  observer?: TierObserver;
  /** Used when `evict_via` resolves to `broker`. */
  broker?: BrokerClient;
  /** Retry randomness (tests pass a seeded one). */
  rng?: () => number;
  /** Multipart part buffers shared by all partitions. */
  partPool?: PartBufferPool;
  /** Spaces out an operation class after the store throttled it (shared by all partitions). */
  pacer?: OpClassPacer;
}

/** The journal, state and tiering logic of one partition. */
export class PartitionAgent {
  readonly id: PartitionId;
  readonly label: string;
  readonly dir: string;
  readonly stateDir: string;
  #journal: Journal;
  #state: PartitionState;
  #env: TierEnv;
  #log: Logger;
  #format?: FormatName;
  #reportedGaps = new Set<string>();
  #lastPass?: PartitionPassReport;

  private constructor(
    env: TierEnv,
    part: DiscoveredPartition,
    journal: Journal,
    state: PartitionState,
  ) {
    this.#env = env;
    this.id = { stream: part.stream, topic: part.topic, partition: part.partition };
    this.label = partitionLabel(this.id);
    this.dir = part.dir;
    this.stateDir = partitionStateDir(env.config.agent.state_dir, this.id);
    this.#journal = journal;
    this.#state = state;
    this.#log = env.logger.child({ partition: this.label });
  }

  /** Opens (replaying) the partition's journal, records its incarnation, reconciles markers. */
  static async open(env: TierEnv, part: DiscoveredPartition): Promise<PartitionAgent> {
    const label = partitionLabel(part);
    const path = `${partitionStateDir(env.config.agent.state_dir, part)}/journal`;
    const { journal, events } = await Journal.open(path, {
      onTornTail: (t) => {
        env.observer?.journalTornTail?.(t.path);
        env.logger.warn("journal torn tail truncated", {
          partition: label,
          path: t.path,
          valid_bytes: t.validBytes,
          dropped_bytes: t.droppedBytes,
          reason: t.reason,
        });
      },
    });
    const agent = new PartitionAgent(env, part, journal, fold(events));
    await agent.#checkIncarnation(part);
    await agent.#interruptedCopies();
    await agent.#reconcileMarkers();
    return agent;
  }

  /** The partition's folded state (read-only). */
  get state(): PartitionState {
    return this.#state;
  }

  /** The report of the last finished pass. */
  get lastPass(): PartitionPassReport | undefined {
    return this.#lastPass;
  }

  /** The partition's detected (or configured) segment format, once known. */
  get format(): FormatName | undefined {
    return this.#format;
  }

  get #now(): number {
    return (this.#env.now ?? Date.now)();
  }

  /** Validates, journals (durably) and applies events, in that order. */
  async #record(...events: JournalEvent[]): Promise<void> {
    let next = this.#state;
    for (const e of events) {
      checkEvent(next, e);
      next = applyEvent(next, e);
    }
    await this.#journal.append(...events);
    this.#state = next;
  }

  async #checkIncarnation(part: DiscoveredPartition): Promise<void> {
    const s = this.#state;
    if (s.incarnation !== undefined && s.device === part.device && s.inode === part.inode) return;
    const incarnation = newIncarnation();
    if (s.incarnation !== undefined) {
      this.#log.warn("partition directory was recreated: new incarnation", {
        old_incarnation: s.incarnation,
        incarnation,
      });
    }
    await this.#record({
      type: "incarnation",
      incarnation,
      device: part.device,
      inode: part.inode,
      at: this.#now,
    });
  }

  /**
   * Boot (DESIGN §5): a copy still in COPY_SEGMENT_STARTED, or a dangling cleanup still in
   * DELETE_SEGMENT_STARTED, was cut off by a crash. It becomes DANGLING here, whether or not its
   * local files survived, so cleanup (and, for a segment the broker has since deleted, the
   * lost_before_upload record) can follow.
   */
  async #interruptedCopies(): Promise<void> {
    for (const [generation] of this.#state.segments) {
      for (const r of segmentsOf(this.#state, generation)) {
        const cleanup = r.state === "DELETE_SEGMENT_STARTED" && r.deleteCause === "dangling";
        if (r.state !== "COPY_SEGMENT_STARTED" && !cleanup) continue;
        await this.#record({
          type: "dangling",
          segment: r.start,
          generation,
          reason: `${cleanup ? "cleanup" : "copy"} interrupted (found in ${r.state} at boot)`,
          at: this.#now,
        });
      }
    }
  }

  /**
   * Boot (DESIGN §4): quarantine untrusted markers; a trusted marker whose broker `.log` is
   * gone is a remote segment — record the eviction a crash may have left unrecorded.
   */
  async #reconcileMarkers(): Promise<void> {
    const { markers, quarantined } = await scanMarkers(this.stateDir, this.#state.incarnation!);
    for (const q of quarantined) {
      this.#env.observer?.markerQuarantined?.(q.path, q.reason);
      this.#log.warn("untrusted .remote marker quarantined", {
        path: q.path,
        moved_to: q.movedTo,
        reason: q.reason,
      });
    }
    if (markers.length === 0) return;
    const local = new Set(
      (await this.#listLocal()).map((s) => s.start),
    );
    for (const m of markers) {
      const rec = getSegment(this.#state, m.marker.generation, m.start);
      if (rec?.state === "COPY_SEGMENT_FINISHED" && !rec.evicted && !local.has(m.start)) {
        await this.#record({
          type: "evicted",
          segment: m.start,
          generation: m.marker.generation,
          at: this.#now,
        });
      }
    }
  }

  #listLocal(): Promise<SegmentFiles[]> {
    return listSegments(this.dir, {
      now: this.#now,
      quiescenceMs: this.#env.config.agent.seal_quiescence,
    });
  }

  #location(generation = this.#state.generation): RemoteLocation {
    return {
      ...this.id,
      prefix: this.#env.prefix,
      clusterId: this.#env.config.agent.cluster_id,
      incarnation: this.#state.incarnation!,
      generation,
    };
  }

  async #formatOf(segments: SegmentFiles[]): Promise<FormatName | undefined> {
    const configured = this.#env.config.agent.format;
    if (configured !== "auto") return (this.#format = configured);
    if (this.#format) return this.#format;
    for (const s of segments) {
      if (s.logSize === 0) continue;
      this.#format = await detectFormat(s.logPath, s.indexPath);
      if (this.#format) return this.#format;
    }
    return undefined;
  }

  /**
   * One full pass: copy sealed segments, clean dangling ones (and copy what they freed),
   * evict under local retention, then apply total retention to remote copies.
   */
  async pass(
    topic: TopicConfig,
    options: { partitionsInTopic?: number; deleteBudget?: DeleteBudget } = {},
  ): Promise<PartitionPassReport> {
    const report = emptyPassReport(this.label, this.#state.floor);
    let segments = await this.#listLocal();
    await this.#detectPurge(segments);
    await this.#recordLosses(segments, report);
    await this.#copyPhase(segments, report);
    const cleaned = await this.#cleanupPhase(segments, report);
    if (cleaned > 0) await this.#copyPhase(segments, report);
    await this.#advanceFloor();
    await this.#evictPhase(segments, topic, report);
    segments = await this.#listLocal();
    await this.#retentionPhase(segments, topic, options, report);
    report.floor = this.#state.floor;
    report.pending =
      segments.filter((s) =>
        s.sealed && getSegment(this.#state, this.#state.generation, s.start) === undefined
      ).length + segmentsOf(this.#state).filter((r) => r.state === "DANGLING").length;
    if (this.#journal.size > COMPACT_BYTES) await this.compact();
    this.#lastPass = report;
    return report;
  }

  /** Rewrites the journal as a snapshot of the current state. */
  async compact(): Promise<void> {
    await this.#journal.compact(snapshotEvents(this.#state, this.#now));
  }

  /**
   * A purge restarts a partition's offsets below the floor: the active segment then starts at
   * or below `tiered_up_to_offset`, which never happens otherwise. Bump the generation.
   */
  async #detectPurge(segments: SegmentFiles[]): Promise<void> {
    const active = segments.at(-1);
    if (!active || this.#state.floor < 0n || active.start > this.#state.floor) return;
    const generation = this.#state.generation + 1n;
    this.#log.warn("partition was purged (offsets restarted below the floor): new generation", {
      floor: this.#state.floor,
      active_start: active.start,
      generation,
    });
    await this.#record({ type: "generation", generation, at: this.#now });
  }

  /**
   * Offsets below the first local segment that no journal record covers were deleted by the
   * broker before tierd copied them: record the gap so the floor can pass it, visibly.
   */
  async #recordLosses(segments: SegmentFiles[], report: PartitionPassReport): Promise<void> {
    if (segments.length === 0) return;
    await this.#advanceFloor();
    const firstLocal = segments[0].start;
    const next = this.#state.floor + 1n;
    if (next >= firstLocal) return;
    // The gap ends at the first record that still means something (a copy, or a dangling one
    // that needs its own cleanup first), or at the first local segment.
    const blocker = segmentsOf(this.#state).find((r) =>
      r.start >= next && r.start < firstLocal && !isCleanedDangling(r)
    );
    const lostTo = (blocker?.start ?? firstLocal) - 1n;
    if (lostTo < next) return;
    await this.#record({
      type: "lost_before_upload",
      segment: next,
      generation: this.#state.generation,
      endOffset: lostTo,
      at: this.#now,
    });
    report.lost++;
    this.#env.observer?.lostBeforeUpload?.(1);
    this.#log.warn("offsets deleted by the broker before they were copied", {
      lost_from: next,
      lost_to: lostTo,
    });
  }

  async #copyPhase(segments: SegmentFiles[], report: PartitionPassReport): Promise<void> {
    const format = await this.#formatOf(segments);
    if (!format) return;
    let prevEnd: bigint | undefined;
    for (const seg of segments) {
      if (prevEnd !== undefined) this.#checkChain(prevEnd, seg.start, report);
      if (!seg.sealed || this.#env.signal?.aborted) return;
      const rec = getSegment(this.#state, this.#state.generation, seg.start);
      prevEnd = rec?.meta?.endOffset;
      if (rec && !isCleanedDangling(rec)) {
        // Copied; or copied and since deleted remotely by total retention (still local until the
        // broker's own retention drops it): either way later segments may go on.
        if (rec.state === "COPY_SEGMENT_FINISHED" || rec.deleteCause === "retention") continue;
        if (rec.state === "COPY_SEGMENT_STARTED") {
          // Found at boot mid-copy: the previous run crashed. Clean it up before a new copy.
          await this.#record({
            type: "dangling",
            segment: seg.start,
            generation: rec.generation,
            reason: "copy interrupted (found in COPY_SEGMENT_STARTED)",
            at: this.#now,
          });
        }
        return; // oldest first: later segments wait for this one
      }
      const copied = await this.#copyOne(seg, format, report);
      if (!copied) return;
      prevEnd = copied.endOffset;
    }
  }

  /** Reports (once per partition agent) a hole or overlap between consecutive segments. */
  #checkChain(prevEnd: bigint, nextStart: bigint, report: PartitionPassReport): void {
    if (nextStart === prevEnd + 1n) return;
    report.gaps.push({ afterEnd: prevEnd, nextStart });
    const key = `${prevEnd}:${nextStart}`;
    if (this.#reportedGaps.has(key)) return;
    this.#reportedGaps.add(key);
    this.#log.warn("gap in the broker's segment chain", {
      previous_end_offset: prevEnd,
      next_start_offset: nextStart,
    });
  }

  async #sourceOf(seg: SegmentFiles, format: FormatName): Promise<SegmentSource> {
    const bounds = await readSegmentBounds(seg.logPath, seg.indexPath, format, seg.start);
    const checksum = await hashFile(seg.logPath, bounds.size);
    const meta: SegmentMeta = {
      endOffset: bounds.endOffset,
      startTimestamp: bounds.startTimestamp,
      endTimestamp: bounds.endTimestamp,
      maxTimestamp: bounds.maxTimestamp,
      size: bounds.size,
      indexSize: bounds.indexSize,
      format,
      checksum,
    };
    return {
      logPath: seg.logPath,
      indexPath: seg.indexPath,
      keys: segmentKeys(this.#location(), seg.start),
      meta,
    };
  }

  /** Runs a store operation under the deadline tree with backoff and full jitter. */
  #retrying<T>(
    deadline: Deadline,
    op: (signal: AbortSignal) => Promise<T>,
    cls: OpClass = "housekeeping",
  ): Promise<T> {
    const pacer = this.#env.pacer;
    return withRetry(async (signal) => {
      await pacer?.pace(cls, signal);
      const result = await op(signal);
      pacer?.succeeded(cls);
      return result;
    }, {
      deadline,
      rng: this.#env.rng,
      maxMs: this.#env.config.tiered_storage.upload_loop_backoff_max,
      onThrottle: () => pacer?.throttled(cls),
      onRetry: (err, attempt, delayMs) => {
        // Two failures in a row: the store is not answering; say so now, not when the
        // deadline runs out (a successful copy sets the gauge back to 0).
        if (attempt >= 2) this.#env.observer?.stalled?.(1);
        this.#log.debug("store operation retried", { attempt, delay_ms: delayMs, err });
      },
    });
  }

  #deadline(ms: number): Deadline {
    const d = Deadline.after(ms);
    const outer = this.#env.signal;
    if (outer) {
      if (outer.aborted) d.dispose();
      outer.addEventListener("abort", () => d.dispose(), { once: true });
    }
    return d;
  }

  /** Copies one segment; returns its metadata, or undefined when it could not be copied. */
  async #copyOne(
    seg: SegmentFiles,
    format: FormatName,
    report: PartitionPassReport,
  ): Promise<SegmentMeta | undefined> {
    let src: SegmentSource;
    try {
      src = await this.#sourceOf(seg, format);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined; // broker removed it
      // Unreadable (corrupt): nothing was sent, nothing to clean up. Loud, and retried next pass.
      report.errors.push(`${seg.logPath}: ${(err as Error).message}`);
      this.#log.error("cannot read sealed segment; not copied", { segment: seg.start, err });
      return undefined;
    }
    const generation = this.#state.generation;
    await this.#record({ type: "copy_started", segment: seg.start, generation, at: this.#now });
    const started = performance.now();
    const cfg = this.#env.config.tiered_storage;
    const deadline = this.#deadline(cfg.segment_upload_timeout);
    const uploads: { key: string; uploadId: string }[] = [];
    try {
      const outcome = await this.#retrying(deadline, (signal) =>
        copySegment(this.#env.store, src, {
          partSize: cfg.part_size,
          concurrency: cfg.upload_concurrency,
          pool: this.#env.partPool,
          signal,
          onUploadId: (key, uploadId) => {
            uploads.push({ key, uploadId });
            return this.#record({
              type: "multipart_started",
              segment: seg.start,
              generation,
              key,
              uploadId,
              at: this.#now,
            });
          },
        }), "upload");
      await this.#record(finishedEvent(seg.start, generation, src.meta, this.#now));
      // An attempt that failed while the store was unreachable could not abort its upload,
      // and the journal now names only the last one: abort the earlier ones here.
      await this.#abortStale(seg.start, uploads.slice(0, -1));
      const seconds = (performance.now() - started) / 1000;
      if (outcome === "adopted") report.adopted++;
      else report.copied++;
      this.#env.observer?.upload?.(
        outcome === "adopted" ? "adopted" : "ok",
        seconds,
        src.meta.size,
      );
      // The stall gauge follows each copy as it ends: a pass under an outage can run for
      // several upload deadlines, far too late for the pass's own summary.
      this.#env.observer?.stalled?.(0);
      this.#log.info(outcome === "adopted" ? "segment already in store" : "segment copied", {
        segment: seg.start,
        end_offset: src.meta.endOffset,
        bytes: src.meta.size,
        key: src.keys.log,
        seconds: Number(seconds.toFixed(3)),
      });
      return src.meta;
    } catch (err) {
      report.failed++;
      if (classify(err) === "retry") {
        report.storeUnreachable = true;
        this.#env.observer?.stalled?.(1);
      }
      report.errors.push(`${src.keys.log}: ${(err as Error).message}`);
      this.#env.observer?.upload?.("failed", (performance.now() - started) / 1000, 0);
      await this.#record({
        type: "dangling",
        segment: seg.start,
        generation,
        reason: String((err as Error).message).slice(0, 500),
        at: this.#now,
      });
      this.#log.warn("segment copy failed; dangling until cleaned up", {
        segment: seg.start,
        key: src.keys.log,
        err,
      });
      return undefined;
    } finally {
      deadline.dispose();
    }
  }

  /** Aborts multipart uploads of failed attempts; a failure only leaves them to the sweep. */
  async #abortStale(
    segment: bigint,
    uploads: { key: string; uploadId: string }[],
  ): Promise<void> {
    if (uploads.length === 0) return;
    const deadline = this.#deadline(this.#env.config.tiered_storage.segment_upload_timeout);
    try {
      for (const u of uploads) {
        await this.#retrying(
          deadline,
          (signal) => this.#env.store.abortMultipart(u.key, u.uploadId, { signal }),
        );
      }
    } catch (err) {
      this.#log.warn("could not abort the upload of a failed copy attempt", { segment, err });
    } finally {
      deadline.dispose();
    }
  }

  /**
   * Cleans every DANGLING segment (DESIGN §5): abort its journaled multipart upload, adopt a
   * complete matching object, otherwise delete what is under its keys. Returns how many ended.
   */
  async #cleanupPhase(segments: SegmentFiles[], report: PartitionPassReport): Promise<number> {
    let ended = 0;
    const format = await this.#formatOf(segments);
    for (const [generation] of this.#state.segments) {
      for (const rec of segmentsOf(this.#state, generation)) {
        if (rec.state !== "DANGLING" || this.#env.signal?.aborted) continue;
        try {
          if (await this.#cleanOne(rec, segments, format)) report.adopted++;
          else report.cleaned++;
          ended++;
        } catch (err) {
          if (classify(err) === "retry") report.storeUnreachable = true;
          report.errors.push(`cleanup of segment ${rec.start}: ${(err as Error).message}`);
          this.#log.warn("dangling cleanup failed; retried next pass", { segment: rec.start, err });
          const now = getSegment(this.#state, rec.generation, rec.start);
          if (now?.state === "DELETE_SEGMENT_STARTED") {
            await this.#record({
              type: "dangling",
              segment: rec.start,
              generation: rec.generation,
              reason: `cleanup failed: ${(err as Error).message}`.slice(0, 500),
              at: this.#now,
            });
          }
        }
      }
    }
    return ended;
  }

  /** Returns true when the remote copy was adopted, false when it was deleted. */
  async #cleanOne(
    rec: SegmentRecord,
    segments: SegmentFiles[],
    format: FormatName | undefined,
  ): Promise<boolean> {
    const store = this.#env.store;
    const keys = segmentKeys(this.#location(rec.generation), rec.start);
    const deadline = this.#deadline(this.#env.config.tiered_storage.segment_upload_timeout);
    try {
      if (rec.uploadId && rec.multipartKey) {
        await this.#retrying(
          deadline,
          (signal) => store.abortMultipart(rec.multipartKey!, rec.uploadId!, { signal }),
        );
      }
      // A crash between the store creating an upload and the journal recording its id leaves
      // an upload nobody knows: abort whatever is still open under the key (no copy of this
      // segment runs while it is DANGLING, so nothing live is cut off).
      const open = await this.#retrying(
        deadline,
        (signal) => store.listMultipartUploads(keys.log, { signal }),
      );
      for (const u of open.filter((u) => u.key === keys.log)) {
        await this.#retrying(
          deadline,
          (signal) => store.abortMultipart(u.key, u.uploadId, { signal }),
        );
      }
      const local = segments.find((s) => s.start === rec.start);
      if (local && format && rec.generation === this.#state.generation) {
        const src = await this.#sourceOf(local, format).catch(() => undefined);
        if (src) {
          const matches = await this.#retrying(
            deadline,
            (signal) => verifyCopy(store, src, undefined, signal),
          ).then(() => true, (err) => {
            // A store fault leaves it unknown: try again next pass. An object that describes
            // another segment (CopyMismatchError) is not ours to adopt: it is deleted below.
            if (!(err instanceof CopyMismatchError) && classify(err) === "retry") throw err;
            return false;
          });
          if (matches) {
            await this.#record(finishedEvent(rec.start, rec.generation, src.meta, this.#now));
            this.#log.info("dangling segment adopted: the store holds a complete copy", {
              segment: rec.start,
              key: keys.log,
            });
            return true;
          }
        }
      }
      await this.#record({
        type: "delete_started",
        segment: rec.start,
        generation: rec.generation,
        cause: "dangling",
        at: this.#now,
      });
      const failures = await this.#retrying(
        deadline,
        (signal) => store.deleteMany([keys.log, keys.index], { signal }),
      );
      if (failures.length > 0) throw failures[0].error;
      await this.#record({
        type: "delete_finished",
        segment: rec.start,
        generation: rec.generation,
        at: this.#now,
      });
      this.#log.info("dangling segment cleaned up", { segment: rec.start, key: keys.log });
      return false;
    } finally {
      deadline.dispose();
    }
  }

  async #advanceFloor(): Promise<void> {
    const floor = computeFloor(
      segmentsOf(this.#state).map((r) => ({
        start: r.start,
        endOffset: r.meta?.endOffset ?? r.lostEndOffset,
        copied: r.meta !== undefined &&
          (r.state === "COPY_SEGMENT_FINISHED" || r.deleteCause === "retention"),
        lost: r.state === "LOST_BEFORE_UPLOAD",
      })),
      this.#state.floor,
    );
    if (floor > this.#state.floor) {
      await this.#record({
        type: "floor",
        generation: this.#state.generation,
        tieredUpTo: floor,
        at: this.#now,
      });
      this.#log.debug("floor advanced", { tiered_up_to_offset: floor });
    }
  }

  /**
   * Evicts a prefix of verified, sealed segments under the floor while local retention is
   * exceeded (DESIGN §6): kept index copy and marker first (fsynced), then the broker files,
   * then the journal records what is actually gone.
   */
  async #evictPhase(
    segments: SegmentFiles[],
    topic: TopicConfig,
    report: PartitionPassReport,
  ): Promise<void> {
    const generation = this.#state.generation;
    // Finish evictions a crash or the broker left half done: files gone, not yet recorded.
    const present = new Set(segments.map((s) => s.start));
    for (const r of segmentsOf(this.#state)) {
      if (r.state === "COPY_SEGMENT_FINISHED" && !r.evicted && !present.has(r.start)) {
        await this.#ensureMarker(r);
        // A crash between unlinking the .log and the .index leaves the .index behind.
        await unlinkIfPresent(join(this.dir, `${segmentStem(r.start)}.index`));
        await this.#record({ type: "evicted", segment: r.start, generation, at: this.#now });
        report.evicted++;
      }
    }
    const candidates = segments.map((s) => {
      const r = getSegment(this.#state, generation, s.start);
      const copied = r?.state === "COPY_SEGMENT_FINISHED";
      if (copied && r.meta && r.meta.size !== s.logSize) {
        // A sealed segment never changes; one that did (truncated behind our back) is not the
        // segment in the store, so it is never evicted, and said so on every pass.
        report.errors.push(
          `${s.logPath}: ${s.logSize} bytes, but its verified copy has ${r.meta.size}: ` +
            "changed after it was copied; not evicted",
        );
        this.#log.error("local segment changed after its copy was verified; not evicting it", {
          segment: s.start,
          path: s.logPath,
          local_bytes: s.logSize,
          copied_bytes: r.meta.size,
        });
      }
      return {
        start: s.start,
        endOffset: r?.meta?.endOffset ?? s.start - 1n,
        size: s.logSize,
        maxTimestamp: r?.meta?.maxTimestamp ?? 0n,
        copied: copied && r.meta?.size === s.logSize,
        sealed: s.sealed,
      };
    });
    const retention = { ageMs: topic.local_retention_age, sizeBytes: topic.local_retention_size };
    const chosen = chooseEvictions(candidates, this.#state.floor, retention, this.#now);
    // Under pressure: local retention wants more evicted than the floor allows yet.
    const wanted = chooseEvictions(
      candidates.map((c) => ({ ...c, copied: true })),
      1n << 64n,
      retention,
      this.#now,
    );
    report.pressured = wanted.length > chosen.length;
    if (chosen.length === 0 || this.#env.signal?.aborted) return;

    // Re-verify each copy in the store right before its local files go.
    const ready: SegmentFiles[] = [];
    for (const c of chosen) {
      const seg = segments.find((s) => s.start === c.start)!;
      const rec = getSegment(this.#state, generation, c.start)!;
      const deadline = this.#deadline(this.#env.config.tiered_storage.segment_upload_timeout);
      try {
        // The local file must be the segment that was copied: a purge that regrew past the
        // floor while the agent was down leaves other bytes under the same name and size.
        if (hex128(await hashFile(seg.logPath)) !== rec.meta!.checksum) {
          throw new SegmentChangedError(
            seg.logPath,
            `contents differ from the verified copy (xxh3-128 ${rec.meta!.checksum}); not evicted`,
          );
        }
        await this.#retrying(deadline, (signal) =>
          verifyCopy(
            this.#env.store,
            {
              logPath: seg.logPath,
              indexPath: seg.indexPath,
              keys: segmentKeys(this.#location(), c.start),
              meta: recordMeta(rec, this.#format!),
            },
            undefined,
            signal,
          ));
        await this.#ensureMarker(rec, seg.indexPath);
        ready.push(seg);
      } catch (err) {
        report.errors.push(`eviction of segment ${c.start}: ${(err as Error).message}`);
        if (err instanceof SegmentChangedError) {
          this.#log.error("local segment changed after its copy was verified; not evicting it", {
            segment: c.start,
            path: seg.logPath,
            err,
          });
          break;
        }
        if (classify(err) === "retry") report.storeUnreachable = true;
        this.#log.warn("not evicting: the remote copy could not be verified", {
          segment: c.start,
          err,
        });
        break; // keep the evicted set a prefix
      } finally {
        deadline.dispose();
      }
    }
    if (ready.length === 0) return;

    if (this.#env.broker) {
      try {
        await this.#env.broker.deleteSegments(this.id, ready.length);
      } catch (err) {
        report.errors.push(`broker DeleteSegments: ${(err as Error).message}`);
        this.#log.warn("broker refused DeleteSegments; segments stay local", { err });
        return;
      }
    } else {
      for (const seg of ready) {
        // .log first: an .index without its .log is ignored (0.8) or removed (0.9) at boot,
        // while a .log without its .index would make 0.8 rebuild a broken index.
        await unlinkIfPresent(seg.logPath);
        await unlinkIfPresent(seg.indexPath);
      }
      await fsyncDir(this.dir);
    }
    // Record only what is actually gone (the broker may keep some for its consumers).
    const after = new Set((await this.#listLocal()).map((s) => s.start));
    for (const seg of ready) {
      if (after.has(seg.start)) continue;
      await unlinkIfPresent(seg.indexPath); // a broker that dropped the .log may leave this
      await this.#record({ type: "evicted", segment: seg.start, generation, at: this.#now });
      report.evicted++;
    }
    if (report.evicted > 0) {
      this.#env.observer?.evicted?.(report.evicted);
      this.#log.info("segments evicted locally", {
        count: report.evicted,
        up_to_offset: this.#state.floor,
      });
    }
  }

  /** Writes the kept index copy (when the broker's is at hand) and the marker, durably. */
  async #ensureMarker(rec: SegmentRecord, brokerIndex?: string): Promise<void> {
    const paths = markerPaths(this.stateDir, rec.start);
    if (brokerIndex) {
      try {
        await keepIndexCopy(brokerIndex, paths.index);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
    }
    const m = rec.meta!;
    await writeMarker(paths.marker, {
      flags: 0,
      startOffset: rec.start,
      endOffset: m.endOffset,
      size: BigInt(m.size),
      indexSize: BigInt(m.indexSize),
      startTimestamp: m.startTimestamp,
      endTimestamp: m.endTimestamp,
      maxTimestamp: m.maxTimestamp,
      incarnation: this.#state.incarnation!,
      generation: rec.generation,
      logChecksum: BigInt("0x" + m.checksum),
    });
  }

  /**
   * Total retention on remote copies (DESIGN §6): oldest first, bounded per pass and per
   * partition, never at or after the lowest stored consumer offset.
   */
  async #retentionPhase(
    segments: SegmentFiles[],
    topic: TopicConfig,
    options: { partitionsInTopic?: number; deleteBudget?: DeleteBudget },
    report: PartitionPassReport,
  ): Promise<void> {
    const records = segmentsOf(this.#state);
    // A journaled deletion finishes even when total retention has since been turned off.
    const started = records.filter((r) =>
      r.state === "DELETE_SEGMENT_STARTED" && r.deleteCause === "retention"
    );
    const unlimited = !Number.isFinite(topic.message_expiry) &&
      !Number.isFinite(topic.max_topic_size);
    if (unlimited && started.length === 0) return;
    const cfg = this.#env.config.tiered_storage;
    const budget = options.deleteBudget ?? { remaining: cfg.delete_batch_per_pass };
    const generation = this.#state.generation;
    const pending = started.length;
    const barrier = await readConsumerBarrier(this.dir);
    if (barrier.bad.length > 0) {
      // Nothing is deleted, not even a deletion already started: the barrier is unknown.
      this.#log.warn("unreadable consumer offset file: remote deletion paused", {
        files: barrier.bad,
      });
      return;
    }
    // Resume deletions a crash or a store failure interrupted (unless a consumer has since
    // moved back onto them), then choose new ones.
    const resume = started.filter((r) => deletableUnder(barrier, r.meta!.endOffset));
    const remote = records.filter((r) => r.state === "COPY_SEGMENT_FINISHED" && r.meta);
    const totalBytes = remote.reduce((n, r) => n + (r.evicted ? r.meta!.size : 0), 0) +
      segments.reduce((n, s) => n + s.logSize, 0);
    const share = topic.max_topic_size / Math.max(1, options.partitionsInTopic ?? 1);
    const limit = Math.max(
      0,
      Math.min(budget.remaining, cfg.delete_pending_per_partition - pending),
    );
    const chosen = chooseRetentionDeletes(
      remote.map((r) => ({
        start: r.start,
        endOffset: r.meta!.endOffset,
        size: r.meta!.size,
        maxTimestamp: r.meta!.maxTimestamp,
        evicted: r.evicted,
      })),
      totalBytes,
      { expiryMs: topic.message_expiry, maxBytes: share },
      this.#now,
      (end) => deletableUnder(barrier, end),
      limit,
    );
    const toDelete = [...resume, ...chosen.map((c) => ({ start: c.start, generation }))];
    for (const r of toDelete) {
      if (budget.remaining <= 0 || this.#env.signal?.aborted) break;
      const keys = segmentKeys(this.#location(r.generation), r.start);
      const deadline = this.#deadline(cfg.segment_upload_timeout);
      try {
        // Journaled only when its turn comes: a segment the budget leaves for a later pass is
        // chosen again then, under the barrier of that pass.
        if (getSegment(this.#state, r.generation, r.start)?.state !== "DELETE_SEGMENT_STARTED") {
          await this.#record({
            type: "delete_started",
            segment: r.start,
            generation: r.generation,
            cause: "retention",
            at: this.#now,
          });
        }
        const failures = await this.#retrying(
          deadline,
          (signal) => this.#env.store.deleteMany([keys.log, keys.index], { signal }),
        );
        if (failures.length > 0) throw failures[0].error;
        budget.remaining -= 2;
        await this.#record({
          type: "delete_finished",
          segment: r.start,
          generation: r.generation,
          at: this.#now,
        });
        await unlinkIfPresent(markerPaths(this.stateDir, r.start).marker);
        await unlinkIfPresent(markerPaths(this.stateDir, r.start).index);
        report.remoteDeleted++;
      } catch (err) {
        if (classify(err) === "retry") report.storeUnreachable = true;
        report.errors.push(`retention delete of segment ${r.start}: ${(err as Error).message}`);
        this.#log.warn("remote retention delete failed; retried next pass", {
          segment: r.start,
          err,
        });
        break;
      } finally {
        deadline.dispose();
      }
    }
    if (report.remoteDeleted > 0) {
      this.#env.observer?.remoteDeleted?.(report.remoteDeleted);
      this.#log.info("remote segments deleted by total retention", {
        count: report.remoteDeleted,
      });
    }
  }

  /** Closes the journal. */
  async close(): Promise<void> {
    await this.#journal.close();
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
    errors: [],
    storeUnreachable: false,
  };
}

async function unlinkIfPresent(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

function isCleanedDangling(r: SegmentRecord): boolean {
  return r.state === "DELETE_SEGMENT_FINISHED" && r.deleteCause === "dangling";
}

/** The object metadata a finished record describes. */
function recordMeta(r: SegmentRecord, format: FormatName): SegmentMeta {
  const m = r.meta!;
  return { ...m, format, checksum: BigInt("0x" + m.checksum) };
}

function finishedEvent(
  segment: bigint,
  generation: bigint,
  m: SegmentMeta,
  at: number,
): JournalEvent {
  return {
    type: "copy_finished",
    segment,
    generation,
    endOffset: m.endOffset,
    size: m.size,
    indexSize: m.indexSize,
    startTimestamp: m.startTimestamp,
    endTimestamp: m.endTimestamp,
    maxTimestamp: m.maxTimestamp,
    checksum: hex128(m.checksum),
    at,
  };
}
