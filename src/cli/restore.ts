// `tierd restore [--stream S --topic T --partition P] [--cluster-id C] [--with-data]`: rebuild
// `state_dir` from the bucket on a new host (and, with data, the broker's partition
// directories), with progress on stderr. Takes the state dir lock like `run`.
import { systemClock } from "../../providers/clock.ts";
import { probeStore } from "../../providers/probe.ts";
import { RetryingStore } from "../../providers/retrying_store.ts";
import { humanSize } from "../config/units.ts";
import { restore, RestoreRefused } from "../restore/restore.ts";
import { lockStateDir } from "../runtime/state_lock.ts";
import {
  type Command,
  CONFIG_FLAG,
  optionalIntFlag,
  type ParsedArgs,
  PARTITION_FLAGS,
} from "./args.ts";
import { loadContext, storeFor } from "./context.ts";
import { Progress } from "./progress.ts";

/** `tierd restore`: 0 when every partition was restored, 1 otherwise. */
export const restoreCommand: Command = {
  spec: {
    name: "restore",
    summary: "rebuild state_dir from the bucket on a new host (--with-data: the broker's too)",
    description: "Lists the objects tierd wrote for this cluster and rebuilds each partition's\n" +
      "journal, markers and index copies in agent.state_dir, taking the state dir lock as\n" +
      "`tierd run` does (stop the agent first). Progress goes to stderr per partition.",
    flags: {
      config: CONFIG_FLAG,
      ...PARTITION_FLAGS,
      "cluster-id": {
        type: "string",
        value: "C",
        help: "restore this cluster's objects (default agent.cluster_id)",
      },
      "with-data": {
        type: "boolean",
        help: "also download the segments into the broker's partition directories",
      },
    },
  },
  run: restoreState,
};

async function restoreState({ values }: ParsedArgs): Promise<number> {
  const only = {
    stream: optionalIntFlag(values, "stream"),
    topic: optionalIntFlag(values, "topic"),
    partition: optionalIntFlag(values, "partition"),
  };
  const ctx = await loadContext(values.config);
  const { config, logger } = ctx;
  const clusterId = typeof values["cluster-id"] === "string"
    ? values["cluster-id"]
    : config.agent.cluster_id;
  await lockStateDir(config.agent.state_dir, "tierd restore");
  const opened = await storeFor(ctx);
  try {
    const probe = await probeStore(opened.store, opened.prefix);
    if (!probe.ok) {
      console.error(ctx.scrub(`tierd: probe failed: ${opened.describe}: ${probe.reason}`));
      return 1;
    }
    const progress = new Map<string, Progress>();
    const results = await restore({
      config,
      store: new RetryingStore(opened.store, {
        clock: systemClock,
        maxBackoffMs: config.tiered_storage.upload_loop_backoff_max,
      }),
      keySpace: { prefix: opened.prefix, clusterId },
      clock: systemClock,
      logger,
      withData: values["with-data"] === true,
      filter: (id) =>
        (only.stream === undefined || id.stream === only.stream) &&
        (only.topic === undefined || id.topic === only.topic) &&
        (only.partition === undefined || id.partition === only.partition),
      progress: (partition, done, segment) => {
        let p = progress.get(partition);
        if (!p) {
          progress.set(partition, p = new Progress(`restore ${partition}`, { unit: "segments" }));
        }
        p.update(
          {
            done: done.segments,
            total: done.total,
            bytesDone: done.bytes,
            bytesTotal: done.totalBytes,
          },
          `segment ${segment}`,
        );
      },
    });
    for (const p of progress.values()) p.end();
    if (results.length === 0) {
      console.error(
        ctx.scrub(`tierd: nothing to restore under ${opened.describe} for cluster ${clusterId}`),
      );
      return 1;
    }
    for (const r of results) {
      console.error(
        `restored ${r.partition}: ${r.segments} segments (${humanSize(r.bytes)}), ` +
          `${r.downloaded} downloaded, ${r.kept} already in place` +
          (r.problems.length > 0 ? `, ${r.problems.length} objects NOT usable (see log)` : ""),
      );
    }
    return results.some((r) => r.problems.length > 0) ? 1 : 0;
  } catch (err) {
    if (err instanceof RestoreRefused) {
      console.error(ctx.scrub(`tierd: ${err.message}`));
      return 2;
    }
    throw err;
  } finally {
    await opened.store.close?.();
  }
}
