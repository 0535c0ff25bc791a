// `tierd plan`: a dry run of eviction and total retention. For each tiered partition on the
// broker, which local segments eviction would remove now and which remote copies retention would
// delete now, with why (./plan_partition.ts). Read-only, like `ls`: the journals are read, not
// opened, the state dir lock is not taken and the store is not asked, so it runs beside a running
// agent. A command of its own rather than `tierd run --dry-run`: `run` takes the state dir lock,
// opens the store and claims the key space, and a dry run of a whole pass would have to pretend
// to copy; the plan answers the one question an operator asks before changing retention.
import { systemClock } from "../base/clock.ts";
import { tieredTopic } from "../config/topics.ts";
import { humanSize } from "../config/units.ts";
import { partitionsPerTopic } from "../layout/partition.ts";
import { discoverPartitions } from "../partition/discover.ts";
import { chooseEvictor } from "../tier/eviction_route.ts";
import {
  type Command,
  CONFIG_FLAG,
  type ParsedArgs,
  PARTITION_FLAGS,
  partitionFilter,
} from "./args.ts";
import { loadContext } from "./context.ts";
import { tieredPartitions } from "./inventory.ts";
import { type PartitionPlan, planPartition, type PlanRow } from "./plan_partition.ts";
import { renderTable } from "./table.ts";

/** `tierd plan`: prints what the next pass would evict and delete; exit 0. */
export const planCommand: Command = {
  spec: {
    name: "plan",
    summary: "what eviction and total retention would remove now, and why (changes nothing)",
    description:
      "For each tiered partition on the broker (or those --stream/--topic/--partition select),\n" +
      "lists the local segments eviction would remove now (evict; wait when the evictor holds\n" +
      "them: a consumer offset, a running broker) and the remote copies total retention would\n" +
      "delete now (delete; later beyond this pass's delete_batch_per_pass), each with the\n" +
      "reason, decided by the same functions and config the agent's pass uses. The plan starts\n" +
      "from the journal as it is: copies the next pass makes first can add evictions, and each\n" +
      "copy is still proven before its local files go.\n\n" +
      "Nothing is written and the store is not asked; the state dir lock is not taken, so it\n" +
      "runs beside a running agent.",
    flags: {
      config: CONFIG_FLAG,
      ...PARTITION_FLAGS,
      json: {
        type: "boolean",
        help: "the rows and notes as JSON (partition, action, segment, end, bytes, reason)",
      },
    },
  },
  run: plan,
};

async function plan({ values }: ParsedArgs): Promise<number> {
  const filter = partitionFilter(values);
  const ctx = await loadContext(values.config, { uses: [] });
  const { config } = ctx;
  const parts = (await tieredPartitions(config, filter)).filter((p) => p.dir !== undefined);
  // Every broker partition of a topic shares its max_topic_size, filtered or not.
  const perTopic = partitionsPerTopic(
    await discoverPartitions(config.agent.data_dir, (id) => tieredTopic(config, id) !== undefined),
  );
  const env = { config, evictor: chooseEvictor({ config }, systemClock), clock: systemClock };
  const plans: PartitionPlan[] = [];
  for (const part of parts) {
    const topic = tieredTopic(config, part.id)!;
    plans.push(
      await planPartition(
        env,
        { ...part, dir: part.dir! },
        topic,
        Math.max(1, perTopic(part.id)),
      ),
    );
  }
  const rows = plans.flatMap((p) => p.rows);
  const notes = plans.flatMap((p) => p.notes);
  if (values.json) {
    console.log(JSON.stringify(
      {
        rows: rows.map((r) => ({
          partition: r.partition,
          action: r.action,
          segment: r.segment.toString(),
          end: r.end.toString(),
          bytes: r.bytes,
          reason: r.reason,
        })),
        notes,
      },
      null,
      2,
    ));
    return 0;
  }
  if (parts.length === 0) {
    console.log(`no tiered partitions under ${config.agent.data_dir}`);
    return 0;
  }
  if (rows.length > 0) console.log(planTable(rows) + "\n");
  for (const n of notes) console.log(n);
  if (notes.length > 0) console.log("");
  console.log(planSummary(plans.length, rows));
  return 0;
}

/** The rows as a table. */
export function planTable(rows: readonly PlanRow[]): string {
  return renderTable(
    ["PARTITION", "ACTION", "SEGMENT", "END", "SIZE", "REASON"],
    rows.map((r) => [
      r.partition,
      r.action,
      r.segment.toString(),
      r.end.toString(),
      humanSize(r.bytes),
      r.reason,
    ]),
    ["left", "left", "right", "right", "right", "left"],
  );
}

/** The closing line: how much each action takes. */
function planSummary(partitions: number, rows: readonly PlanRow[]): string {
  const of = (action: PlanRow["action"]) => rows.filter((r) => r.action === action);
  const said = (action: PlanRow["action"], what: string) => {
    const r = of(action);
    return r.length === 0
      ? []
      : [`${r.length} ${what} (${humanSize(r.reduce((n, x) => n + x.bytes, 0))})`];
  };
  const parts = [
    ...said("evict", "segment(s) evicted locally"),
    ...said("wait", "waiting for the evictor"),
    ...said("delete", "remote copies deleted"),
    ...said("later", "remote deletions in later passes"),
  ];
  return `plan: ${partitions} partition(s): ` +
    (parts.length === 0 ? "nothing would be evicted or deleted now" : parts.join(", ")) +
    "; nothing was changed";
}
