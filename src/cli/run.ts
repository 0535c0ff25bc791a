// `tierd run [--once]`: the agent. `--once` runs one full pass and exits 0 only if it
// completed every copy it attempted. Otherwise the agent serves its HTTP API (reads, metrics,
// status page) and repeats passes, woken by a filesystem watch of the data directory and a
// periodic scan that backs off while idle, until SIGTERM or SIGINT.
import { watch } from "node:fs";
import { type Clock, systemClock } from "../../providers/clock.ts";
import { probeStore } from "../../providers/probe.ts";
import { RequestMeter } from "../../providers/request_meter.ts";
import { Deadline } from "../../providers/retry.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { ChunkCache, chunkCacheOptions } from "../cache/mod.ts";
import { createApp } from "../http/app.ts";
import { listenOptions, type RunningServer, serve } from "../http/serve.ts";
import { createIggyHttp, type IggyHttp } from "../iggy_http/app.ts";
import type { Logger } from "../log.ts";
import { instrumentStore } from "../metrics/instrument_store.ts";
import { cacheObserver, tierObserver } from "../metrics/observers.ts";
import { Registry } from "../metrics/registry.ts";
import { createTierdMetrics } from "../metrics/tierd.ts";
import { createReadContext } from "../read/context.ts";
import { ReadBudget, readBudgetBytes } from "../read/read_budget.ts";
import { OpClassPacer } from "../../providers/pacer.ts";
import { type PassReport, TierWorker } from "../tier/tier_worker.ts";
import { lockStateDir } from "../runtime/state_lock.ts";
import { parseFlags, UsageError } from "./args.ts";
import { type CommandContext, loadContext, storeFor } from "./context.ts";

const MIN_IDLE_MS = 100;

export async function runCommand(args: string[]): Promise<number> {
  const { values } = parseFlags(args, { once: { type: "boolean" } });
  const ctx = await loadContext(values.config);
  const { config, logger } = ctx;
  if (!config.tiered_storage.enabled) {
    throw new UsageError(
      `${ctx.configPath}: tiered_storage.enabled is false; set it to true to run the agent`,
    );
  }
  if (config.agent.iggy_http.listen !== "" && config.agent.broker.http_url === "") {
    throw new UsageError(
      `${ctx.configPath}: agent.iggy_http.listen needs agent.broker.http_url, the broker it fronts`,
    );
  }
  // One agent per state dir, for the life of the process (the kernel drops it on exit).
  await lockStateDir(config.agent.state_dir, values.once ? "tierd run --once" : "tierd run");
  const opened = await storeFor(ctx);
  const registry = new Registry();
  const metrics = createTierdMetrics(registry);
  const store = instrumentStore(opened.store, metrics);
  try {
    const probe = await probeStore(opened.store, opened.prefix);
    if (!probe.ok) {
      console.error(`tierd: probe failed: ${opened.describe}: ${probe.reason}`);
      return 1;
    }
    logger.info("store probe ok", { store: opened.describe, prefix: opened.prefix });
    if (values.once) return await runOnce(ctx, store, opened.prefix);
    return await runAgent(ctx, store, opened, registry, metrics);
  } finally {
    await opened.store.close?.();
  }
}

async function runOnce(ctx: CommandContext, store: ObjectStore, prefix: string): Promise<number> {
  const worker = new TierWorker({
    config: ctx.config,
    store,
    prefix,
    logger: ctx.logger,
    pacer: new OpClassPacer(),
  });
  try {
    const report = await worker.pass();
    // One housekeeping run too (manifests, verify, sweeps), whatever the agent's load.
    const housekeeping = await worker.housekeep({ force: true }) ?? [];
    report.errors.push(...housekeeping.flatMap((j) => j.errors));
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
    if (report.errors.length > 0) {
      console.error(
        `tierd: pass incomplete: ${report.errors.length} error(s); first: ${report.errors[0]}`,
      );
      return 1;
    }
    return 0;
  } finally {
    await worker.close();
  }
}

