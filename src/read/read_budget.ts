// A node-wide budget for the bytes reads hold in memory at once. A read reserves its `max_bytes`
// (or the whole budget, if it asks for more) before it starts and gives it back when its answer
// has been sent; when the budget is spent, a read waits briefly in line, then answers 503 with
// `Retry-After`. A few hundred large concurrent reads then cost a bounded amount of memory,
// instead of taking the host — and the broker beside it — down.
import { type Clock, systemClock } from "../base/clock.ts";
import { ReadError } from "./errors.ts";

/** Every byte of the read budget is taken and the wait ran out: try again shortly. */
export class ReadBudgetExceeded extends ReadError {
  override readonly name = "ReadBudgetExceeded";
  readonly retryAfterSeconds = 1;
  constructor(readonly wanted: number, readonly budget: number, readonly waitedMs: number) {
    super(
      "read_budget_exceeded",
      `reads already hold the whole read memory budget (${budget} bytes); this read of ` +
        `${wanted} bytes waited ${waitedMs} ms — retry`,
    );
  }
}

interface Waiter {
  bytes: number;
  grant: () => void;
}

/** Bytes in flight for reads, shared by every request. */
export class ReadBudget {
  readonly #clock: Clock;
  readonly #onReleased?: (bytes: number) => void;
  #free: number;
  readonly #queue: Waiter[] = [];

  /**
   * @param bytes the budget
   * @param options.clock where waits run @default systemClock
   * @param options.onReleased told of every reservation given back (the memory guard)
   */
  constructor(
    readonly bytes: number,
    options: { clock?: Clock; onReleased?: (bytes: number) => void } = {},
  ) {
    this.#free = bytes;
    this.#clock = options.clock ?? systemClock;
    this.#onReleased = options.onReleased;
  }

  /** Bytes not reserved now. */
  get free(): number {
    return this.#free;
  }

  /**
   * Reserves `wanted` bytes (at most the whole budget), waiting up to `waitMs` in line.
   * @returns the function that gives them back (call it once, when the answer is sent)
   * @throws {ReadBudgetExceeded} when the wait runs out
   */
  async acquire(wanted: number, waitMs: number): Promise<() => void> {
    const bytes = Math.max(1, Math.min(wanted, this.bytes));
    if (this.#queue.length === 0 && this.#free >= bytes) {
      this.#free -= bytes;
      return this.#releaser(bytes);
    }
    const started = this.#clock.monotonic();
    await new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { bytes, grant: resolve };
      this.#queue.push(waiter);
      const cancel = this.#clock.setTimer(waitMs, () => {
        const at = this.#queue.indexOf(waiter);
        if (at < 0) return; // granted meanwhile
        this.#queue.splice(at, 1);
        this.#grantWaiting(); // one that wanted less may fit now
        reject(new ReadBudgetExceeded(wanted, this.bytes, this.#clock.monotonic() - started));
      });
      waiter.grant = () => {
        cancel();
        resolve();
      };
    });
    return this.#releaser(bytes);
  }

  #releaser(bytes: number): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#free += bytes;
      this.#grantWaiting();
      this.#onReleased?.(bytes);
    };
  }

  /** Grants waiters in order while the first one fits (no overtaking: big reads do not starve). */
  #grantWaiting(): void {
    while (this.#queue.length > 0 && this.#free >= this.#queue[0].bytes) {
      const w = this.#queue.shift()!;
      this.#free -= w.bytes;
      w.grant();
    }
  }
}

/**
 * The read memory budget for a config: `read_memory_budget` when set, else a sixteenth of the
 * cache's size, between 64 MiB and 512 MiB.
 */
export function readBudgetBytes(configured: number, cacheSize: number): number {
  if (configured > 0) return configured;
  const MiB = 1024 * 1024;
  const fromCache = Number.isFinite(cacheSize) ? cacheSize / 16 : 512 * MiB;
  return Math.round(Math.min(512 * MiB, Math.max(64 * MiB, fromCache)));
}

/** How long a read waits in line for read memory before it answers 503 (Retry-After). */
export const READ_BUDGET_WAIT_MS = 2_000;

/**
 * Reserves `bytes` of `budget` for a read, waiting up to {@link READ_BUDGET_WAIT_MS}.
 * @returns what gives them back (a no-op without a budget: reads are not limited)
 * @throws {ReadBudgetExceeded} when the wait runs out
 */
export function reserveRead(budget: ReadBudget | undefined, bytes: number): Promise<() => void> {
  return budget?.acquire(bytes, READ_BUDGET_WAIT_MS) ?? Promise.resolve(() => {});
}

/**
 * Resident bytes counted per byte an answer holds: between two collections a collected heap
 * (Bun's JavaScriptCore) is about twice what is live, and a front's answer is made of many small
 * objects (a decoded message, its views, its integers) besides its records. Measured with 24 JSON
 * polls of 32 MiB at once against a 256 MiB budget: counting each byte once, the agent's peak was
 * 1.1 GB; twice (with the guard in src/runtime/memory.ts), about 0.5 GB.
 */
export const COLLECTOR_HEADROOM = 2;

/**
 * The read memory one answer holds, reserved as it grows: first from what was reserved for it
 * in advance (its expected peak, taken at once so that concurrent answers queue whole instead of
 * each taking a part and then waiting on the others), then from the budget for what goes beyond.
 * Everything goes back at once when the answer is sent or abandoned. Every byte counts
 * {@link COLLECTOR_HEADROOM} times.
 */
export class AnswerHold {
  #prepaid = 0;
  #used = 0;
  readonly #releases: (() => void)[] = [];

  constructor(readonly budget: ReadBudget | undefined) {}

  /**
   * Reserves `bytes` ahead of use.
   * @throws {ReadBudgetExceeded} when the wait runs out
   */
  async prepay(bytes: number): Promise<void> {
    bytes *= COLLECTOR_HEADROOM;
    if (bytes <= 0) return;
    this.#releases.push(await reserveRead(this.budget, bytes));
    this.#prepaid += bytes;
  }

  /**
   * Counts `bytes` more as held: from what was reserved ahead while it lasts, then from the budget.
   * @throws {ReadBudgetExceeded} when the wait runs out
   */
  async hold(bytes: number): Promise<void> {
    bytes *= COLLECTOR_HEADROOM;
    if (bytes <= 0) return;
    const ahead = Math.max(0, Math.min(bytes, this.#prepaid - this.#used));
    this.#used += bytes;
    if (bytes > ahead) this.#releases.push(await reserveRead(this.budget, bytes - ahead));
  }

  /** Gives everything back (again: a no-op). */
  release(): void {
    for (const r of this.#releases.splice(0)) r();
  }
}
