// Tiers one partition: keeps its journal, copies sealed segments oldest first, cleans up
// dangling copies and advances the floor (DESIGN §5). One pass at a time per partition.
import { join } from "node:path";
import type { ObjectStore } from "../../providers/types.ts";
import type { Config } from "../config/schema.ts";
import { readSegmentBounds } from "../format/bounds.ts";
import { detectFormat } from "../format/detect.ts";
import type { FormatName } from "../format/types.ts";
import type { Logger } from "../log.ts";
import type { DiscoveredPartition } from "../partition/discover.ts";
import { newIncarnation } from "../partition/incarnation.ts";
import { type PartitionId, partitionLabel, partitionRelPath } from "../partition/layout.ts";
import { listSegments, type SegmentFiles } from "../partition/segments.ts";
import type { JournalEvent } from "../state/events.ts";
import { Journal } from "../state/journal.ts";
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
import { copySegment, type SegmentSource, verifyCopy } from "./copy_segment.ts";
import { hashFile } from "./file_hash.ts";
import { computeFloor } from "./floor.ts";
import { type RemoteLocation, segmentKeys } from "./keys.ts";
import { hex128 } from "../hash.ts";
import type { SegmentMeta } from "./metadata.ts";

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
  /** Sealed segments still waiting for a copy after this pass. */
  pending: number;
  floor: bigint;
  /** Holes between consecutive local segments (reported, never hidden). */
  gaps: { afterEnd: bigint; nextStart: bigint }[];
  errors: string[];
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
}

/** The journal, state and copy logic of one partition. */
export class PartitionAgent {
  readonly id: PartitionId;
  readonly label: string;
  #dir: string;
  #journal: Journal;
  #state: PartitionState;
  #env: TierEnv;
  #log: Logger;
  #format?: FormatName;
  #reportedGaps = new Set<string>();

  private constructor(
    env: TierEnv,
    part: DiscoveredPartition,
    journal: Journal,
    state: PartitionState,
  ) {
    this.#env = env;
    this.id = { stream: part.stream, topic: part.topic, partition: part.partition };
    this.label = partitionLabel(this.id);
    this.#dir = part.dir;
    this.#journal = journal;
    this.#state = state;
    this.#log = env.logger.child({ partition: this.label });
  }

  /** Opens (replaying) the partition's journal and records its incarnation. */
  static async open(env: TierEnv, part: DiscoveredPartition): Promise<PartitionAgent> {
    const label = partitionLabel(part);
    const path = join(env.config.agent.state_dir, partitionRelPath(part), "journal");
    const { journal, events } = await Journal.open(path, {
      onTornTail: (t) =>
        env.logger.warn("journal torn tail truncated", {
          partition: label,
          path: t.path,
          valid_bytes: t.validBytes,
          dropped_bytes: t.droppedBytes,
          reason: t.reason,
        }),
    });
    const agent = new PartitionAgent(env, part, journal, fold(events));
    await agent.#checkIncarnation(part);
    return agent;
  }

