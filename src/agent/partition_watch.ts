// What wakes `tierd run` between its timed scans: a filesystem watch of exactly what it tiers —
// each tiered partition directory (recursively: its segments and its consumer offsets), and, so
// that new partitions are noticed, the deepest existing directory on the way to each tiered
// topic's `partitions/` folder (not recursively). Never the rest of the broker's data
// directory: the broker writes to `logs/`, `state/` and `metadata/` on its own (every
// DeleteSegments call appends to its state log and logs there), and a watch on those would start
// the next pass at once, forever. The set is re-armed after every pass, as partitions appear,
// disappear or are recreated.
//
// Under Deno the watch is `Deno.watchFs`: Deno's `node:fs` `watch` watches recursively even when
// told not to, which would bring the broker's own files back in through the data directory.
import { watch as fsWatch } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../log.ts";
import type { EventEmitter } from "node:events";

/** A running watch of one directory. */
export interface DirWatcher {
  close(): void;
}

/**
 * Starts watching `path` (and below it when `recursive`): `onChange` on any change, `onEnd` when
 * the watch ends by itself (the directory went away, the watch failed).
 * @throws when the watch cannot be started
 */
export type WatchFn = (
  path: string,
  options: { recursive: boolean },
  onChange: () => void,
  onEnd: () => void,
) => DirWatcher;

interface DenoWatchApi {
  watchFs(
    path: string,
    options: { recursive: boolean },
  ): AsyncIterable<unknown> & { close(): void };
}

/** The runtime's directory watch: `Deno.watchFs` under Deno, `node:fs` `watch` elsewhere. */
export const watchDir: WatchFn = (path, options, onChange, onEnd) => {
  const deno = (globalThis as { Deno?: DenoWatchApi }).Deno;
  if (deno?.watchFs) {
    const watcher = deno.watchFs(path, { recursive: options.recursive });
    let closed = false;
    (async () => {
      try {
        for await (const _ of watcher) onChange();
      } catch {
        // the watch failed: ended below
      }
      if (!closed) onEnd();
    })();
    return {
      close() {
        closed = true;
        watcher.close();
      },
    };
  }
  const watcher = fsWatch(path, { recursive: options.recursive }, () => onChange());
  // An FSWatcher is an EventEmitter (its typings in the pinned @types/node say less).
  (watcher as unknown as EventEmitter).on("error", () => {
    watcher.close();
    onEnd();
  });
  return watcher;
};

/** A tiered topic, by its numeric ids. */
export interface WatchedTopic {
  stream: number;
  topic: number;
}

/** Options of {@link PartitionWatch}. */
export interface PartitionWatchOptions {
  logger: Logger;
  /** @default {@link watchDir} */
  watch?: WatchFn;
}

interface Armed {
  recursive: boolean;
  /** The directory's inode when the watch started (a recreated one needs a new watch). */
  ino: number;
  watcher: DirWatcher;
}

/** Watches the tiered partitions of one data directory and calls `onChange` on any change. */
export class PartitionWatch {
  readonly #dataDir: string;
  readonly #topics: readonly WatchedTopic[];
  readonly #onChange: () => void;
  readonly #logger: Logger;
  readonly #watch: WatchFn;
  readonly #armed = new Map<string, Armed>();
  /** Paths a watch could not be started on, already warned about. */
  readonly #failed = new Set<string>();
  #closed = false;

  /**
   * @param dataDir the broker's data directory
   * @param topics the tiered topics (`[[topic]]` entries with tiering on)
   * @param onChange called on every change under a watched directory
   */
  constructor(
    dataDir: string,
    topics: readonly WatchedTopic[],
    onChange: () => void,
    options: PartitionWatchOptions,
  ) {
    this.#dataDir = dataDir;
    this.#topics = topics;
    this.#onChange = onChange;
    this.#logger = options.logger;
    this.#watch = options.watch ?? watchDir;
  }

  /** The watched directories and whether each is watched recursively (for tests and logs). */
  get watched(): Map<string, boolean> {
    return new Map([...this.#armed].map(([path, a]) => [path, a.recursive]));
  }

  /**
   * Watches exactly `partitionDirs` (recursively) and the way to each tiered topic's
   * partitions; stops watching what is no longer wanted, and re-watches a recreated directory.
   */
  async arm(partitionDirs: readonly string[]): Promise<void> {
    if (this.#closed) return;
    const wanted = new Map<string, boolean>();
    for (const dir of partitionDirs) wanted.set(dir, true);
    for (const t of this.#topics) {
      const dir = await deepestExisting(topicChain(this.#dataDir, t));
      if (dir !== undefined && !wanted.has(dir)) wanted.set(dir, false);
    }
    const inodes = new Map<string, number | undefined>();
    for (const path of wanted.keys()) inodes.set(path, await inodeOf(path));
    for (const [path, armed] of this.#armed) {
      if (wanted.get(path) === armed.recursive && inodes.get(path) === armed.ino) continue;
      armed.watcher.close();
      this.#armed.delete(path);
    }
    for (const [path, recursive] of wanted) {
      const ino = inodes.get(path);
      if (this.#armed.has(path) || ino === undefined) continue;
      this.#start(path, recursive, ino);
    }
  }

  #start(path: string, recursive: boolean, ino: number): void {
    let watcher: DirWatcher | undefined = undefined;
    // A watch that ends by itself (its directory went away): wake a pass, which re-arms.
    const onEnd = () => {
      if (watcher === undefined || this.#armed.get(path)?.watcher !== watcher) return;
      this.#armed.delete(path);
      this.#onChange();
    };
    try {
      watcher = this.#watch(path, { recursive }, () => this.#onChange(), onEnd);
    } catch (err) {
      if (!this.#failed.has(path)) {
        this.#failed.add(path);
        this.#logger.warn("filesystem watch unavailable; relying on the periodic scan", {
          path,
          err,
        });
      }
      return;
    }
    this.#failed.delete(path);
    this.#armed.set(path, { recursive, ino, watcher });
  }

  /** Stops every watch. */
  close(): void {
    this.#closed = true;
    for (const armed of this.#armed.values()) armed.watcher.close();
    this.#armed.clear();
  }
}

/** The directories from the data dir down to a topic's `partitions/`, shallowest first. */
export function topicChain(dataDir: string, t: WatchedTopic): string[] {
  const streams = join(dataDir, "streams");
  const stream = join(streams, String(t.stream));
  const topics = join(stream, "topics");
  const topic = join(topics, String(t.topic));
  return [dataDir, streams, stream, topics, topic, join(topic, "partitions")];
}

async function deepestExisting(chain: readonly string[]): Promise<string | undefined> {
  for (let i = chain.length - 1; i >= 0; i--) {
    if (await inodeOf(chain[i]) !== undefined) return chain[i];
  }
  return undefined;
}

/** The inode of a directory, or undefined when there is none at `path`. */
async function inodeOf(path: string): Promise<number | undefined> {
  try {
    const st = await stat(path);
    return st.isDirectory() ? st.ino : undefined;
  } catch {
    return undefined;
  }
}
