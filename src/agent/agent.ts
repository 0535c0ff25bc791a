// The running agent: what `tierd run` starts once its store answered and its key space is
// claimed — the tier worker and its loop, the chunk cache, the read context, every listener, the
// signals (SIGTERM/SIGINT stop, SIGHUP reloads) and readiness — and how it shuts down.
import { systemClock } from "../base/clock.ts";
import { OpClassPacer } from "../../providers/pacer.ts";
import { RequestMeter } from "../../providers/request_meter.ts";
import { Deadline } from "../../providers/retry.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { ChunkCache, chunkCacheOptions } from "../cache/mod.ts";
import { PemFileError, readPemFile, TlsPairError } from "../config/pem_file.ts";
import { createApp, createOpsApp } from "../http/app.ts";
import { type RunningServer, serve } from "../http/serve.ts";
import { createIggyHttp, type IggyHttp } from "../iggy_http/app.ts";
import type { IggyTcp } from "../iggy_tcp/front.ts";
import { startIggyTcpFromConfig } from "../iggy_tcp/from_config.ts";
import { cacheObserver, tierObserver } from "../metrics/observers.ts";
import type { Registry } from "../metrics/registry.ts";
import { requestCost } from "../metrics/request_cost.ts";
import type { createTierdMetrics } from "../metrics/tierd.ts";
import type { KeySpaceLease } from "../ownership/lease.ts";
import { createReadContext } from "../read/context.ts";
import { PartitionBirths } from "../read/partition_births.ts";
import { ReadBudget, readBudgetBytes } from "../read/read_budget.ts";
import { agentView } from "../runtime/agent_view.ts";
import { collectGarbage, ResidentGuard } from "../runtime/memory.ts";
import { CopyProgress } from "../runtime/progress.ts";
import { reloadConfig } from "../runtime/reload.ts";
import { systemdNotifier } from "../runtime/systemd.ts";
import { resolveEvictVia } from "../config/schema.ts";
import { BrokerClient } from "../tier/broker_client.ts";
import { passAnswer, TierWorker } from "../tier/tier_worker.ts";
import type { AgentContext } from "./context.ts";
import {
  brokerCa,
  httpListenerOptions,
  listenerTls,
  readGuardFor,
  serverUrl,
} from "./listeners.ts";
import { PartitionWatch } from "./partition_watch.ts";
import { runLoop } from "./run_loop.ts";

/**
 * Runs the agent until SIGTERM or SIGINT (or another agent takes the key space over): the tier
 * worker's loop, the chunk cache, the HTTP API, the ops listener, the Iggy HTTP listener and the
 * binary front, as the config asks.
 *
 * @returns the exit code: 0 after a stop signal, 2 when the key space was taken over
 */
