// Where the read path learns a partition's remote lifecycle state. The agent can hand over its
// live state; without it (`tierd read`, tests) the journal is read read-only, like `tierd ls`.
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { initHashes } from "../hash.ts";
import { type PartitionId, partitionRelPath } from "../layout/partition.ts";
import type { ChosenDeletion } from "../state/delete_lag.ts";
import { decodeRecords } from "../state/journal.ts";
import { fold, type PartitionState } from "../state/segment_state.ts";

/** Gives the folded journal state of a partition. */
export interface PartitionStateSource {
  /** The partition's state, or undefined when it has no journal yet. */
  state(id: PartitionId): Promise<PartitionState | undefined>;
  /** How the partition's local state stands (the agent knows; a bare journal reader does not). */
  health?(id: PartitionId): PartitionHealth | undefined;
  /**
   * Remote copies total retention chose in the partition's last pass and has not journaled yet
   * (waiting for `delete_grace` or the delete budget), for the remote-deletion lag. The agent
   * knows; a bare journal reader does not (its lag counts what the journal says).
   */
  chosenDeletions?(id: PartitionId): readonly ChosenDeletion[] | undefined;
  /**
   * Why the partition's state is not known yet — the agent is starting, opening it, rebuilding
   * it from the bucket, or could not and tries again — or undefined when it is known. Reads of
   * such a partition answer "retry" (`partition_rebuilding`), never "below retention" or "past
   * the end". A bare journal reader always knows (undefined).
   */
  pending?(id: PartitionId): string | undefined;
}

/** How a partition's local state stands, for `/v1/partitions` and the status page. */
export interface PartitionHealth {
  /**
   * `ok`; `rebuilt`: its state was rebuilt from the bucket (no journal, or a damaged one kept
   * aside), or in part (copies a cut-short journal did not list adopted from it); `opening`: the
   * agent is opening it (replaying its journal, rebuilding it from the bucket) and reads answer
   * "retry"; `failed`: its state cannot be opened now (retried every pass; reads answer "retry").
   */
  state: "ok" | "rebuilt" | "opening" | "failed";
  /**
   * What happened, in words, naming the file and position where there is one; also for `ok`
   * when boot mended something (a torn tail, a moved or recreated directory, quarantined
   * markers, evictions recorded from markers).
   */
  detail?: string;
}

interface Cached {
  size: number;
  mtimeMs: number;
  ino: number;
  state: PartitionState;
}

/**
 * Reads journals from `state_dir` without modifying them (the agent may be appending): a torn
 * tail is simply not part of the state. A journal is decoded again only when its size, mtime or
 * inode (compaction renames a new file in) changed.
 */
export class JournalStateReader implements PartitionStateSource {
  readonly #stateDir: string;
  readonly #cache = new Map<string, Cached>();

  /** @param stateDir `agent.state_dir` */
  constructor(stateDir: string) {
    this.#stateDir = stateDir;
  }

  /**
   * @throws {JournalStateError} when the journal holds an illegal transition
   */
  async state(id: PartitionId): Promise<PartitionState | undefined> {
    const path = join(this.#stateDir, partitionRelPath(id), "journal");
    let st;
    try {
      st = await stat(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        this.#cache.delete(path);
        return undefined;
      }
      throw err;
    }
    const hit = this.#cache.get(path);
    if (hit && hit.size === st.size && hit.mtimeMs === st.mtimeMs && hit.ino === st.ino) {
      return hit.state;
    }
    await initHashes();
    let bytes: Uint8Array;
    try {
      bytes = await readFile(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
    const state = fold(decodeRecords(bytes).events);
    this.#cache.set(path, { size: st.size, mtimeMs: st.mtimeMs, ino: st.ino, state });
    return state;
  }
}