async function runAgent(
  ctx: CommandContext,
  store: ObjectStore,
  opened: { prefix: string; describe: string },
  registry: Registry,
  metrics: ReturnType<typeof createTierdMetrics>,
): Promise<number> {
  const { config, logger } = ctx;
  const clock = systemClock;
  // Every store call of the worker runs under this deadline: a stop signal cancels them all.
  const root = Deadline.after(Infinity, undefined, { clock });
  const stop = new AbortController();
  const onSignal = (sig: string) => {
    if (stop.signal.aborted) return;
    logger.info("shutting down: finishing or abandoning in-flight work", { signal: sig });
    stop.abort();
    root.cancel(new DOMException(`stopped by ${sig}`, "AbortError"));
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));

  // Every store request counts towards "busy": housekeeping waits until the agent is idle.
  const meter = new RequestMeter({ clock });
  const metered = meter.wrap(store);
  const worker = new TierWorker({
    config,
    store: metered,
    prefix: opened.prefix,
    logger,
    clock,
    root,
    observer: tierObserver(metrics),
    pacer: new OpClassPacer({ clock }),
    meter,
  });
  const cache = await ChunkCache.open(metered, {
    ...chunkCacheOptions(config.tiered_storage),
    stats: cacheObserver(metrics),
  });
  let ready = false;
  const read = createReadContext({
    config,
    store,
    prefix: opened.prefix,
    reader: cache,
    states: worker,
    metrics,
    logger,
    clock,
    budget: new ReadBudget(
      readBudgetBytes(config.agent.read_memory_budget, config.tiered_storage.cache.size),
      { clock },
    ),
  });
  const app = createApp({
    read,
    registry,
    metrics,
    ready: () => ready,
    apiToken: config.agent.api_token,
    admin: { pass: () => worker.pass(), compact: () => worker.compact() },
    storeDescription: opened.describe,
  });
  const server = await serve(app, {
    ...listenOptions(config.agent.listen),
    signal: stop.signal,
    headerTimeoutMs: config.agent.http_header_timeout,
    idleTimeoutMs: config.agent.http_idle_timeout,
    maxConnections: config.agent.http_max_connections || undefined,
    clock,
    logger,
  });
  logger.info("http api listening", { url: serverUrl(server) });
  // The Iggy-compatible listener: the broker's own HTTP API, reading through to the bucket.
  let iggy: { handler: IggyHttp; server: RunningServer } | undefined;
  if (config.agent.iggy_http.listen !== "") {
    const handler = createIggyHttp({
      read,
      brokerUrl: config.agent.broker.http_url,
      authCacheTtlMs: config.agent.iggy_http.auth_cache_ttl,
      logger,
      clock,
    });
    iggy = {
      handler,
      server: await serve(handler, {
        ...listenOptions(config.agent.iggy_http.listen),
        signal: stop.signal,
        headerTimeoutMs: config.agent.http_header_timeout,
        idleTimeoutMs: config.agent.http_idle_timeout,
        maxConnections: config.agent.http_max_connections || undefined,
        clock,
        logger,
      }),
    };
    logger.info("iggy http api listening", {
      url: serverUrl(iggy.server),
      broker: config.agent.broker.http_url,
    });
  }
  try {
    await loop(worker, config.agent.data_dir, config.tiered_storage.upload_loop_backoff_max, {
      signal: stop.signal,
      clock,
      logger,
      onFirstPass: () => {
        ready = true;
        logger.info("ready: journals replayed, first pass done");
      },
    });
    return 0;
  } finally {
    await worker.close();
    await cache.close();
    await server.close();
    await iggy?.server.close();
    iggy?.handler.close();
    logger.info("stopped");
  }
}

function serverUrl(server: RunningServer): string {
  const host = server.hostname.includes(":") ? `[${server.hostname}]` : server.hostname;
  return `http://${host}:${server.port}/`;
}

async function loop(
  worker: TierWorker,
  dataDir: string,
  maxIdleMs: number,
  opts: { signal: AbortSignal; clock: Clock; logger: Logger; onFirstPass: () => void },
): Promise<void> {
  let wake: (() => void) | undefined;
  let dirty = false; // a change arrived while a pass was running
  let idleMs = MIN_IDLE_MS;
  let first = true;
  let watcher: ReturnType<typeof watch> | undefined;
  try {
    watcher = watch(dataDir, { recursive: true }, () => {
      dirty = true;
      wake?.();
    });
  } catch (err) {
    opts.logger.warn("filesystem watch unavailable; relying on the periodic scan", { err });
  }
  opts.signal.addEventListener("abort", () => wake?.());
  const waitFor = async (ms: number) => {
    await new Promise<void>((resolve) => {
      const cancel = opts.clock.setTimer(ms, resolve);
      wake = () => {
        cancel();
        idleMs = MIN_IDLE_MS;
        resolve();
      };
    });
    wake = undefined;
  };
  try {
    while (!opts.signal.aborted) {
      dirty = false;
      let report: PassReport;
      try {
        report = await worker.pass();
      } catch (err) {
        // Never end the agent over one pass: log it, back off, and try again.
        opts.logger.error("tier pass failed; retried after a back-off", { err });
        idleMs = Math.min(idleMs * 2, maxIdleMs);
        await waitFor(idleMs);
        continue;
      }
      if (first) {
        first = false;
        opts.onFirstPass();
      }
      const busy = report.copied + report.adopted + report.cleaned + report.failed +
          report.evicted + report.remoteDeleted > 0;
      if (busy) {
        opts.logger.info("pass finished", {
          copied: report.copied,
          adopted: report.adopted,
          failed: report.failed,
          cleaned: report.cleaned,
          evicted: report.evicted,
          remote_deleted: report.remoteDeleted,
          pending: report.pending,
        });
      }
      // Back off while idle or failing; a filesystem event or finished work resets the scan.
      idleMs = (busy && report.failed === 0) || dirty
        ? MIN_IDLE_MS
        : Math.min(idleMs * 2, maxIdleMs);
      if (opts.signal.aborted) break;
      try {
        await worker.housekeep(); // runs only when the agent is idle, or once per interval
      } catch (err) {
        opts.logger.error("housekeeping run failed; retried later", { err });
      }
      if (opts.signal.aborted) break;
      // Sealing depends on quiet files, so a pending segment needs a rescan even with no event.
      await waitFor(idleMs);
    }
  } finally {
    watcher?.close();
  }
}