export async function runAgent(
  ctx: AgentContext,
  stores: { store: ObjectStore; fenced: ObjectStore },
  opened: { prefix: string; describe: string },
  registry: Registry,
  metrics: ReturnType<typeof createTierdMetrics>,
  lease: KeySpaceLease,
): Promise<number> {
  const { config, logger } = ctx;
  const { store } = stores;
  const clock = systemClock;
  // Every store call of the worker runs under this deadline: a stop signal cancels them all.
  const root = Deadline.after(Infinity, undefined, { clock });
  const stop = new AbortController();
  const systemd = await systemdNotifier(logger);
  const onSignal = (sig: string) => {
    if (stop.signal.aborted) return;
    logger.info("shutting down: finishing or abandoning in-flight work", { signal: sig });
    void systemd?.stopping();
    stop.abort();
    root.cancel(new DOMException(`stopped by ${sig}`, "AbortError"));
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  // Another agent took the key space over: nothing more is written; the agent stops (exit 2).
  lease.onFenced(() => onSignal("key space taken over"));
  // SIGHUP re-reads the config: topic retention and per-pass settings apply live.
  const reloadTls: (() => Promise<void>)[] = [];
  process.on("SIGHUP", () => {
    void reloadConfig(ctx.configPath, config, logger);
    // The listeners' certificate and key, read again: new connections get them.
    for (const reload of reloadTls) {
      reload().then(
        () => logger.info("tls certificate reloaded"),
        (err) =>
          err instanceof PemFileError || err instanceof TlsPairError
            ? logger.error("tls certificate not reloaded; the one in use stays", { err })
            // The old listener had let the port go and the new one could not bind it.
            : logger.error("tls listener could not bind its port again: restart tierd", { err }),
      );
    }
  });
  const progress = new CopyProgress(clock);

  // Every store request counts towards "busy": housekeeping waits until the agent is idle.
  const meter = new RequestMeter({ clock });
  const metered = meter.wrap(store);
  // One client of the broker's HTTP API, one login: the evictor and the read path share it.
  const broker = config.agent.broker.http_url === ""
    ? undefined
    : new BrokerClient(config.agent.broker);
  const worker = new TierWorker({
    config,
    broker: resolveEvictVia(config) === "broker" ? broker : undefined,
    store: meter.wrap(stores.fenced),
    owner: lease,
    describe: opened.describe,
    prefix: opened.prefix,
    logger,
    clock,
    root,
    observer: progress.observer(tierObserver(metrics)),
    pacer: new OpClassPacer({ clock }),
    meter,
  });
  const cache = await ChunkCache.open(metered, {
    ...chunkCacheOptions(config.tiered_storage),
    stats: cacheObserver(metrics),
  });
  let ready = false;
  const markReady = (how: string) => {
    if (ready) return;
    ready = true;
    logger.info(`ready: ${how}`);
    void systemd?.ready(how);
    systemd?.startWatchdog();
  };
  const readBudget = readBudgetBytes(
    config.agent.read_memory_budget,
    config.tiered_storage.cache.size,
  );
  // Resident within its idle size plus the read budget: collected when reads leave it beyond.
  registry.onCollect(() => {
    const cost = requestCost(metrics, config.tiered_storage.request_prices);
    metrics.storeRequestCost.reset();
    metrics.storeRequestCost.set({ currency: cost.currency }, cost.cost);
  });
  const memory = new ResidentGuard(readBudget, {
    collected: () => metrics.memoryCollections.inc(),
  });
  // Reads ask the broker when it created a partition after its metadata changed (a topic
  // deleted and recreated).
  const births = broker &&
    new PartitionBirths(
      config.agent.data_dir,
      (id, signal) => broker.partitionBirth(id, signal),
      { timeoutMs: config.tiered_storage.fetch_timeout, clock },
    );
  const read = createReadContext({
    config,
    store,
    prefix: opened.prefix,
    reader: cache,
    states: worker,
    metrics,
    logger,
    clock,
    budget: new ReadBudget(readBudget, { clock, onReleased: (n) => memory.released(n) }),
    births,
  });
  const readAuth = readGuardFor(config, clock, await brokerCa(config));
  const app = createApp({
    read,
    registry,
    metrics,
    ready: () => ready,
    apiToken: config.agent.api_token,
    readGuard: readAuth.guard,
    admin: { pass: async () => passAnswer(await worker.pass()), compact: () => worker.compact() },
    storeDescription: opened.describe,
    agent: agentView({
      worker,
      progress,
      metrics,
      cache,
      prices: config.tiered_storage.request_prices,
    }),
    scrub: ctx.scrub,
  });
  const tls = listenerTls(config);
  const maxConnections = config.agent.http_max_connections || undefined;
  const server = await serve(
    app,
    httpListenerOptions(config, config.agent.listen, {
      signal: stop.signal,
      maxConnections,
      clock,
      logger,
      tls,
    }),
  );
  if (server.reloadTls) reloadTls.push(server.reloadTls);
  logger.info("http api listening", { url: serverUrl(server), read_auth: config.agent.read_auth });
  if (config.agent.read_auth_insecure && config.agent.read_auth === "none") {
    logger.warn(
      "records are served without access control (read_auth = none, read_auth_insecure = true): " +
        "whoever reaches the API reads every tiered message",
      { listen: config.agent.listen },
    );
  }
  // Probes and metrics alone, for the kubelet and Prometheus (they stay on the API as well).
  let ops: RunningServer | undefined;
  if (config.agent.ops_listen !== "") {
    ops = await serve(
      createOpsApp({ read, registry, metrics, ready: () => ready, logger }),
      httpListenerOptions(config, config.agent.ops_listen, { signal: stop.signal, clock, logger }),
    );
    logger.info("ops listening (probes and metrics)", { url: serverUrl(ops) });
  }
  // Ready once every partition is open (journal replay, boot reconciliation), not after the
  // first pass, which takes hours with a big backlog; open() runs before the first pass.
  worker.open().then(
    (n) => {
      collectGarbage(); // boot's garbage: replaying journals and reading markers
      memory.settle();
      markReady(`store probe passed, ${n} partition journals replayed`);
    },
    (err) => logger.error("opening the partitions failed; ready after the first pass", { err }),
  );
  // The Iggy-compatible listener: the broker's own HTTP API, reading through to the bucket.
  let iggy: { handler: IggyHttp; server: RunningServer } | undefined;
  if (config.agent.iggy_http.listen !== "") {
    const handler = createIggyHttp({
      read,
      brokerUrl: config.agent.broker.http_url,
      brokerCa: await brokerCa(config),
      authCacheTtlMs: config.agent.iggy_http.auth_cache_ttl,
      metrics,
      logger,
      clock,
    });
    iggy = {
      handler,
      server: await serve(
        handler,
        httpListenerOptions(config, config.agent.iggy_http.listen, {
          signal: stop.signal,
          maxConnections,
          clock,
          logger,
          tls,
        }),
      ),
    };
    if (iggy.server.reloadTls) reloadTls.push(iggy.server.reloadTls);
    logger.info("iggy http api listening", {
      url: serverUrl(iggy.server),
      broker: config.agent.broker.http_url,
    });
  }
  // The binary front: the broker's TCP protocol, reading through to the bucket.
  let tcpFront: IggyTcp | undefined;
  if (config.agent.iggy_tcp.listen !== "") {
    // The front presents the API's certificate unless it has its own.
    const front = config.agent.iggy_tcp.tls_cert !== "" ? config.agent.iggy_tcp : {
      ...config.agent.iggy_tcp,
      tls_cert: config.agent.tls_cert,
      tls_key: config.agent.tls_key,
    };
    tcpFront = await startIggyTcpFromConfig(front, {
      read,
      metrics,
      authCacheTtlMs: config.agent.iggy_http.auth_cache_ttl,
      logger,
      clock,
    });
    const reloadFront = tcpFront.reloadTls;
    if (reloadFront) {
      const key = front === config.agent.iggy_tcp ? "agent.iggy_tcp" : "agent";
      reloadTls.push(async () =>
        reloadFront({
          cert: await readPemFile(front.tls_cert, `${key}.tls_cert`),
          key: await readPemFile(front.tls_key, `${key}.tls_key`),
        })
      );
    }
    logger.info("iggy tcp front listening", {
      address: `${tcpFront.hostname}:${tcpFront.port}`,
      broker: config.agent.iggy_tcp.broker_address,
      tls: front.tls_cert !== "",
    });
  }
  try {
    await runLoop(worker, {
      maxIdleMs: config.tiered_storage.upload_loop_backoff_max,
      signal: stop.signal,
      clock,
      logger,
      watch: (changed) =>
        new PartitionWatch(
          config.agent.data_dir,
          config.topic.filter((t) => t.tiered_storage),
          changed,
          { logger },
        ),
      onFirstPass: () => {
        collectGarbage(); // the first pass reads every record too
        memory.settle();
        markReady("journals replayed, first pass done");
        logger.info("first pass done");
      },
    });
    if (lease.fenced) {
      console.error(ctx.scrub(`tierd: ${lease.fenced.message}`));
      return 2;
    }
    return 0;
  } finally {
    await worker.close();
    await cache.close();
    await server.close();
    await ops?.close();
    readAuth.close();
    await tcpFront?.close();
    await iggy?.server.close();
    iggy?.handler.close();
    systemd?.close();
    logger.info("stopped");
  }
}
