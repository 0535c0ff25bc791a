// `tierd ls`: every segment of the tiered partitions with its state, location and offsets,
// read from the journals (without modifying them: the agent may be running) and the broker dir.
import { systemClock } from "../../providers/clock.ts";
import { discoverPartitions } from "../partition/discover.ts";
import { incarnationHex } from "../layout/partition.ts";
import { type PartitionId, partitionLabel } from "../layout/partition.ts";
import { listSegments } from "../partition/segments.ts";
import { JournalStateReader } from "../read/state_source.ts";
import { emptyState, segmentsOf } from "../state/segment_state.ts";
import { tieredTopic } from "../config/topics.ts";
import { intFlag, parseFlags } from "./args.ts";
import { loadContext } from "./context.ts";

/** Runs `tierd ls`: prints each segment's state and location, and returns the exit code. */
export async function lsCommand(args: string[]): Promise<number> {
  const { values } = parseFlags(args, {
    stream: { type: "string" },
    topic: { type: "string" },
    partition: { type: "string" },
    json: { type: "boolean" },
  });
  const ctx = await loadContext(values.config);
  const only = {
    stream: values.stream === undefined ? undefined : intFlag(values, "stream"),
    topic: values.topic === undefined ? undefined : intFlag(values, "topic"),
    partition: values.partition === undefined ? undefined : intFlag(values, "partition"),
  };
  const wanted = (id: PartitionId) =>
    tieredTopic(ctx.config, id) !== undefined &&
    (only.stream === undefined || only.stream === id.stream) &&
    (only.topic === undefined || only.topic === id.topic) &&
    (only.partition === undefined || only.partition === id.partition);
  const rows: Record<string, string | number>[] = [];
  const journals = new JournalStateReader(ctx.config.agent.state_dir); // read-only: the agent may run
  for (const part of await discoverPartitions(ctx.config.agent.data_dir, wanted)) {
    const label = partitionLabel(part);
    const state = (await journals.state(part)) ?? emptyState();
    const local = await listSegments(part.dir, {
      now: systemClock.now(),
      quiescenceMs: ctx.config.agent.seal_quiescence,
    });
    const localByStart = new Map(local.map((s) => [s.start, s]));
    const starts = new Set([
      ...local.map((s) => s.start),
      ...segmentsOf(state).map((r) => r.start),
    ]);
    const header = `${label}  incarnation ${
      state.incarnation === undefined ? "-" : incarnationHex(state.incarnation)
    }  generation ${state.generation}  tiered_up_to_offset ${state.floor}`;
    if (!values.json) console.log(header);
    for (const start of [...starts].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
      const rec = segmentsOf(state).find((r) => r.start === start);
      const file = localByStart.get(start);
      const remote = rec?.state === "COPY_SEGMENT_FINISHED";
      const where = file && remote ? "local+remote" : file ? "local" : remote ? "remote" : "-";
      const state_ = rec?.state ??
        (file?.sealed ? "LOCAL (sealed)" : file ? "LOCAL (active)" : "-");
      const end = rec?.meta?.endOffset ?? rec?.lostEndOffset;
      const row = {
        partition: label,
        start: start.toString(),
        end: end === undefined ? "" : end.toString(),
        state: state_,
        location: where,
        bytes: rec?.meta?.size ?? file?.logSize ?? 0,
      };
      rows.push(row);
      if (!values.json) {
        console.log(
          `  ${row.start.padStart(20)}  ${row.end.padStart(20)}  ${
            String(row.state).padEnd(24)
          }  ` +
            `${row.location.padEnd(12)}  ${row.bytes}`,
        );
      }
    }
  }
  if (values.json) console.log(JSON.stringify(rows, null, 2));
  else if (rows.length === 0) console.log("no tiered partitions found");
  return 0;
}
