// `tierd run [--once]`: the agent. `--once` runs one full pass and exits 0 only if it
// completed every copy it attempted. Otherwise the agent serves its HTTP API (reads, metrics,
// status page) and repeats passes, woken by a filesystem watch of the partitions it tiers
// (`partition_watch.ts`) and a periodic scan that backs off while idle, until SIGTERM or SIGINT.
import { type Clock, systemClock } from "../../providers/clock.ts";
import { type ProbeResult, probeStore } from "../../providers/probe.ts";
import { RequestMeter } from "../../providers/request_meter.ts";
import { Deadline } from "../../providers/retry.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { ChunkCache, chunkCacheOptions } from "../cache/mod.ts";
import { absentTopics, requireHost } from "../config/host.ts";
import { humanSize } from "../config/units.ts";
import { createApp, createOpsApp } from "../http/app.ts";
import { iggyReadGuard, type ReadGuard, tokenReadGuard } from "../http/read_auth.ts";
import { Upstream } from "../iggy_http/upstream.ts";
import { listenOptions, type RunningServer, serve } from "../http/serve.ts";
import { createIggyHttp, type IggyHttp } from "../iggy_http/app.ts";
import type { IggyTcp } from "../iggy_tcp/front.ts";
import { startIggyTcpFromConfig } from "../iggy_tcp/from_config.ts";
import type { Logger } from "../log.ts";
import { instrumentStore } from "../metrics/instrument_store.ts";
import { paceUploads } from "../../providers/paced_uploads.ts";
import { LiveBandwidth } from "../tier/upload_bandwidth.ts";
import { requestCost } from "../metrics/request_cost.ts";
import { probeSpace } from "../layout/probe_space.ts";
import {
  cacheObserver,
  credentialObserver,
  markStalled,
  tierObserver,
} from "../metrics/observers.ts";
import { Registry } from "../metrics/registry.ts";
import { createTierdMetrics, initTopicSeries } from "../metrics/tierd.ts";
import { createReadContext } from "../read/context.ts";
import { ReadBudget, readBudgetBytes } from "../read/read_budget.ts";
import { collectGarbage, ResidentGuard } from "../runtime/memory.ts";
import { OpClassPacer } from "../../providers/pacer.ts";
import type { TierObserver } from "../tier/observer.ts";
import { type PassReport, TierWorker } from "../tier/tier_worker.ts";
import { lockStateDir } from "../runtime/state_lock.ts";
import { RetryingStore } from "../../providers/retrying_store.ts";
import { KeySpaceMismatch, openLease } from "../ownership/claim.ts";
import { fencedStore } from "../ownership/fenced_store.ts";
import { IdentityError } from "../ownership/identity.ts";
import { type KeySpaceLease, KeySpaceOwned } from "../ownership/lease.ts";
import { OwnerRecordError } from "../ownership/owner_record.ts";
import type { Config } from "../config/schema.ts";
import { PemFileError, readPemFile, TlsPairError } from "../config/pem_file.ts";
import { type Command, CONFIG_FLAG, type ParsedArgs, UsageError } from "./args.ts";
import { agentView } from "../runtime/agent_view.ts";
import { CopyProgress } from "../runtime/progress.ts";
import { reloadConfig } from "../runtime/reload.ts";
import { systemdNotifier } from "../runtime/systemd.ts";
import { type CommandContext, loadContext, storeFor } from "./context.ts";
import { inventory } from "./inventory.ts";
import { PartitionWatch } from "./partition_watch.ts";
import { type FailedProbe, isOutage, waitForStore } from "./store_wait.ts";
import { Progress } from "./progress.ts";

const MIN_IDLE_MS = 100;

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

/**
 * Waits for a store that did not answer the start's probe, answering `/healthz`, `/readyz` and
 * `/metrics` on the agent's listeners meanwhile; SIGTERM or SIGINT stops the wait.
 * @returns the probe that ended the wait; undefined when a signal stopped it
 */
async function waitOutOutage(
  ctx: CommandContext,
  failed: FailedProbe,
  probe: (signal?: AbortSignal) => Promise<ProbeResult>,
  o: {
    registry: Registry;
    metrics: ReturnType<typeof createTierdMetrics>;
    opened: { prefix: string; describe: string; store: ObjectStore };
  },
): Promise<ProbeResult | undefined> {
  const { config, logger } = ctx;
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  const read = createReadContext({
    config,
    store: o.opened.store,
    prefix: o.opened.prefix,
    logger,
  });
  const serveWhileWaiting = async (waitingFor: () => string) => {
    const app = createOpsApp({
      read,
      registry: o.registry,
      metrics: o.metrics,
      ready: () => false,
      waitingFor,
      logger,
    });
    // The probes and metrics answer; the rest of the API says what it waits for.
    const handler = {
      fetch: (req: Request) =>
        OPS_PATHS.has(new URL(req.url).pathname) ? app.fetch(req) : Response.json(
          { error: "not_ready", message: `not ready: ${waitingFor()}` },
          { status: 503, headers: { "retry-after": "5" } },
        ),
    };
    const listeners = [config.agent.listen, config.agent.ops_listen].filter((l) => l !== "");
    const servers: RunningServer[] = [];
    try {
      for (const [i, listen] of listeners.entries()) {
        servers.push(
          await serve(handler, {
            ...listenOptions(listen),
            headerTimeoutMs: config.agent.http_header_timeout,
            idleTimeoutMs: config.agent.http_idle_timeout,
            clock: systemClock,
            logger,
            // The API's listener keeps its TLS; the ops listener has none.
            tls: i === 0 ? listenerTls(config) : undefined,
          }),
        );
      }
    } catch (err) {
      await Promise.all(servers.map((s) => s.close()));
      throw err;
    }
    return async () => {
      await Promise.all(servers.map((s) => s.close()));
    };
  };
  try {
    return await waitForStore({
      failed,
      probe,
      serve: serveWhileWaiting,
      stalled: (waiting) => markStalled(o.metrics, waiting ? 1 : 0, systemClock.now()),
      describe: o.opened.describe,
      logger,
      clock: systemClock,
      signal: stop.signal,
      maxPauseMs: Math.max(config.tiered_storage.upload_loop_backoff_max, 1000),
      notifier: await systemdNotifier(logger),
    });
  } finally {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
  }
}

