// Is the partition the broker has now the one the journal describes? A topic deleted and
// created again under the same ids gets another birth at the broker (`created_at`), but its
// directory may keep the old inode and, on Iggy 0.9, even the old segment files for a few
// milliseconds after both answers (a reconciler removes them later): nothing on disk tells
// the read path yet. The broker's metadata log does — every delete and create appends to it
// before it is answered — so a read looks at that log (one stat), and when it grew since the
// partition was last confirmed, asks the broker when it created the partition. A birth that
// changed while the journal's incarnation and generation did not is a partition the agent has
// not settled yet: the read answers "retry" until it has, never the deleted partition's
// messages. Only brokers with a metadata journal (0.9 on) are asked: 0.8 stamps `created_at`
// anew at every boot, so it proves nothing there — and 0.8 removes a partition's directory
// before it answers the delete, so its directory tells the read path in time.
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { type Clock, systemClock } from "../base/clock.ts";
import type { PartitionId } from "../layout/partition.ts";
import { PartitionRebuilding, UnknownPartition } from "./errors.ts";

/**
 * When the broker created a partition (µs since the epoch); undefined: it has none now. The
 * signal ends the question when the broker takes too long.
 */
export type BirthSource = (id: PartitionId, signal: AbortSignal) => Promise<number | undefined>;

/** The broker's metadata journal (Iggy 0.9 on), relative to its data dir. */
export const METADATA_JOURNAL = "metadata/journal.wal";

/**
 * What a read is allowed to serve from: the journal's incarnation and generation (or none),
 * and the local segment files with their modification times.
 */
export interface BirthSubject {
  /** `"{incarnation}-{generation}"` of the journal state, or undefined without one. */
  journal?: string;
  /** True when the journal has verified copies in the store the read could serve. */
  hasCopies: boolean;
  /** Modification times (ms) of the broker's segment files in the directory. */
  localMtimesMs: readonly number[];
}

interface Confirmed {
  birth: number;
  stamp: string;
  journal?: string;
}

/**
 * How far a file's modification time may trail the moment it was written: the kernel stamps
 * files from a clock that advances once per tick (1-10 ms). A segment file modified earlier
 * than this before the partition's birth was written before the partition existed.
 */
const FILE_CLOCK_SLACK_MS = 50;

/** Partitions' births as last confirmed with the broker, per metadata log size. */
export class PartitionBirths {
  readonly #dataDir: string;
  readonly #ask: BirthSource;
  readonly #timeoutMs: number;
  readonly #clock: Clock;
  readonly #confirmed = new Map<string, Confirmed>();
  /** The question in flight per partition, with the metadata stamp it was asked at. */
  readonly #asking = new Map<string, { stamp: string; birth: Promise<number | undefined> }>();

  /**
   * @param options.timeoutMs how long a question may take before the reads waiting for it
   *   answer "retry" (the read path's `fetch_timeout`); it is then given up, and the next read
   *   asks again
   */
  constructor(
    dataDir: string,
    ask: BirthSource,
    options: { timeoutMs: number; clock?: Clock },
  ) {
    this.#dataDir = dataDir;
    this.#ask = ask;
    this.#timeoutMs = options.timeoutMs;
    this.#clock = options.clock ?? systemClock;
  }

  /**
   * Throws unless the broker's partition is the one `subject` describes.
   * @param label `"{s}/{t}/{p}"`
   * @throws {UnknownPartition} when the broker has no such partition now
   * @throws {PartitionRebuilding} when the broker recreated it and the agent has not settled it,
   *   or the broker cannot be asked after its metadata changed
   */
  async check(id: PartitionId, label: string, subject: BirthSubject): Promise<void> {
    const stamp = await metadataStamp(this.#dataDir);
    if (stamp === undefined) return; // no metadata journal: a 0.8 broker (see above)
    const known = this.#confirmed.get(label);
    if (known && known.stamp === stamp && known.journal === subject.journal) return;
    let birth: number | undefined;
    try {
      birth = await this.#birth(id, label, stamp);
    } catch (err) {
      throw new PartitionRebuilding(
        label,
        "the broker's metadata changed and the broker could not be asked whether this is " +
          `still the partition tierd tiered: ${(err as Error).message}`,
        1,
      );
    }
    if (birth === undefined) {
      // Kept as it was: a partition created again later is compared with the deleted one.
      throw new UnknownPartition(label, "the broker has no such partition now (deleted)");
    }
    if (known && known.birth !== birth) {
      const since = `the broker created it again at ${new Date(birth / 1000).toISOString()}`;
      if (subject.journal !== undefined && known.journal === subject.journal && subject.hasCopies) {
        throw new PartitionRebuilding(
          label,
          `${since}; nothing is answered from the deleted partition's journal until the agent ` +
            "has settled it",
          1,
        );
      }
      const birthMs = birth / 1000;
      if (subject.localMtimesMs.some((m) => m < birthMs - FILE_CLOCK_SLACK_MS)) {
        throw new PartitionRebuilding(
          label,
          `${since}; its directory still holds the deleted partition's segment files`,
          1,
        );
      }
    }
    this.#confirmed.set(label, { birth, stamp, journal: subject.journal });
  }

  /** The broker's answer at `stamp`: one question per partition and stamp at a time. */
  #birth(id: PartitionId, label: string, stamp: string): Promise<number | undefined> {
    const asking = this.#asking.get(label);
    if (asking && asking.stamp === stamp) return asking.birth;
    const timeout = new AbortController();
    const cancelTimer = this.#clock.setTimer(this.#timeoutMs, () => {
      timeout.abort(new Error(`the broker did not answer within ${this.#timeoutMs} ms`));
    }, { unref: true });
    const birth = Promise.race([
      this.#ask(id, timeout.signal),
      new Promise<never>((_, reject) => {
        timeout.signal.addEventListener("abort", () => reject(timeout.signal.reason), {
          once: true,
        });
      }),
    ]);
    const entry = { stamp, birth };
    this.#asking.set(label, entry);
    const done = () => {
      cancelTimer();
      if (this.#asking.get(label) === entry) this.#asking.delete(label);
    };
    birth.then(done, done);
    return birth;
  }
}

/**
 * The broker's metadata journal's inode, size and modification time; undefined without one. It
 * is append-only: a delete or create of a stream, topic or partition grows it before the broker
 * answers.
 */
export async function metadataStamp(dataDir: string): Promise<string | undefined> {
  const st = await stat(join(dataDir, METADATA_JOURNAL)).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT" || err.code === "ENOTDIR") return undefined;
    throw err;
  });
  return st && `${st.ino}:${st.size}:${st.mtimeMs}`;
}
