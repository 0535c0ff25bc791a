// The sealed segments of one partition found damaged before their copy (a record checksum, a
// frame, an index entry that does not hold): kept across passes so each pass reports them
// without reading the file again, and so the error log line is rate-limited. An entry lasts
// until the file changes (an operator repaired or replaced it: it is verified again) or goes.
import type { FormatError, FormatErrorCode } from "../format/errors.ts";
import type { SegmentFiles } from "../partition/segments.ts";

/** How often the error line of a segment that stays damaged is repeated. */
export const DAMAGE_LOG_INTERVAL_MS = 15 * 60_000;

/** A damaged sealed segment, as reported (pass report, status page, log). */
export interface DamagedSegment {
  /** The segment's start offset. */
  segment: bigint;
  /** The damaged file (the `.log` or the `.index`). */
  file: string;
  /** Byte position in `file` of the first problem. */
  position: number;
  code: FormatErrorCode;
  /** The whole message: `"<file> @ byte <position>: <what is wrong>"`. */
  reason: string;
  /** When it was first found (ms since the epoch). */
  since: number;
}

interface Entry {
  damage: DamagedSegment;
  /** The segment's files as they were when found damaged: a change means "look again". */
  logSize: number;
  mtimeMs: number;
  /** When the error line was last written. */
  loggedAt: number;
}

/** The damaged segments of one partition, by start offset. */
export class SegmentDamage {
  readonly #entries = new Map<bigint, Entry>();
  readonly #logIntervalMs: number;

  /** @param logIntervalMs how often a lasting damage is logged again @default 15 min */
  constructor(logIntervalMs = DAMAGE_LOG_INTERVAL_MS) {
    this.#logIntervalMs = logIntervalMs;
  }

  /**
   * The damage found earlier in exactly these files (same size and modification time), or
   * undefined: never seen damaged, or changed since (worth verifying again).
   */
  known(seg: SegmentFiles): DamagedSegment | undefined {
    const e = this.#entries.get(seg.start);
    return e && e.logSize === seg.logSize && e.mtimeMs === seg.mtimeMs ? e.damage : undefined;
  }

  /**
   * Records that `seg` failed verification with `err`.
   * @returns the damage, and whether to write its error line now (first found, the files
   *   changed, or the last line is older than the log interval)
   */
  note(seg: SegmentFiles, err: FormatError, now: number): { damage: DamagedSegment; log: boolean } {
    const before = this.#entries.get(seg.start);
    const same = before !== undefined && before.damage.reason === err.message;
    const damage: DamagedSegment = {
      segment: seg.start,
      file: err.file,
      position: err.position,
      code: err.code,
      reason: err.message,
      since: same ? before.damage.since : now,
    };
    const log = !same || now - before.loggedAt >= this.#logIntervalMs;
    this.#entries.set(seg.start, {
      damage,
      logSize: seg.logSize,
      mtimeMs: seg.mtimeMs,
      loggedAt: log ? now : before!.loggedAt,
    });
    return { damage, log };
  }

  /**
   * A segment reported again without being read: whether its error line is due now (and then
   * it counts as written).
   */
  due(start: bigint, now: number): boolean {
    const e = this.#entries.get(start);
    if (!e || now - e.loggedAt < this.#logIntervalMs) return false;
    e.loggedAt = now;
    return true;
  }

  /** Forgets a segment (it verified, or was copied). @returns true when it was damaged */
  clear(start: bigint): boolean {
    return this.#entries.delete(start);
  }

  /** Forgets segments no longer in the directory. */
  keepOnly(starts: ReadonlySet<bigint>): void {
    for (const start of this.#entries.keys()) if (!starts.has(start)) this.#entries.delete(start);
  }

  /** The damaged segments, oldest first. */
  list(): DamagedSegment[] {
    return [...this.#entries.values()].map((e) => e.damage).sort((a, b) =>
      a.segment < b.segment ? -1 : a.segment > b.segment ? 1 : 0
    );
  }
}
