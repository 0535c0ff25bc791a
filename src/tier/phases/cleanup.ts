// The dangling-cleanup phase: every failed or interrupted copy is cleaned before a fresh copy
// of the segment may start (keys are deterministic, so cleanup must never race a newer copy).
// It aborts the multipart upload the journal names and any other open one under the key, adopts
// a complete object that matches the local segment (or, the local files being gone, a complete
// object at all: it may be the only copy), and otherwise deletes what is there.
import { type ObjectStore, StoreError } from "../../../providers/types.ts";
import { fromUserMetadata, type ObjectFacts } from "../../layout/object_metadata.ts";
import type { FormatName } from "../../format/types.ts";
import type { SegmentFiles } from "../../partition/segments.ts";
import { copyFinishedEvent } from "../../state/events.ts";
import { getSegment, type SegmentRecord, segmentsOf } from "../../state/segment_state.ts";
import { CopyMismatchError, SegmentChangedError, segmentSource } from "../copy_segment.ts";
import { proveCopy } from "../prove_copy.ts";
import type { PartitionLedger } from "../partition_ledger.ts";
import { type PhaseContext, stopping, withSegmentDeadline } from "../phase.ts";
import { noProblems, noteFailure, onSegment, type Problems } from "../problem.ts";

/** What the cleanup phase did. */
export interface CleanupOutcome extends Problems {
  /** Dangling copies whose objects were deleted. */
  cleaned: number;
  /** Dangling copies found complete and matching in the store. */
  adopted: number;
}

/** Inputs of the cleanup phase. */
export interface CleanupInput {
  segments: readonly SegmentFiles[];
  /** The partition's format; without it a copy cannot be adopted, only deleted. */
  format: FormatName | undefined;
}

/** Cleans every DANGLING segment of every generation. */
export async function cleanupPhase(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  input: CleanupInput,
): Promise<CleanupOutcome> {
  const out: CleanupOutcome = { ...noProblems(), cleaned: 0, adopted: 0 };
  for (const [generation] of ledger.state.segments) {
    for (const rec of segmentsOf(ledger.state, generation)) {
      if (rec.state !== "DANGLING" || stopping(ctx)) continue;
      try {
        if (await cleanOne(ctx, ledger, rec, input)) out.adopted++;
        else out.cleaned++;
      } catch (err) {
        noteFailure(out, onSegment("cleanup", rec.start), err);
        ctx.log.warn("dangling cleanup failed; retried next pass", { segment: rec.start, err });
        const now = getSegment(ledger.state, rec.generation, rec.start);
        if (now?.state === "DELETE_SEGMENT_STARTED") {
          await ledger.record({
            type: "dangling",
            segment: rec.start,
            generation: rec.generation,
            reason: `cleanup failed: ${(err as Error).message}`.slice(0, 500),
            at: ctx.clock.now(),
          });
        }
      }
    }
  }
  return out;
}

/** Returns true when the remote copy was adopted, false when it was deleted. */
function cleanOne(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  rec: SegmentRecord,
  input: CleanupInput,
): Promise<boolean> {
  const keys = ledger.keys(rec.start, rec.generation);
  return withSegmentDeadline(ctx, "housekeeping", async (store) => {
    await abortOpenUploads(store, rec, keys.log);
    const facts = await adoptableCopy(ctx, ledger, rec, input, store);
    if (facts) {
      await ledger.record(copyFinishedEvent(rec.start, rec.generation, facts, ctx.clock.now()));
      ctx.log.info("dangling segment adopted: the store holds a complete copy", {
        segment: rec.start,
        key: keys.log,
      });
      return true;
    }
    await ledger.record({
      type: "delete_started",
      segment: rec.start,
      generation: rec.generation,
      cause: "dangling",
      at: ctx.clock.now(),
    });
    const failures = await store.deleteMany([keys.log, keys.index]);
    if (failures.length > 0) throw failures[0].error;
    await ledger.record({
      type: "delete_finished",
      segment: rec.start,
      generation: rec.generation,
      at: ctx.clock.now(),
    });
    ctx.log.info("dangling segment cleaned up", { segment: rec.start, key: keys.log });
    return false;
  });
}

/**
 * Aborts the journaled multipart upload, then whatever else is open under the key: a crash
 * between the store creating an upload and the journal recording its id leaves an upload nobody
 * knows (no copy of this segment runs while it is DANGLING, so nothing live is cut off).
 */
async function abortOpenUploads(
  store: ObjectStore,
  rec: SegmentRecord,
  logKey: string,
): Promise<void> {
  if (rec.uploadId && rec.multipartKey) {
    await store.abortMultipart(rec.multipartKey, rec.uploadId);
  }
  const open = await store.listMultipartUploads(logKey);
  for (const u of open.filter((u) => u.key === logKey)) {
    await store.abortMultipart(u.key, u.uploadId);
  }
}

/**
 * The facts of a complete object under the segment's keys that holds its local bytes (metadata
 * by HEAD, bytes by the store's checksum or a read-back), or undefined when there is none to
 * adopt (another generation, nothing there, or other bytes). With the local files gone, the
 * object may be the only copy there is (a journal cut short after `copy_started`, its
 * `copy_finished` and `evicted` lost): a complete one whose metadata holds together is adopted,
 * as a rebuild from the bucket would.
 * @throws store faults and anything unexpected: an unverified copy is never deleted on a guess
 */
async function adoptableCopy(
  ctx: PhaseContext,
  ledger: PartitionLedger,
  rec: SegmentRecord,
  input: CleanupInput,
  store: ObjectStore,
): Promise<ObjectFacts | undefined> {
  if (rec.generation !== ledger.state.generation) return undefined;
  const local = input.segments.find((s) => s.start === rec.start);
  if (!local) return await onlyCopy(store, ledger.keys(rec.start, rec.generation));
  if (!input.format) return undefined;
  const src = await segmentSource(
    local,
    input.format,
    ledger.keys(rec.start, rec.generation),
    ctx.config.tiered_storage.part_size,
  ).catch(() => undefined);
  if (!src) return undefined;
  try {
    await proveCopy(ctx, src);
    return src.meta;
  } catch (err) {
    if (err instanceof CopyMismatchError || err instanceof SegmentChangedError) return undefined;
    if (err instanceof StoreError && err.kind === "NotFound") return undefined;
    throw err;
  }
}

/**
 * The facts of the segment's objects when they form a complete copy on their own: the `.log`'s
 * metadata decodes and its size agrees, and the `.index` is there with the size it names.
 */
async function onlyCopy(
  store: ObjectStore,
  keys: { log: string; index: string },
): Promise<ObjectFacts | undefined> {
  const log = await headIfPresent(store, keys.log);
  if (!log) return undefined;
  let facts: ObjectFacts;
  try {
    facts = fromUserMetadata(keys.log, log.metadata);
  } catch {
    return undefined; // not a copy tierd finished: nothing to keep
  }
  if (log.size !== facts.size) return undefined;
  const index = await headIfPresent(store, keys.index);
  return index?.size === facts.indexSize ? facts : undefined;
}

async function headIfPresent(store: ObjectStore, key: string) {
  try {
    return await store.head(key);
  } catch (err) {
    if (err instanceof StoreError && err.kind === "NotFound") return undefined;
    throw err;
  }
}