/** What answers while the agent waits for its store. */
const OPS_PATHS = new Set(["/healthz", "/readyz", "/metrics"]);

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
        ctx.scrub(
          `tierd: pass incomplete: ${report.errors.length} error(s); first: ${report.errors[0]}`,
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

async function runAgent(
  ctx: CommandContext,
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
  const worker = new TierWorker({
    config,
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
  });
  const readAuth = readGuardFor(config, clock, await brokerCa(config));
  const app = createApp({
    read,
    registry,
    metrics,
    ready: () => ready,
    apiToken: config.agent.api_token,
    readGuard: readAuth.guard,
    admin: { pass: () => worker.pass(), compact: () => worker.compact() },
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
  const server = await serve(app, {
    ...listenOptions(config.agent.listen),
    signal: stop.signal,
    headerTimeoutMs: config.agent.http_header_timeout,
    idleTimeoutMs: config.agent.http_idle_timeout,
    maxConnections: config.agent.http_max_connections || undefined,
    clock,
    logger,
    tls,
  });
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
    ops = await serve(createOpsApp({ read, registry, metrics, ready: () => ready, logger }), {
      ...listenOptions(config.agent.ops_listen),
      signal: stop.signal,
      headerTimeoutMs: config.agent.http_header_timeout,
      idleTimeoutMs: config.agent.http_idle_timeout,
      clock,
      logger,
    });
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
      server: await serve(handler, {
        ...listenOptions(config.agent.iggy_http.listen),
        signal: stop.signal,
        headerTimeoutMs: config.agent.http_header_timeout,
        idleTimeoutMs: config.agent.http_idle_timeout,
        maxConnections: config.agent.http_max_connections || undefined,
        clock,
        logger,
        tls,
      }),
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
    await loop(worker, config, {
      signal: stop.signal,
      clock,
      logger,
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

/** The records route's guard for `agent.read_auth` (none for `none`), and what it holds. */
function readGuardFor(
  config: Config,
  clock: Clock,
  ca: string | undefined,
): { guard?: ReadGuard; close(): void } {
  switch (config.agent.read_auth) {
    case "token":
      return { guard: tokenReadGuard(config.agent.read_token), close: () => {} };
    case "iggy": {
      const upstream = new Upstream(config.agent.broker.http_url, { ca });
      return {
        guard: iggyReadGuard(upstream, config.agent.iggy_http.auth_cache_ttl, clock),
        close: () => upstream.close(),
      };
    }
    case "none":
      return { close: () => {} };
  }
}

/** `agent.tls_cert` and `tls_key` as the listeners load them (again on SIGHUP), if set. */
function listenerTls(config: Config): (() => Promise<{ cert: string; key: string }>) | undefined {
  const { tls_cert, tls_key } = config.agent;
  if (tls_cert === "") return undefined;
  return async () => ({
    cert: await readPemFile(tls_cert, "agent.tls_cert"),
    key: await readPemFile(tls_key, "agent.tls_key"),
  });
}

/** The PEM of `[agent.broker] tls_ca`, if set. */
function brokerCa(config: Config): Promise<string | undefined> {
  const path = config.agent.broker.tls_ca;
  return path === "" ? Promise.resolve(undefined) : readPemFile(path, "agent.broker.tls_ca");
}

function serverUrl(server: RunningServer): string {
  const host = server.hostname.includes(":") ? `[${server.hostname}]` : server.hostname;
  return `${server.reloadTls ? "https" : "http"}://${host}:${server.port}/`;
}

async function loop(
  worker: TierWorker,
  config: Config,
  opts: { signal: AbortSignal; clock: Clock; logger: Logger; onFirstPass: () => void },
): Promise<void> {
  const maxIdleMs = config.tiered_storage.upload_loop_backoff_max;
  let wake: (() => void) | undefined;
  let dirty = false; // a change arrived while a pass was running
  let idleMs = MIN_IDLE_MS;
  let first = true;
  const watch = new PartitionWatch(
    config.agent.data_dir,
    config.topic.filter((t) => t.tiered_storage),
    () => {
      dirty = true;
      wake?.();
    },
    { logger: opts.logger },
  );
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
      // The partitions the pass found are what is watched until the next one.
      await watch.arm(worker.partitions.map((p) => p.dir));
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
    watch.close();
  }
}
