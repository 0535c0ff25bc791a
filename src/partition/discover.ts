// Finds the broker's partition directories: {data_dir}/streams/*/topics/*/partitions/*.
import { stat } from "node:fs/promises";
import { namesIn } from "../base/dir.ts";
import { join } from "node:path";
import type { PartitionId } from "../layout/partition.ts";

/** A partition directory found on disk, with the identity used to track its incarnation. */
export interface DiscoveredPartition extends PartitionId {
  dir: string;
  device: number;
  inode: number;
}

async function numericChildren(dir: string): Promise<number[]> {
  const names = await namesIn(dir);
  return names.filter((n) => /^\d+$/.test(n)).map(Number).sort((a, b) => a - b);
}

/**
 * Lists partition directories under `dataDir`, optionally only those `include` accepts.
 * Non-numeric names are ignored (Iggy ids are numeric); a missing data dir gives an empty list.
 */
export async function discoverPartitions(
  dataDir: string,
  include: (id: PartitionId) => boolean = () => true,
): Promise<DiscoveredPartition[]> {
  const out: DiscoveredPartition[] = [];
  const streamsDir = join(dataDir, "streams");
  for (const stream of await numericChildren(streamsDir)) {
    const topicsDir = join(streamsDir, String(stream), "topics");
    for (const topic of await numericChildren(topicsDir)) {
      const partsDir = join(topicsDir, String(topic), "partitions");
      for (const partition of await numericChildren(partsDir)) {
        const id = { stream, topic, partition };
        if (!include(id)) continue;
        const dir = join(partsDir, String(partition));
        try {
          const st = await stat(dir);
          if (!st.isDirectory()) continue;
          out.push({ ...id, dir, device: st.dev, inode: st.ino });
        } catch (err) {
          // Deleted between readdir and stat: the broker removed the partition; skip it.
          if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
        }
      }
    }
  }
  return out;
}
