// Which partitions tierd tiers: the `[[topic]]` entries of the config.
import type { PartitionId } from "../layout/partition.ts";
import type { Config, TopicConfig } from "./schema.ts";

/** The configured topic for a partition, when tiering is on for it. */
export function tieredTopic(config: Config, id: PartitionId): TopicConfig | undefined {
  return config.topic.find((t) =>
    t.stream === id.stream && t.topic === id.topic && t.tiered_storage
  );
}
