// `tierd ls`: the tiered partitions, read from the journals (without modifying them: the agent
// may be running) and the broker dir. By default one summary line per topic; `--segments` lists
// every segment of every partition; `--json` prints every segment as JSON, sizes in bytes.
// Everything it shows is in those two directories: it asks neither the broker nor the store, so
// its config is checked without their addresses and credentials.
import { humanSize } from "../config/units.ts";
import {
  type Command,
  CONFIG_FLAG,
  type ParsedArgs,
  PARTITION_FLAGS,
  partitionFilter,
} from "./args.ts";
import { loadContext } from "./context.ts";
import { inventory, type PartitionEntry, type SegmentEntry } from "./inventory.ts";
import { renderTable } from "./table.ts";

/** `tierd ls [--config F] [--stream S --topic T --partition P] [--segments] [--json]`. */
export const lsCommand: Command = {
  spec: {
    name: "ls",
    summary: "tiered partitions: a summary per topic, or every segment (--segments)",
    description:
      "Lists what tierd knows of the tiered topics, from the journals and the broker's\n" +
      "directory (read-only: safe beside a running agent). By default one line per topic:\n" +
      "segments local and remote, those waiting to be copied, dangling or lost, and bytes.\n" +
      "It asks neither the broker nor the store: their credentials are not needed.",
    flags: {
      config: CONFIG_FLAG,
      ...PARTITION_FLAGS,
      segments: {
        type: "boolean",
        help: "every segment of every partition: offsets, state, location, size",
      },
      json: {
        type: "boolean",
        help: "every segment as JSON (partition, start, end, state, location, bytes)",
      },
    },
  },
  run: ls,
};

async function ls({ values }: ParsedArgs): Promise<number> {
  const ctx = await loadContext(values.config, { uses: [] });
  const parts = await inventory(ctx.config, partitionFilter(values));
  if (values.json) {
    const rows = parts.flatMap((p) =>
      p.segments.map((s) => ({
        partition: p.label,
        start: s.start.toString(),
        end: s.end === undefined ? "" : s.end.toString(),
        state: s.state,
        location: s.location,
        bytes: s.bytes,
      }))
    );
    console.log(JSON.stringify(rows, null, 2));
    return 0;
  }
  if (parts.length === 0) {
    console.log(
      `no tiered partitions under ${ctx.config.agent.data_dir} or ${ctx.config.agent.state_dir}`,
    );
    return 0;
  }
  console.log(values.segments ? segmentTables(parts) : topicSummary(parts));
  return 0;
}

/** One table per partition: a heading line, then every segment. */
export function segmentTables(parts: readonly PartitionEntry[]): string {
  return parts.map((p) =>
    `${p.label}  incarnation ${p.incarnation}  generation ${p.generation}  ` +
    `tiered_up_to_offset ${p.floor}\n` +
    renderTable(
      ["START", "END", "STATE", "LOCATION", "SIZE"],
      p.segments.map((s) => [
        s.start.toString(),
        s.end === undefined ? "" : s.end.toString(),
        s.state,
        s.location,
        humanSize(s.bytes),
      ]),
      ["right", "right", "left", "left", "right"],
      "  ",
    )
  ).join("\n\n");
}

/** The summary's columns; every one is a count or a size. */
const SUMMARY_HEADERS = [
  "STREAM",
  "TOPIC",
  "PARTITIONS",
  "SEGMENTS",
  "LOCAL",
  "REMOTE",
  "EVICTED",
  "TO COPY",
  "DANGLING",
  "LOST",
  "HOLES",
  "LOCAL SIZE",
  "REMOTE SIZE",
] as const;

/** One line per topic: partitions, segments by where they are, what waits, and bytes. */
export function topicSummary(parts: readonly PartitionEntry[]): string {
  const topics = new Map<string, PartitionEntry[]>();
  for (const p of parts) {
    const key = `${p.id.stream}\t${p.id.topic}`;
    topics.set(key, [...(topics.get(key) ?? []), p]);
  }
  const rows = [...topics.values()].map((ps) => {
    const segs = ps.flatMap((p) => p.segments);
    const count = (keep: (s: SegmentEntry) => boolean) => String(segs.filter(keep).length);
    const sum = (bytes: (s: SegmentEntry) => number) =>
      humanSize(segs.reduce((n, s) => n + bytes(s), 0));
    const isRemote = (s: SegmentEntry) => s.location.includes("remote");
    return [
      String(ps[0].id.stream),
      String(ps[0].id.topic),
      String(ps.length),
      count((s) => s.location !== "-"),
      count((s) => s.location.startsWith("local")),
      count(isRemote),
      count((s) => s.location === "remote"),
      count((s) => s.pendingCopy),
      count((s) => s.state === "DANGLING"),
      count((s) => s.state === "LOST_BEFORE_UPLOAD"),
      count((s) => s.state === "HOLE"),
      sum((s) => s.localBytes),
      sum((s) => (isRemote(s) ? s.bytes : 0)),
    ];
  });
  return renderTable(SUMMARY_HEADERS, rows, SUMMARY_HEADERS.map(() => "right"));
}
