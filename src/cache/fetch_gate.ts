// The limit on store fetches in flight (`tiered_storage.fetch_concurrency`), with two lanes:
// reads (a cold read's first fetch, a chunk a read waits for) go before readahead.

/** Which lane a fetch waits in. */
export type FetchLane = "read" | "readahead";

/** A place in the gate's queue. */
export interface GateTicket {
  /** Resolves with the release function once the fetch may start. */
  ready: Promise<() => void>;
  /** Moves a waiting readahead fetch to the read lane (a read now waits for it). */
  promote(): void;
}

interface Waiter {
  lane: FetchLane;
  grant: (release: () => void) => void;
}

/** A counting semaphore with a read lane served before the readahead lane. */
export class FetchGate {
  readonly #limit: number;
  readonly #queues: Record<FetchLane, Waiter[]> = { read: [], readahead: [] };
  #active = 0;

  /** @param limit fetches in flight at most (≥ 1) */
  constructor(limit: number) {
    this.#limit = Math.max(1, Math.floor(limit));
  }

  /** Fetches holding a slot now. */
  get active(): number {
    return this.#active;
  }

  /**
   * Waits for a slot in `lane`. The returned release function must be called exactly once.
   *
   * @param lane the lane to wait in
   * @param signal gives up the wait (the ticket rejects with the signal's reason)
   */
  acquire(lane: FetchLane, signal?: AbortSignal): GateTicket {
    let waiter: Waiter | undefined;
    const ready = new Promise<() => void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      if (this.#active < this.#limit && this.#waiting() === 0) {
        this.#active++;
        return resolve(this.#releaser());
      }
      const onAbort = () => {
        const queue = this.#queues[waiter!.lane];
        const i = queue.indexOf(waiter!);
        if (i >= 0) queue.splice(i, 1);
        reject(signal?.reason);
      };
      waiter = {
        lane,
        grant: (release) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(release);
        },
      };
      this.#queues[lane].push(waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
    return {
      ready,
      promote: () => {
        if (!waiter || waiter.lane === "read") return;
        const from = this.#queues.readahead;
        const i = from.indexOf(waiter);
        waiter.lane = "read";
        if (i >= 0) {
          from.splice(i, 1);
          this.#queues.read.push(waiter);
        }
      },
    };
  }

  #waiting(): number {
    return this.#queues.read.length + this.#queues.readahead.length;
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#active--;
      this.#pump();
    };
  }

  #pump(): void {
    while (this.#active < this.#limit) {
      const next = this.#queues.read.shift() ?? this.#queues.readahead.shift();
      if (!next) return;
      this.#active++;
      next.grant(this.#releaser());
    }
  }
}