  /** The partition's folded state (read-only). */
  get state(): PartitionState {
    return this.#state;
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
    if (configured !== "auto") return configured;
    if (this.#format) return this.#format;
    for (const s of segments) {
      if (s.logSize === 0) continue;
      this.#format = await detectFormat(s.logPath, s.indexPath);
      if (this.#format) return this.#format;
    }
    return undefined;
  }

  /** One full pass: copy sealed segments, clean dangling ones, copy again what they freed. */
  async pass(): Promise<PartitionPassReport> {
    const report: PartitionPassReport = {
      partition: this.label,
      copied: 0,
      adopted: 0,
      failed: 0,
      cleaned: 0,
      lost: 0,
      pending: 0,
      floor: this.#state.floor,
      gaps: [],
      errors: [],
    };
    const segments = await listSegments(this.#dir, {
      now: this.#now,
      quiescenceMs: this.#env.config.agent.seal_quiescence,
    });
    await this.#recordLosses(segments, report);
    await this.#copyPhase(segments, report);
    const cleaned = await this.#cleanupPhase(segments, report);
    if (cleaned > 0) await this.#copyPhase(segments, report);
    await this.#advanceFloor();
    report.floor = this.#state.floor;
    report.pending =
      segments.filter((s) =>
        s.sealed && getSegment(this.#state, this.#state.generation, s.start)?.state !==
          "COPY_SEGMENT_FINISHED"
      ).length;
    if (this.#journal.size > COMPACT_BYTES) await this.compact();
    return report;
  }

  /** Rewrites the journal as a snapshot of the current state. */
  async compact(): Promise<void> {
    await this.#journal.compact(snapshotEvents(this.#state, this.#now));
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
    const blocking = segmentsOf(this.#state).filter((r) =>
      r.start >= next && r.start < firstLocal && !isCleanedDangling(r)
    );
    if (blocking.length > 0) return; // records there still need their own resolution
    const lostFrom = segmentsOf(this.#state).find((r) => r.start === next && isCleanedDangling(r))
      ?.start ?? next;
    await this.#record({
      type: "lost_before_upload",
      segment: lostFrom,
      generation: this.#state.generation,
      endOffset: firstLocal - 1n,
      at: this.#now,
    });
    report.lost++;
    this.#log.warn("segment deleted by the broker before it was copied", {
      lost_from: lostFrom,
      lost_to: firstLocal - 1n,
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
        if (rec.state === "COPY_SEGMENT_FINISHED") continue;
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
      // Unreadable (corrupt, or vanished under us): nothing was sent, nothing to clean up.
      report.errors.push(`${seg.logPath}: ${(err as Error).message}`);
      this.#log.error("cannot read sealed segment; not copied", { segment: seg.start, err });
      return undefined;
    }
    const generation = this.#state.generation;
    await this.#record({ type: "copy_started", segment: seg.start, generation, at: this.#now });
    const started = performance.now();
    try {
      const cfg = this.#env.config.tiered_storage;
      const outcome = await copySegment(this.#env.store, src, {
        partSize: cfg.part_size,
        concurrency: cfg.upload_concurrency,
        signal: this.#env.signal,
        onUploadId: (key, uploadId) =>
          this.#record({
            type: "multipart_started",
            segment: seg.start,
            generation,
            key,
            uploadId,
            at: this.#now,
          }),
      });
      await this.#record(finishedEvent(seg.start, generation, src.meta, this.#now));
      if (outcome === "adopted") report.adopted++;
      else report.copied++;
      this.#log.info(outcome === "adopted" ? "segment already in store" : "segment copied", {
        segment: seg.start,
        end_offset: src.meta.endOffset,
        bytes: src.meta.size,
        key: src.keys.log,
        seconds: Number(((performance.now() - started) / 1000).toFixed(3)),
      });
      return src.meta;
    } catch (err) {
      report.failed++;
      report.errors.push(`${src.keys.log}: ${(err as Error).message}`);
      await this.#record({
        type: "dangling",
        segment: seg.start,
        generation,
        reason: (err as Error).message.slice(0, 500),
        at: this.#now,
      });
      this.#log.warn("segment copy failed; dangling until cleaned up", {
        segment: seg.start,
        key: src.keys.log,
        err,
      });
      return undefined;
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
          report.errors.push(`cleanup of segment ${rec.start}: ${(err as Error).message}`);
          this.#log.warn("dangling cleanup failed; retried next pass", { segment: rec.start, err });
          if (
            getSegment(this.#state, rec.generation, rec.start)?.state === "DELETE_SEGMENT_STARTED"
          ) {
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
    if (rec.uploadId && rec.multipartKey) {
      await store.abortMultipart(rec.multipartKey, rec.uploadId, { signal: this.#env.signal });
    }
    const local = segments.find((s) => s.start === rec.start);
    if (local && format && rec.generation === this.#state.generation) {
      const src = await this.#sourceOf(local, format).catch(() => undefined);
      if (src) {
        const matches = await verifyCopy(store, src, undefined, this.#env.signal).then(
          () => true,
          () => false,
        );
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
    const failures = await store.deleteMany([keys.log, keys.index], { signal: this.#env.signal });
    if (failures.length > 0) throw failures[0].error;
    await this.#record({
      type: "delete_finished",
      segment: rec.start,
      generation: rec.generation,
      at: this.#now,
    });
    this.#log.info("dangling segment cleaned up", { segment: rec.start, key: keys.log });
    return false;
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

  /** Closes the journal. */
  async close(): Promise<void> {
    await this.#journal.close();
  }
}

function isCleanedDangling(r: SegmentRecord): boolean {
  return r.state === "DELETE_SEGMENT_FINISHED" && r.deleteCause === "dangling";
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
