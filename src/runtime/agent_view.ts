// The running agent's side of the status page, `/v1/status` and `/v1/partitions`
// (`http/status_model.ts`'s `AgentView`), read from the tier worker (its partitions, their last
// pass reports, health, housekeeping), the copy progress, the chunk cache and the metrics.
import type { CacheStatsSnapshot } from "../cache/stats.ts";
import type { AgentView, PartitionWork, StoreView } from "../http/status_model.ts";
import type { RequestPricesConfig } from "../config/schema.ts";
import { throttledTotal } from "../metrics/instrument_store.ts";
import { requestCost } from "../metrics/request_cost.ts";
import type { TierdMetrics } from "../metrics/tierd.ts";
import type { TierWorker } from "../tier/tier_worker.ts";
import type { CopyProgress } from "./progress.ts";

/** What {@link agentView} reads from. */
export interface AgentViewSources {
  worker: TierWorker;
  progress: CopyProgress;
  metrics: TierdMetrics;
  cache?: { stats(): CacheStatsSnapshot };
  /** The store's request prices, for the cost estimate. */
  prices?: RequestPricesConfig;
}

/** Builds the {@link AgentView} of a running agent. */
export function agentView(s: AgentViewSources): AgentView {
  const { worker, progress, metrics } = s;
  return {
    partition(label): PartitionWork | undefined {
      const firstPassOver = worker.lastPass !== undefined;
      const failed = worker.failedToOpen.get(label);
      const rate = progress.rate(label);
      const copied = { segments: rate.segments, bytes: rate.bytes };
      if (failed !== undefined) {
        return {
          firstPassDone: firstPassOver,
          copied,
          bytesPerSecond: 0,
          problems: [],
          storeUnreachable: false,
          pending: 0,
          blocked: [],
        };
      }
      const p = worker.partitions.find((x) => x.label === label);
      if (!p) return undefined;
      const last = p.lastPass;
      return {
        firstPassDone: last !== undefined,
        copied,
        bytesPerSecond: rate.bytesPerSecond,
        problems: last?.problems ?? [],
        storeUnreachable: last?.storeUnreachable ?? false,
        pending: last?.pending ?? 0,
        ...(p.uploadFault && { uploadFault: p.uploadFault }),
        // Why its eviction waits (a consumer's offset, a running broker, a broker that kept it).
        blocked: p.evictionBlock ? [p.evictionBlock.text] : [],
      };
    },
    passes() {
      const open = worker.partitions;
      const total = open.length + worker.failedToOpen.size;
      const last = worker.lastPass;
      return {
        firstPass: {
          done: last !== undefined,
          partitionsDone: last !== undefined
            ? total
            : open.filter((p) => p.lastPass !== undefined).length,
          partitionsTotal: total,
        },
        last: last && {
          startedAt: last.startedAt,
          finishedAt: last.finishedAt,
          problems: last.report.problems,
          copied: last.report.copied + last.report.adopted,
          failed: last.report.failed,
          evicted: last.report.evicted,
        },
      };
    },
    store: () => {
      const since = metrics.uploadStalledSince.value();
      const view: StoreView = {
        stalled: metrics.uploadStalled.value() === 1,
        throttledRequests: throttledTotal(metrics),
        ...(since > 0 && { stalledSince: since * 1000 }),
      };
      if (s.prices) {
        const cost = requestCost(metrics, s.prices);
        view.requests = { count: cost.requests, cost: cost.cost, currency: cost.currency };
      }
      return view;
    },
    bytesPerSecond: () => progress.rate().bytesPerSecond,
    cache() {
      const c = s.cache?.stats();
      return c && {
        bytes: c.bytes,
        budgetBytes: c.budgetBytes,
        objects: c.objects,
        maxObjects: c.maxObjects,
        hits: c.hits,
        misses: c.misses,
      };
    },
    housekeeping: () => worker.housekeeper.status(),
  };
}
