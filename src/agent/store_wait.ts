// `tierd run` when the store cannot be reached at start. An outage — a refused connection, a
// timeout, a 5xx, throttling — is waited out, not a reason to exit: a host that boots while its
// network or the store is still down would otherwise leave the agent failed under its service
// manager, with nothing answering the probes or the alerts. While it waits the agent answers
// `/healthz`, says on `/readyz` what it waits for and since when, counts as stalled in
// `/metrics` (`tierd_upload_stalled`), tells systemd it runs (with the reason as its status), and
// probes the store again, the pause growing to a bound. What the store refuses — credentials, a
// bucket that does not exist, a wrong endpoint name — still stops the start at once: waiting
// would not fix a setting.
import { type Clock, sleep } from "../base/clock.ts";
import type { ProbeResult } from "../../providers/probe.ts";
import type { Logger } from "../log.ts";

/** A failed probe the agent may wait out. */
export type FailedProbe = Extract<ProbeResult, { ok: false }>;

/** True when `probe` failed because the store did not answer, not because it refused. */
export function isOutage(probe: ProbeResult): probe is FailedProbe {
  return !probe.ok && probe.stage === "list" && probe.retryable;
}

/** What systemd is told while the agent waits (a {@link SystemdNotifier}, or nothing). */
export interface WaitNotifier {
  ready(status: string): Promise<boolean>;
  status(status: string): Promise<boolean>;
  startWatchdog(): void;
  close(): void;
}

/** How {@link waitForStore} probes, serves and reports. */
export interface StoreWaitOptions {
  /** The probe that failed at start. */
  failed: FailedProbe;
  /** Probes the store again (list, then the write check, as at start). */
  probe(signal: AbortSignal): Promise<ProbeResult>;
  /**
   * Starts the listeners that answer while the agent waits (`/healthz`, `/readyz` saying
   * `waitingFor()`, `/metrics`); the returned function closes them.
   */
  serve(waitingFor: () => string): Promise<() => Promise<void>>;
  /** Called with true when the wait starts and false when it ends (`tierd_upload_stalled`). */
  stalled(waiting: boolean): void;
  /** Where the store is, for messages. */
  describe: string;
  logger: Logger;
  clock: Clock;
  /** Stops the wait (SIGTERM). */
  signal: AbortSignal;
  /** The longest pause between two probes. */
  maxPauseMs: number;
  notifier?: WaitNotifier;
}

/** The first pause between probes; it doubles up to `maxPauseMs`. */
const FIRST_PAUSE_MS = 1000;
/** How often "still waiting" is logged. */
const REMIND_EVERY_MS = 60_000;

/**
 * Waits until the store answers its probe.
 *
 * @returns the probe that ended the wait: passed, or failed for a reason waiting does not cure
 *   (a refusal, or a write check that failed); undefined when `signal` stopped the wait
 */
export async function waitForStore(o: StoreWaitOptions): Promise<ProbeResult | undefined> {
  const { clock, logger } = o;
  const since = clock.monotonic();
  const sinceIso = new Date(clock.now()).toISOString();
  let reason = o.failed.reason;
  const waitingFor = () =>
    `waiting for the store since ${sinceIso} (${
      Math.round((clock.monotonic() - since) / 1000)
    } s): ${reason}`;
  logger.error(
    "the store cannot be reached; the agent starts anyway, answers its probes and waits for it",
    { store: o.describe, reason, max_pause_ms: o.maxPauseMs },
  );
  const close = await o.serve(waitingFor);
  o.stalled(true);
  await o.notifier?.ready(waitingFor());
  o.notifier?.startWatchdog();
  let result: ProbeResult = o.failed;
  let pause = FIRST_PAUSE_MS;
  let reminded = since;
  try {
    while (isOutage(result)) {
      try {
        await sleep(pause, o.signal, clock);
      } catch {
        return undefined; // stopped while waiting
      }
      pause = Math.min(pause * 2, Math.max(FIRST_PAUSE_MS, o.maxPauseMs));
      try {
        result = await o.probe(o.signal);
      } catch (err) {
        if (o.signal.aborted) return undefined;
        throw err;
      }
      if (result.ok) break;
      reason = result.reason;
      void o.notifier?.status(waitingFor());
      if (clock.monotonic() - reminded >= REMIND_EVERY_MS) {
        reminded = clock.monotonic();
        logger.warn("still waiting for the store", {
          store: o.describe,
          reason,
          waited_s: Math.round((reminded - since) / 1000),
        });
      }
    }
    if (result.ok) {
      logger.info("the store answers; the agent goes on starting", {
        store: o.describe,
        waited_s: Math.round((clock.monotonic() - since) / 1000),
      });
    }
    return result;
  } finally {
    o.stalled(false);
    o.notifier?.close();
    await close();
  }
}
