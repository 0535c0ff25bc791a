// `tierd run [--once]`: the agent. `--once` runs one full pass and exits 0 only if it
// completed every copy it attempted; otherwise passes repeat, woken by a filesystem watch
// of the data directory and a periodic scan that backs off while idle.
import { watch } from "node:fs";
import type { Logger } from "../log.ts";
import { probeStore } from "../../providers/probe.ts";
import { TierWorker } from "../tier/tier_pass.ts";
import { UsageError } from "./args.ts";
import { loadContext, storeFor } from "./context.ts";
import { parseFlags } from "./main.ts";

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
  const { store, prefix, describe } = await storeFor(ctx);
  const probe = await probeStore(store, prefix);
  if (!probe.ok) {
    console.error(`tierd: probe failed: ${describe}: ${probe.reason}`);
    return 1;
  }
  logger.info("store probe ok", { store: describe, prefix });

  const stop = new AbortController();
  const onSignal = (sig: string) => {
    if (stop.signal.aborted) return;
    logger.info("shutting down", { signal: sig });
    stop.abort();
  };
  const worker = new TierWorker({ config, store, prefix, logger, signal: stop.signal });
  try {
    if (values.once) {
      const report = await worker.pass();
      logger.info("pass finished", {
        partitions: report.partitions.length,
        copied: report.copied,
        adopted: report.adopted,
        failed: report.failed,
        cleaned: report.cleaned,
        lost: report.lost,
        pending: report.pending,
      });
      if (report.errors.length > 0) {
        console.error(
          `tierd: pass incomplete: ${report.errors.length} error(s); first: ${report.errors[0]}`,
        );
        return 1;
      }
      return 0;
    }
    process.on("SIGINT", () => onSignal("SIGINT"));
    process.on("SIGTERM", () => onSignal("SIGTERM"));
    await loop(worker, config.agent.data_dir, config.tiered_storage.upload_loop_backoff_max, {
      signal: stop.signal,
      logger,
    });
    return 0;
  } finally {
    await worker.close();
    await store.close?.();
  }
}

async function loop(
  worker: TierWorker,
  dataDir: string,
  maxIdleMs: number,
  opts: { signal: AbortSignal; logger: Logger },
): Promise<void> {
  let wake: (() => void) | undefined;
  let dirty = false; // a change arrived while a pass was running
  let idleMs = MIN_IDLE_MS;
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
  try {
    while (!opts.signal.aborted) {
      dirty = false;
      const report = await worker.pass();
      const busy = report.copied + report.adopted + report.cleaned + report.failed > 0;
      if (busy) {
        opts.logger.info("pass finished", {
          copied: report.copied,
          adopted: report.adopted,
          failed: report.failed,
          cleaned: report.cleaned,
          pending: report.pending,
        });
      }
      // Back off while idle or failing; a filesystem event or finished work resets the scan.
      idleMs = (busy && report.failed === 0) || dirty
        ? MIN_IDLE_MS
        : Math.min(idleMs * 2, maxIdleMs);
      if (opts.signal.aborted) break;
      // Sealing depends on quiet files, so a pending segment needs a rescan even with no event.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, idleMs);
        wake = () => {
          clearTimeout(timer);
          idleMs = MIN_IDLE_MS;
          resolve();
        };
      });
      wake = undefined;
    }
  } finally {
    watcher?.close();
  }
}
