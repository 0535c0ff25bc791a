// The agent's loop: a pass over every partition, housekeeping when it is due, then a wait that
// a change under a watched partition or a stop cuts short. The wait starts at MIN_IDLE_MS and
// doubles while passes find nothing to do (or fail) up to `upload_loop_backoff_max`; finished
// work or a filesystem event brings it back down. A pass that throws never ends the agent.
import type { Clock } from "../base/clock.ts";
import type { Logger } from "../log.ts";
import type { PassReport } from "../tier/tier_worker.ts";

/** The shortest wait between passes, ms: also where the wait starts again after work. */
export const MIN_IDLE_MS = 100;

/** What the loop drives: the tier worker's passes and housekeeping. */
export interface LoopWorker {
  /** One pass over every partition. */
  pass(): Promise<PassReport>;
  /** Housekeeping (manifests, verify, sweeps) when the agent is idle or it is due. */
  housekeep(): Promise<unknown>;
  /** The partitions the last pass found. */
  readonly partitions: readonly { readonly dir: string }[];
}

/** The watch of the partitions' directories, armed again after each pass. */
export interface LoopWatch {
  /** Watches `dirs` (and only them) until the next call. */
  arm(dirs: readonly string[]): Promise<void>;
  close(): void;
}

/** What {@linkcode runLoop} needs besides the worker. */
export interface LoopOptions {
  /** The longest wait between passes, ms (`upload_loop_backoff_max`). */
  maxIdleMs: number;
  /** Ends the loop (after the pass or housekeeping under way). */
  signal: AbortSignal;
  clock: Clock;
  logger: Logger;
  /**
   * Makes the watch; its callback wakes the loop (a change under a partition).
   * @param changed call on any change under a watched directory
   */
  watch(changed: () => void): LoopWatch;
  /** Called once, after the first pass that completed. */
  onFirstPass?(): void;
}

/**
 * Runs passes until `opts.signal` aborts.
 *
 * @param worker the passes and housekeeping to run
 * @param opts timing, the watch and the stop signal
 */
export async function runLoop(worker: LoopWorker, opts: LoopOptions): Promise<void> {
  let wake: (() => void) | undefined;
  let dirty = false; // a change arrived while a pass was running
  let idleMs = MIN_IDLE_MS;
  let first = true;
  const watch = opts.watch(() => {
    dirty = true;
    wake?.();
  });
  const onAbort = () => wake?.();
  opts.signal.addEventListener("abort", onAbort);
  const waitFor = async (ms: number) => {
    if (opts.signal.aborted) return;
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
        opts.logger.error("tier pass failed; retried after a back-off", { err });
        idleMs = Math.min(idleMs * 2, opts.maxIdleMs);
        await waitFor(idleMs);
        continue;
      }
      if (first) {
        first = false;
        opts.onFirstPass?.();
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
        : Math.min(idleMs * 2, opts.maxIdleMs);
      if (opts.signal.aborted) break;
      try {
        await worker.housekeep();
      } catch (err) {
        opts.logger.error("housekeeping run failed; retried later", { err });
      }
      // Sealing depends on quiet files, so a pending segment needs a rescan even with no event.
      await waitFor(idleMs);
    }
  } finally {
    opts.signal.removeEventListener("abort", onAbort);
    watch.close();
  }
}
