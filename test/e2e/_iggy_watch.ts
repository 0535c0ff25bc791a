// Watches a live broker's partition directories while tierd runs beside it: keeps a copy of every
// segment as soon as it is sealed (before tierd can evict it), and checks that the active
// segment is never in the store while the broker keeps writing to it.
import { listBounded } from "../../providers/listing.ts";
import { join } from "node:path";
import { type ObjectStore } from "../../providers/types.ts";

/** The copy of a sealed segment, as the broker last had it. */
export interface KeptSegment {
  start: bigint;
  log: Uint8Array;
  index: Uint8Array;
}

/** `.log` start offsets in a partition directory, ascending; [] when it is gone. */
export async function logStarts(dir: string): Promise<bigint[]> {
  const out: bigint[] = [];
  try {
    for await (const e of Deno.readDir(dir)) {
      const m = /^(\d{20})\.log$/.exec(e.name);
      if (m) out.push(BigInt(m[1]));
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return out.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The file stem of a segment: its start offset in 20 digits. */
export const stem = (start: bigint): string => start.toString().padStart(20, "0");

async function readIfPresent(path: string): Promise<Uint8Array | undefined> {
  try {
    return await Deno.readFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

/** Something that polls on a timer until stopped; errors end the loop and are rethrown. */
abstract class Poller {
  #stopped = false;
  #loop?: Promise<void>;

  constructor(readonly intervalMs: number) {}

  /** Starts polling (one round right away). */
  start(): void {
    this.#loop ??= (async () => {
      while (!this.#stopped) {
        await this.round();
        await new Promise((resolve) => setTimeout(resolve, this.intervalMs));
      }
    })();
  }

  /** Stops after the current round; rethrows what ended the loop early. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
    this.#loop = undefined;
    this.#stopped = false;
  }

  protected abstract round(): Promise<void>;
}

/** Keeps a copy of every sealed segment (one with a successor) of each watched partition. */
export class SegmentKeeper extends Poller {
  readonly #dirs: Map<number, string>;
  readonly #kept = new Map<number, Map<bigint, KeptSegment>>();

  /** @param dirs partition id → its directory in the broker's data dir */
  constructor(dirs: Map<number, string>, intervalMs = 20) {
    super(intervalMs);
    this.#dirs = dirs;
    for (const p of dirs.keys()) this.#kept.set(p, new Map());
  }

  /** The kept segments of `partition`, by start offset. */
  kept(partition: number): Map<bigint, KeptSegment> {
    return this.#kept.get(partition)!;
  }

  /** One scan now (also what the timer runs). */
  async scan(): Promise<void> {
    await this.round();
  }

  protected async round(): Promise<void> {
    for (const [partition, dir] of this.#dirs) {
      const starts = await logStarts(dir);
      const kept = this.#kept.get(partition)!;
      for (const start of starts.slice(0, -1)) {
        const logPath = join(dir, `${stem(start)}.log`);
        const indexPath = join(dir, `${stem(start)}.index`);
        const previous = kept.get(start);
        const [logSize, indexSize] = await Promise.all(
          [logPath, indexPath].map((p) => Deno.stat(p).then((s) => s.size, () => -1)),
        );
        if (logSize < 0) continue; // evicted or deleted since the listing
        if (previous?.log.length === logSize && previous.index.length === indexSize) continue;
        const [log, index] = await Promise.all([readIfPresent(logPath), readIfPresent(indexPath)]);
        if (!log) continue;
        kept.set(start, { start, log, index: index ?? new Uint8Array() });
      }
    }
  }
}

/** What the active-segment watch saw. */
export interface ActiveWatchReport {
  /** Rounds in which a partition's active segment was the same before and after the listing. */
  checks: number;
  /** Active segments found in the store (should stay empty). */
  violations: string[];
  /** Distinct active segments seen per partition (the broker kept sealing new ones). */
  activesSeen: Map<number, Set<bigint>>;
}

/**
 * Lists the store between two listings of each partition directory: a segment that was the last
 * one in both (so active throughout the store listing) must have no object in the store.
 */
export class ActiveSegmentWatch extends Poller {
  readonly report: ActiveWatchReport = { checks: 0, violations: [], activesSeen: new Map() };

  /**
   * @param dirs partition id → its directory in the broker's data dir
   * @param keyPrefix partition id → the store prefix of its objects
   */
  constructor(
    readonly store: ObjectStore,
    readonly dirs: Map<number, string>,
    readonly keyPrefix: (partition: number) => string,
    intervalMs = 100,
  ) {
    super(intervalMs);
  }

  protected async round(): Promise<void> {
    for (const [partition, dir] of this.dirs) {
      const before = (await logStarts(dir)).at(-1);
      const objects = await listBounded(this.store, this.keyPrefix(partition));
      const after = (await logStarts(dir)).at(-1);
      if (before === undefined || before !== after) continue;
      this.report.checks++;
      const seen = this.report.activesSeen.get(partition) ?? new Set();
      seen.add(before);
      this.report.activesSeen.set(partition, seen);
      for (const o of objects) {
        if (o.key.endsWith(`/${stem(before)}.log`) || o.key.endsWith(`/${stem(before)}.index`)) {
          this.report.violations.push(`partition ${partition}: active segment ${before}: ${o.key}`);
        }
      }
    }
  }
}
