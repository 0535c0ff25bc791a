// Where an Iggy 0.8 broker starts a `timestamp` poll, found the way it finds it, over the
// segments tierd copied: the first segment whose end timestamp is at or after the timestamp, then
// a binary search of that segment's dense `.index` that stops at the first entry it meets with
// exactly that timestamp (not necessarily the first of several that share it — the messages of one
// send do) or else at the first entry after it (0.8.0 core/server/src/streaming/partitions/ops.rs
// `load_messages_from_disk_by_timestamp`, core/common/src/types/segment_storage/index_reader.rs
// `binary_search_position_for_timestamp_async`). 0.9 selects whole batches by their timestamp
// instead, which tierd's read path does as it is.
import { readFile } from "node:fs/promises";
import { INDEX_ENTRY_SIZE_08 } from "../format/iggy08.ts";
import type { PartitionId } from "../layout/partition.ts";
import { markerPaths, partitionStateDir } from "../layout/state_paths.ts";
import type { CatalogEntry, CatalogSegment } from "../read/catalog.ts";
import type { ReadContext } from "../read/context.ts";
import { readFailure } from "../read/_fetch.ts";

/** Where the search ended. */
export type TimestampStart =
  /** In a segment only tierd has: the poll's first offset. */
  | { offset: bigint }
  /** In a segment the broker still has, or nowhere yet: the broker's poll to answer. */
  | { broker: true };

/** The `.index` of a copied segment: the copy kept beside its marker, else the store's. */
async function remoteIndex(
  ctx: ReadContext,
  id: PartitionId,
  s: CatalogSegment,
): Promise<Uint8Array> {
  const remote = s.remote!;
  const kept = markerPaths(partitionStateDir(ctx.config.agent.state_dir, id), s.start).index;
  const local = await readFile(kept).catch(() => undefined);
  if (local && local.length === remote.meta.indexSize) return local;
  try {
    return (await ctx.store.get(remote.keys.index)).bytes;
  } catch (err) {
    throw readFailure(err, remote.keys.index, s.start);
  }
}

/** The broker's binary search over a dense index: the entry position it starts at. */
export function searchDense08(index: Uint8Array, timestamp: bigint): number {
  const count = Math.floor(index.length / INDEX_ENTRY_SIZE_08);
  const v = new DataView(index.buffer, index.byteOffset, index.byteLength);
  const ts = (i: number) => v.getBigUint64(i * INDEX_ENTRY_SIZE_08 + 8, true);
  if (count === 0) return 0;
  if (timestamp > ts(count - 1)) return count - 1;
  if (timestamp <= ts(0)) return 0;
  let low = 0;
  let high = count - 1;
  while (low <= high) {
    const mid = low + Math.floor((high - low) / 2);
    const t = ts(mid);
    if (t === timestamp) return mid;
    if (t < timestamp) low = mid + 1;
    else {
      if (mid === 0) break;
      high = mid - 1;
    }
  }
  return low;
}

/**
 * The first offset a 0.8 broker answers for a `timestamp` poll, had it kept every segment.
 * @throws {ReadError} when the store must be asked for an index and fails
 */
export async function timestampStart08(
  ctx: ReadContext,
  id: PartitionId,
  entries: CatalogEntry[],
  timestamp: bigint,
): Promise<TimestampStart> {
  for (const e of entries) {
    if (e.kind !== "segment") continue;
    if (e.local || !e.remote) return { broker: true }; // from here on the broker's own segments
    if (e.remote.meta.maxTimestamp < timestamp) continue;
    const index = await remoteIndex(ctx, id, e);
    return { offset: e.start + BigInt(searchDense08(index, timestamp)) };
  }
  return { broker: true };
}
