// Where Iggy keeps a partition's files, and where tierd keeps its own state for it
// (docs/architecture.md, "State on local disk").
import { join } from "node:path";

/** Identifies one partition by its numeric stream, topic and partition ids. */
export interface PartitionId {
  stream: number;
  topic: number;
  partition: number;
}

/**
 * How many of `ids` belong to each topic: what a topic's `max_topic_size` is divided among.
 *
 * @returns the count for a partition's topic (0 for a topic none of `ids` belongs to)
 */
export function partitionsPerTopic(
  ids: Iterable<Pick<PartitionId, "stream" | "topic">>,
): (id: Pick<PartitionId, "stream" | "topic">) => number {
  const counts = new Map<string, number>();
  const key = (id: Pick<PartitionId, "stream" | "topic">) => `${id.stream}/${id.topic}`;
  for (const id of ids) counts.set(key(id), (counts.get(key(id)) ?? 0) + 1);
  return (id) => counts.get(key(id)) ?? 0;
}

/** `streams/{s}/topics/{t}/partitions/{p}` — the same relative path in the broker and state dirs. */
export function partitionRelPath(id: PartitionId): string {
  return join(
    "streams",
    String(id.stream),
    "topics",
    String(id.topic),
    "partitions",
    String(id.partition),
  );
}

/** A segment's file name stem: its start offset as 20 zero-padded digits. */
export function segmentStem(startOffset: bigint): string {
  return startOffset.toString().padStart(20, "0");
}

/** Parses `00000000000000001000.log` (or `.index`) into its start offset; undefined otherwise. */
export function parseSegmentFileName(
  name: string,
): { start: bigint; ext: "log" | "index" } | undefined {
  const m = /^(\d{20})\.(log|index)$/.exec(name);
  if (!m) return undefined;
  return { start: BigInt(m[1]), ext: m[2] as "log" | "index" };
}

/** `"{s}/{t}/{p}"` for log lines and metric labels. */
export function partitionLabel(id: PartitionId): string {
  return `${id.stream}/${id.topic}/${id.partition}`;
}

/** An incarnation id as it appears in object keys and on the status page: 16 lowercase hex digits. */
export function incarnationHex(id: bigint): string {
  return id.toString(16).padStart(16, "0");
}
