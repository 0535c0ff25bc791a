// Keeps one temporary credential fresh: fetched on first use, refreshed in the background at
// 90 % of its lifetime (one refresh in flight, shared by every caller), retried with jittered
// backoff while the old one is still valid, and refreshed once out of band — at most once per
// interval — when the store refuses it.
import { type Clock, systemClock, untilAborted } from "../../src/base/clock.ts";
import { backoffDelay } from "../retry.ts";
import type { CredentialObserver, Expiring } from "./types.ts";

/** Refresh when this fraction of a credential's lifetime has passed. */
export const REFRESH_AT = 0.9;
/** A credential this close to its expiry is not handed out any more: callers wait for a new one. */
const EXPIRY_MARGIN_MS = 5_000;

/** Options of a {@link Refresher}. */
export interface RefresherOptions<T> {
  /** The source's name for metrics (read on each report: a chain learns it on first fetch). */
  source: () => string;
  /** Fetches a new credential from the source. */
  fetch(signal?: AbortSignal): Promise<Expiring<T>>;
  /** @default systemClock */
  clock?: Clock;
  observer?: CredentialObserver;
  /** Uniform numbers in [0, 1) for the retry jitter. @default Math.random */
  rng?: () => number;
  /** Fewest milliseconds between two out-of-band refreshes after refusals. @default 10000 */
  refusalIntervalMs?: number;
  /** First retry cap after a failed background refresh, doubled each time. @default 1000 */
  retryBaseMs?: number;
  /** Largest retry cap. @default 60000 */
  retryMaxMs?: number;
}

/**
 * One credential, refreshed before it expires.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * let fetched = 0;
 * const creds = new Refresher({
 *   source: () => "test",
 *   fetch: () => Promise.resolve({ value: `token-${++fetched}`, expiresAt: Date.UTC(2099, 0) }),
 * });
 * assert.equal(await creds.get(), "token-1");
 * assert.equal(await creds.get(), "token-1"); // kept until 90 % of its lifetime
 * creds.close();
 * ```
 */
export class Refresher<T> {
  readonly #o: RefresherOptions<T>;
  readonly #clock: Clock;
  #current?: Expiring<T> & { fetchedAt: number };
  #inFlight?: Promise<Expiring<T>>;
  #cancelTimer?: () => void;
  #failures = 0;
  #lastRefusalRefresh = -Infinity;
  #closed = false;

  constructor(options: RefresherOptions<T>) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** The credential in use, if one was fetched. */
  get current(): Expiring<T> | undefined {
    return this.#current;
  }

  /**
   * A valid credential: the current one, else a fetched one (joining a fetch in flight).
   * @throws what the source's fetch threw
   */
  async get(options: { signal?: AbortSignal } = {}): Promise<T> {
    options.signal?.throwIfAborted();
    const current = this.#current;
    if (current && this.#valid(current)) return current.value;
    return (await untilAborted(this.#refresh("expired"), options.signal)).value;
  }

  /**
   * The store refused `used`. When it is still the current credential and no refusal refresh
   * ran within the interval, fetches a new one now.
   * @returns true when a retry may succeed (a credential other than `used` is current, or the
   *   refresh worked); false when rate-limited or the refresh failed
   */
  async refused(used: T, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    if (this.#current && this.#current.value !== used) return true;
    const now = this.#clock.monotonic();
    if (now - this.#lastRefusalRefresh < (this.#o.refusalIntervalMs ?? 10_000)) return false;
    this.#lastRefusalRefresh = now;
    try {
      await untilAborted(this.#refresh("refused"), options.signal);
      return true;
    } catch (err) {
      if (options.signal?.aborted) throw err;
      return false;
    }
  }

  /** Stops the background refresh timer. */
  close(): void {
    this.#closed = true;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
  }

  #valid(c: Expiring<T>): boolean {
    if (c.expiresAt === undefined) return true;
    return this.#clock.now() < c.expiresAt - EXPIRY_MARGIN_MS;
  }

  /** One fetch at a time; its outcome updates the current credential and the timer. */
  #refresh(why: "scheduled" | "refused" | "expired"): Promise<Expiring<T>> {
    return this.#inFlight ??= (async () => {
      const fetchedAt = this.#clock.now();
      try {
        const fresh = await this.#o.fetch();
        this.#current = { ...fresh, fetchedAt };
        this.#failures = 0;
        this.#o.observer?.expiry?.(this.#o.source(), fresh.expiresAt);
        this.#o.observer?.refresh?.(this.#o.source(), "ok", why);
        this.#schedule(
          fresh.expiresAt === undefined ? undefined : fetchedAt +
            Math.max(0, fresh.expiresAt - fetchedAt) * REFRESH_AT,
        );
        return fresh;
      } catch (err) {
        this.#failures++;
        this.#o.observer?.refresh?.(this.#o.source(), "failed", why);
        const current = this.#current;
        if (current?.expiresAt !== undefined && this.#clock.now() < current.expiresAt) {
          // Keep the old one while it lasts and try again soon, with jitter.
          const left = current.expiresAt - this.#clock.now();
          const cap = Math.min(this.#o.retryMaxMs ?? 60_000, Math.max(100, left / 4));
          const delay = backoffDelay(this.#failures - 1, {
            baseMs: this.#o.retryBaseMs ?? 1000,
            maxMs: cap,
            rng: this.#o.rng,
          });
          this.#schedule(this.#clock.now() + Math.max(50, delay));
        }
        throw err;
      } finally {
        this.#inFlight = undefined;
      }
    })();
  }

  #schedule(at: number | undefined): void {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    if (at === undefined || this.#closed) return;
    this.#cancelTimer = this.#clock.setTimer(at - this.#clock.now(), () => {
      this.#cancelTimer = undefined;
      this.#refresh("scheduled").catch(() => {}); // a failure schedules its own retry
    }, { unref: true });
  }
}
