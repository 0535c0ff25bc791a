// `tierd run [--once]`: checks the config and the host, takes the state dir's lock, opens and
// probes the store (waiting out an outage, src/agent/store_outage.ts), claims the key space, and
// then either runs one full pass with progress on stderr (`--once`, exit 0 only if it completed
// every copy it attempted) or hands over to the running agent (src/agent/agent.ts).
import { systemClock } from "../base/clock.ts";
import { probeStore } from "../../providers/probe.ts";
import { Deadline } from "../../providers/retry.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { absentTopics, requireHost } from "../config/host.ts";
import { humanSize } from "../config/units.ts";
import { instrumentStore } from "../metrics/instrument_store.ts";
import { paceUploads } from "../../providers/paced_uploads.ts";
import { LiveBandwidth } from "../tier/upload_bandwidth.ts";
import { probeSpace } from "../layout/probe_space.ts";
import { credentialObserver } from "../metrics/observers.ts";
import { Registry } from "../metrics/registry.ts";
import { createTierdMetrics, initTopicSeries, watchFetchWorkers } from "../metrics/tierd.ts";
import { OpClassPacer } from "../../providers/pacer.ts";
import type { TierObserver } from "../tier/observer.ts";
import { describeProblem } from "../tier/problem.ts";
import { TierWorker } from "../tier/tier_worker.ts";
import { lockStateDir } from "../runtime/state_lock.ts";
import { RetryingStore } from "../../providers/retrying_store.ts";
import { KeySpaceMismatch, openLease } from "../ownership/claim.ts";
import { fencedStore } from "../ownership/fenced_store.ts";
import { IdentityError } from "../ownership/identity.ts";
import { type KeySpaceLease, KeySpaceOwned } from "../ownership/lease.ts";
import { OwnerRecordError } from "../ownership/owner_record.ts";
import { type Command, CONFIG_FLAG, type ParsedArgs, UsageError } from "./args.ts";
import { type CommandContext, loadContext, storeFor } from "./context.ts";
import { inventory } from "./inventory.ts";
import { runAgent } from "../agent/agent.ts";
import { waitOutOutage } from "../agent/store_outage.ts";
import { isOutage } from "../agent/store_wait.ts";
import { Progress } from "./progress.ts";

/** `tierd run [--config F] [--once]`. */
export const runCommand: Command = {
  spec: {
    name: "run",
    summary: "run the agent (--once: one full pass, then exit)",
    description: "Runs the agent beside the broker: copies sealed segments to the store, evicts\n" +
      "under the topics' local retention, applies total retention, and serves the HTTP API on\n" +
      "agent.listen until SIGTERM or SIGINT. Refuses to start (exit 2) when agent.data_dir does\n" +
      "not exist or holds no streams/, and when another agent owns the key space\n" +
      "{prefix}/{cluster_id}/ (the line names it, its host and when it last wrote). Stops\n" +
      "(exit 2) when another agent takes the key space over. A store it cannot reach at start\n" +
      "is waited for (/healthz answers, /readyz says why); one that refuses is exit 1.\n" +
      "With --once (which never waits), progress goes to\n" +
      "stderr: one rewritten line on a terminal, else one line per copied segment.",
    flags: {
      config: CONFIG_FLAG,
      once: {
        type: "boolean",
        help: "one full pass (discover, copy, clean dangling, evict, retention, housekeeping), " +
          "then exit: 0 if it completed, 1 otherwise",
      },
      "take-over": {
        type: "boolean",
        help: "become the owner of the key space even though another agent owns it (this " +
          "host replaces it, or its state dir was lost): that agent is fenced and stops writing",
      },
    },
  },
  run: runAgentCommand,
};

