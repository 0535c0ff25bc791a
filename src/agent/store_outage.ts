// A store that does not answer at start is waited for, not given up on: meanwhile the agent's
// listeners answer /healthz (200), /readyz (503, naming what it waits for) and /metrics
// (tierd_upload_stalled 1), and the rest of the API says it is not ready.
import { systemClock } from "../base/clock.ts";
import type { ProbeResult } from "../../providers/probe.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { createOpsApp } from "../http/app.ts";
import { type RunningServer, serve } from "../http/serve.ts";
import { markStalled } from "../metrics/observers.ts";
import type { Registry } from "../metrics/registry.ts";
import type { createTierdMetrics } from "../metrics/tierd.ts";
import { createReadContext } from "../read/context.ts";
import { systemdNotifier } from "../runtime/systemd.ts";
import type { AgentContext } from "./context.ts";
import { type FailedProbe, waitForStore } from "./store_wait.ts";
import { httpListenerOptions, listenerTls } from "./listeners.ts";

/**
 * Waits for a store that did not answer the start's probe, answering `/healthz`, `/readyz` and
 * `/metrics` on the agent's listeners meanwhile; SIGTERM or SIGINT stops the wait.
 * @returns the probe that ended the wait; undefined when a signal stopped it
 */
export async function waitOutOutage(
  ctx: AgentContext,
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
          await serve(
            handler,
            httpListenerOptions(config, listen, {
              clock: systemClock,
              logger,
              // The API's listener keeps its TLS; the ops listener has none.
              tls: i === 0 ? listenerTls(config) : undefined,
            }),
          ),
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
