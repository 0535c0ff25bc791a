// How a verified segment leaves the broker's directory: one small port with two ways through
// it. `broker` asks the running broker to drop its oldest segments (DeleteSegments), so its own
// view stays true; `unlink` removes the files itself, which is only safe beside a stopped broker.
import { fsyncDir } from "../state/durable.ts";
import type { PartitionId } from "../layout/partition.ts";
import type { SegmentFiles } from "../partition/segments.ts";
import type { BrokerClient } from "./broker_client.ts";
import { unlinkIfPresent } from "./partition_ledger.ts";

/** Removes a prefix of a partition's sealed segments from the broker's directory. */
export interface Evictor {
  /** `"broker"` or `"unlink"`, for logs. */
  readonly via: string;
  /** What the removal is called in an error line (`"broker DeleteSegments"`). */
  readonly action: string;
  /** The warning logged when a removal fails. */
  readonly refused: string;
  /**
   * Removes `segments` (the oldest sealed ones, oldest first) of partition `id` in `dir`. The
   * broker may keep some (its consumer barrier): the caller checks the directory afterwards.
   * @throws when the removal could not be asked for or done; nothing is assumed gone then
   */
  remove(id: PartitionId, dir: string, segments: readonly SegmentFiles[]): Promise<void>;
}

/** Eviction through the broker's DeleteSegments call. */
export class BrokerEvictor implements Evictor {
  readonly via = "broker";
  readonly action = "broker DeleteSegments";
  readonly refused = "broker refused DeleteSegments; segments stay local";
  constructor(readonly client: BrokerClient) {}

  async remove(id: PartitionId, _dir: string, segments: readonly SegmentFiles[]): Promise<void> {
    await this.client.deleteSegments(id, segments.length);
  }
}

/** Eviction by unlinking the files (for a stopped broker, or one that re-reads its directory). */
export class UnlinkEvictor implements Evictor {
  readonly via = "unlink";
  readonly action = "unlink";
  readonly refused = "could not unlink the segment files; segments stay local";

  async remove(_id: PartitionId, dir: string, segments: readonly SegmentFiles[]): Promise<void> {
    for (const seg of segments) {
      // .log first: an .index without its .log is ignored (0.8) or removed (0.9) at boot,
      // while a .log without its .index would make 0.8 rebuild a broken index.
      await unlinkIfPresent(seg.logPath);
      await unlinkIfPresent(seg.indexPath);
    }
    await fsyncDir(dir);
  }
}