async function runAgentCommand({ values }: ParsedArgs): Promise<number> {
  const ctx = await loadContext(values.config);
  const { config, logger } = ctx;
  if (!config.tiered_storage.enabled) {
    throw new UsageError(
      `${ctx.configPath}: tiered_storage.enabled is false; set it to true to run the agent`,
    );
  }
  // An agent over a missing or empty data dir would idle forever, looking fine: refuse instead.
  await requireHost(config, ctx.configPath);
  for (const { entry, dir } of await absentTopics(config)) {
    logger.warn(
      "a [[topic]] names a topic the broker does not have (yet): nothing is tiered for it",
      {
        topic: entry,
        missing: dir,
      },
    );
  }
  // One agent per state dir, for the life of the process (the kernel drops it on exit).
  await lockStateDir(config.agent.state_dir, values.once ? "tierd run --once" : "tierd run");
  const registry = new Registry();
  const metrics = createTierdMetrics(registry);
  initTopicSeries(metrics, config.topic.filter((t) => t.tiered_storage));
  const opened = await storeFor(ctx, {
    observer: credentialObserver(metrics, registry, systemClock),
  });
  if (opened.fetchWorkers) watchFetchWorkers(registry, metrics, opened.fetchWorkers);
  // Every upload waits for the node-wide upload_bandwidth (read live: SIGHUP changes it).
  const store = paceUploads(
    instrumentStore(opened.store, metrics),
    new LiveBandwidth(() => ctx.config.tiered_storage.upload_bandwidth),
  );
  try {
    // What the agent will do, tried on a probe key first: a refusal is named now. A store
    // that refuses to be listed stops the start; one that does not answer is waited for
    // (store_wait.ts), except by `--once`; one that refuses writes leaves reads working, and
    // the copies fail (and show) until it is fixed.
    const probeOnce = (signal?: AbortSignal) =>
      probeStore(opened.store, opened.prefix, {
        writes: true,
        space: probeSpace(config.agent.state_dir),
        signal,
      });
    let probe = await probeOnce();
    if (isOutage(probe) && !values.once) {
      const waited = await waitOutOutage(ctx, probe, probeOnce, { registry, metrics, opened });
      if (!waited) return 0; // SIGTERM while waiting
      probe = waited;
    }
    if (!probe.ok && probe.stage === "list") {
      console.error(ctx.scrub(`tierd: probe failed: ${opened.describe}: ${probe.reason}`));
      return 1;
    }
    if (!probe.ok) {
      logger.error("store probe: the store refuses what copies need; reads still work", {
        store: opened.describe,
        reason: probe.reason,
      });
    }
    for (const warning of (probe.ok && probe.warnings) || []) {
      logger.warn("store probe", { store: opened.describe, warning });
    }
    logger.info("store probe ok", { store: opened.describe, prefix: opened.prefix });
    const refused = (err: unknown) => {
      if (
        err instanceof KeySpaceOwned || err instanceof KeySpaceMismatch ||
        err instanceof IdentityError || err instanceof OwnerRecordError
      ) {
        console.error(ctx.scrub(`tierd: ${err.message}`));
        return true;
      }
      return false;
    };
    let lease: KeySpaceLease;
    try {
      ({ lease } = await openLease({
        stateDir: config.agent.state_dir,
        keySpace: { prefix: opened.prefix, clusterId: config.agent.cluster_id },
        store: new RetryingStore(store, {
          clock: systemClock,
          maxBackoffMs: config.tiered_storage.upload_loop_backoff_max,
        }),
        describe: opened.describe,
        clock: systemClock,
        logger,
        takeOver: values["take-over"] === true,
      }));
    } catch (err) {
      if (refused(err)) return 2;
      throw err;
    }
    try {
      await lease.claim();
    } catch (err) {
      if (refused(err)) return 2;
      // The store refused or did not answer: `run --once` fails; the agent starts, serves
      // reads and claims the key space before its first write (nothing is written till then).
      if (values.once) throw err;
      logger.error("cannot claim the key space now; nothing is written until it is claimed", {
        err,
      });
    }
    // Every write and delete of the worker proves first that the key space is still ours.
    const fenced = fencedStore(store, lease);
    if (values.once) return await runOnce(ctx, fenced, opened, lease);
    return await runAgent(ctx, { store, fenced }, opened, registry, metrics, lease);
  } finally {
    await opened.store.close?.();
  }
}

