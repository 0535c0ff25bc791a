// A partition's durable state: its journal, the state folded from it, and the `.remote` markers
// and kept index copies beside it. Every change is validated, journaled (fsynced) and only then
// applied, so the in-memory state never runs ahead of what a restart would replay.
import { readFile, rename, unlink } from "node:fs/promises";
import type { KeySpace } from "../layout/key_space.ts";
import { type RemoteLocation, segmentKeys } from "../layout/object_keys.ts";
import { type PartitionId, partitionLabel } from "../layout/partition.ts";
import { markerOf } from "../layout/segment_facts.ts";
import { journalPath, markerPaths, partitionStateDir } from "../layout/state_paths.ts";
import type { JournalEvent } from "../state/events.ts";
import {
  Journal,
  JournalDamaged,
  type JournalFingerprint,
  journalFingerprint,
  type TornTailInfo,
} from "../state/journal.ts";
import { type CleanStopEntry, markerNamesDigest } from "../state/clean_stop.ts";
import { writeMarker } from "../state/marker.ts";
import { fsyncDir, writeFileDurable } from "../base/durable.ts";
import { keepIndexCopy, listMarkerNames } from "../state/marker_dir.ts";
import {
  applyEvent,
  checkEvent,
  fold,
  JournalStateError,
  type PartitionState,
  type SegmentRecord,
  snapshotEvents,
} from "../state/segment_state.ts";

export type { KeySpace } from "../layout/key_space.ts";

/** The journal, folded state and markers of one partition. */
export class PartitionLedger {
  readonly id: PartitionId;
  readonly label: string;
  /** The partition's state directory (journal, markers, index copies). */
  readonly stateDir: string;
  /** The journal as it was replayed at open (a torn tail already cut off). */
  readonly openedJournal: JournalFingerprint;
  readonly #keySpace: KeySpace;
  readonly #journal: Journal;
  #state: PartitionState;

  private constructor(
    id: PartitionId,
    stateDir: string,
    keySpace: KeySpace,
    journal: Journal,
    state: PartitionState,
    openedJournal: JournalFingerprint,
  ) {
    this.id = { stream: id.stream, topic: id.topic, partition: id.partition };
    this.label = partitionLabel(id);
    this.stateDir = stateDir;
    this.openedJournal = openedJournal;
    this.#keySpace = keySpace;
    this.#journal = journal;
    this.#state = state;
  }

  /**
   * Opens (replaying) the journal of partition `id` under `stateRoot`.
   * @param options.onTornTail called when an incomplete last record was cut off
   */
  static async open(
    stateRoot: string,
    id: PartitionId,
    keySpace: KeySpace,
    options: { onTornTail?: (t: TornTailInfo) => void } = {},
  ): Promise<PartitionLedger> {
    const dir = partitionStateDir(stateRoot, id);
    const path = journalPath(dir);
    const { journal, events, positions, fingerprint } = await Journal.open(path, options);
    let state: PartitionState;
    try {
      state = fold(events);
    } catch (err) {
      await journal.close();
      if (!(err instanceof JournalStateError)) throw err;
      // Every record checks out, yet together they say something impossible (a record written
      // twice, say): damage, like a bad checksum.
      const at = events.indexOf(err.event);
      throw new JournalDamaged(path, positions[at] ?? 0, `record ${at + 1}: ${err.message}`);
    }
    return new PartitionLedger(id, dir, keySpace, journal, state, fingerprint);
  }

  /** The folded state (read-only; replaced, never mutated, by {@linkcode record}). */
  get state(): PartitionState {
    return this.#state;
  }

  /** Bytes of the journal file. */
  get journalSize(): number {
    return this.#journal.size;
  }

  /** Validates, journals (durably) and applies events, in that order. */
  async record(...events: JournalEvent[]): Promise<void> {
    let next = this.#state;
    for (const e of events) {
      checkEvent(next, e);
      next = applyEvent(next, e);
    }
    await this.#journal.append(...events);
    this.#state = next;
  }

  /** Where the objects of a generation (the current one by default) live. */
  location(generation: bigint = this.#state.generation): RemoteLocation {
    const incarnation = this.#state.incarnation;
    if (incarnation === undefined) {
      throw new Error(`partition ${this.label}: no incarnation recorded yet`);
    }
    return { ...this.id, ...this.#keySpace, incarnation, generation };
  }

  /** Object keys of segment `start` of a generation (the current one by default). */
  keys(start: bigint, generation?: bigint): { log: string; index: string } {
    return segmentKeys(this.location(generation), start);
  }

  /**
   * Writes a finished segment's marker durably, after its kept index copy when the broker's
   * `.index` is at hand (a vanished one is skipped: the marker is what matters).
   */
  async writeMarker(rec: SegmentRecord, brokerIndex?: string): Promise<void> {
    const paths = markerPaths(this.stateDir, rec.start);
    if (brokerIndex) {
      try {
        await keepIndexCopy(brokerIndex, paths.index);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
    }
    if (!rec.meta) throw new Error(`segment ${rec.start} has no verified copy to mark`);
    await writeMarker(
      paths.marker,
      markerOf(rec.start, rec.meta, {
        incarnation: this.location().incarnation,
        generation: rec.generation,
      }),
    );
  }

  /** Writes a segment's kept index copy durably (from bytes fetched from the store). */
  async writeIndexCopy(start: bigint, bytes: Uint8Array): Promise<void> {
    await writeFileDurable(markerPaths(this.stateDir, start).index, bytes);
  }

  /** Removes a segment's marker and kept index copy (its remote copy is gone). */
  async removeMarker(start: bigint): Promise<void> {
    const paths = markerPaths(this.stateDir, start);
    await unlinkIfPresent(paths.marker);
    await unlinkIfPresent(paths.index);
  }

  /** Rewrites the journal as a snapshot of the current state. */
  async compact(at: number): Promise<void> {
    await this.#journal.compact(snapshotEvents(this.#state, at));
  }

  /** Closes the journal. */
  async close(): Promise<void> {
    await this.#journal.close();
  }

  /**
   * What the clean-stop record keeps of this partition: the journal's and the marker names'
   * fingerprints as they are now. Call it once the journal is closed; undefined for a partition
   * with no incarnation yet.
   */
  async cleanStopEntry(): Promise<CleanStopEntry | undefined> {
    const s = this.#state;
    if (s.incarnation === undefined) return undefined;
    const journal = journalFingerprint(await readFile(journalPath(this.stateDir)));
    const names = await listMarkerNames(this.stateDir);
    return {
      ...this.id,
      incarnation: s.incarnation,
      generation: s.generation,
      journalBytes: journal.bytes,
      journalDigest: journal.digest,
      markers: names.length,
      markerNamesDigest: markerNamesDigest(names),
    };
  }
}

/**
 * Moves a partition's journal that cannot be replayed out of the way (kept for inspection,
 * never deleted), so a fresh one can be rebuilt in its place.
 * @returns where it went
 */
export async function setJournalAside(
  stateRoot: string,
  id: PartitionId,
  at: number,
): Promise<string> {
  const dir = partitionStateDir(stateRoot, id);
  const path = journalPath(dir);
  const kept = `${path}.damaged-${at}`;
  await rename(path, kept);
  await fsyncDir(dir);
  return kept;
}

/** Unlinks a file; one that is already gone is not an error. */
export async function unlinkIfPresent(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}