async function runOnce(
  ctx: CommandContext,
  store: ObjectStore,
  opened: { prefix: string; describe: string },
  lease: KeySpaceLease,
): Promise<number> {
  const copies = await copyProgress(ctx);
  const root = Deadline.after(Infinity, undefined, { clock: systemClock });
  lease.onFenced((err) => root.cancel(err));
  const worker = new TierWorker({
    config: ctx.config,
    store,
    prefix: opened.prefix,
    describe: opened.describe,
    logger: ctx.logger,
    root,
    pacer: new OpClassPacer(),
    observer: copies.observer,
    owner: lease,
  });
  try {
    const report = await worker.pass();
    if (lease.fenced) {
      console.error(ctx.scrub(`tierd: ${lease.fenced.message}`));
      return 2;
    }
    // One housekeeping run too (manifests, verify, sweeps), whatever the agent's load.
    const housekeeping = await worker.housekeep({ force: true }) ?? [];
    const problems = [...report.problems, ...housekeeping.flatMap((j) => j.problems)];
    ctx.logger.info("pass finished", {
      partitions: report.partitions.length,
      copied: report.copied,
      adopted: report.adopted,
      failed: report.failed,
      cleaned: report.cleaned,
      lost: report.lost,
      evicted: report.evicted,
      remote_deleted: report.remoteDeleted,
      pending: report.pending,
    });
    if (problems.length > 0) {
      console.error(
        ctx.scrub(
          `tierd: pass incomplete: ${problems.length} error(s); first: ${
            describeProblem(problems[0])
          }`,
        ),
      );
      return 1;
    }
    return 0;
  } finally {
    copies.progress.end();
    await worker.close();
  }
}

/**
 * Progress of the copies of `run --once` on stderr: the backlog (sealed local segments without
 * a verified copy) is sized from the journals before the pass, then each upload the worker
 * reports moves it on. A backlog that cannot be sized (a damaged journal, which the pass itself
 * then reports) leaves the total at what was done.
 */
async function copyProgress(
  ctx: CommandContext,
): Promise<{ observer: TierObserver; progress: Progress }> {
  let total = 0;
  let bytesTotal = 0;
  try {
    for (const part of await inventory(ctx.config)) {
      for (const s of part.segments) {
        if (!s.pendingCopy) continue;
        total++;
        bytesTotal += s.bytes;
      }
    }
  } catch (err) {
    ctx.logger.debug("copy backlog not sized for the progress line", { err });
  }
  const progress = new Progress("run --once: copy", { unit: "segments" });
  let done = 0;
  let bytes = 0;
  /** What the copies under way have stored so far, by object key. */
  const underWay = new Map<string, number>();
  const state = () => {
    let partial = 0;
    for (const n of underWay.values()) partial += n;
    return {
      done,
      total: Math.max(total, done),
      bytesDone: bytes + partial,
      bytesTotal: Math.max(bytesTotal, bytes + partial),
    };
  };
  const observer: TierObserver = {
    // A big segment moves the line as its parts are stored, not only when it is done.
    uploadProgress(key, stored) {
      if (stored === undefined) {
        underWay.delete(key);
        return;
      }
      underWay.set(key, stored);
      progress.update(state(), undefined, { partial: true });
    },
    upload(outcome, seconds, size) {
      if (outcome !== "failed") {
        done++;
        bytes += size;
      }
      progress.update(
        state(),
        outcome === "failed"
          ? `a copy failed after ${seconds.toFixed(1)} s`
          : `${outcome === "adopted" ? "adopted" : "copied"} ${humanSize(size)} in ${
            seconds.toFixed(1)
          } s`,
      );
    },
  };
  return { observer, progress };
}
