// Store GETs of whole chunks, sent and read on worker threads: the event loop signs a request and
// gets the body back whole, by transfer, never a piece of it. Taking fetched pieces and gathering
// them into chunks was two fifths of a cold scan's main thread (2.5 CPU s per GiB before, 1.5
// after, on 2 cores); here a worker does it on another core, with the same deadlines
// (deadline_fetch.ts) and the same checks of the body against its declared length (sendHttp,
// through `TAKEN_BODY`). Every other request — small GETs such as a cold read's first exact-range
// fetch, which would only pay the hop, and anything with a body — goes through the in-thread
// transport as before.
import { availableParallelism } from "node:os";
import { type Clock, systemClock } from "../src/base/clock.ts";
import { ResponseDeadlineError } from "./deadline_fetch.ts";
import { type FetchFn, TAKEN_BODY, type TakenBody } from "./http.ts";

/** What the event loop asks a worker. */
export type WorkerAsk =
  | {
    type: "get";
    id: number;
    url: string;
    headers: Record<string, string>;
    firstByteMs: number;
    stallMs: number;
    /** Take the XXH3-64 of each block of this many bytes of the body. */
    blockSize?: number;
  }
  | { type: "abort"; id: number };

/** What a worker answers: the whole response, or why there is none. */
export type WorkerAnswer =
  | {
    type: "done";
    id: number;
    status: number;
    statusText: string;
    headers: [string, string][];
    /** Transferred: the bytes are `length` of it from `offset`. */
    body: ArrayBuffer;
    offset: number;
    length: number;
    overlong: boolean;
    /** XXH3-64 (seed 0) of each `blockSize` block of the body, when asked (transferred). */
    blockSums?: BigUint64Array;
  }
  | { type: "failed"; id: number; name: string; message: string; cause?: string };

/** Ranged GETs of at least this many bytes go to a worker (a chunk; never a first fetch). */
export const OFF_THREAD_MIN_BYTES = 1024 * 1024;

/** Options of {@link FetchWorkers}. */
export interface FetchWorkersOptions {
  /** The first-byte and stall deadlines, as the in-thread transport keeps them. */
  firstByteMs: number;
  stallMs: number;
  /** Sends every request that is not a large ranged GET. */
  inThread: FetchFn;
  /** Worker threads at most. @default one fewer than the cores, from 1 to 4 */
  workers?: number;
  /** @default OFF_THREAD_MIN_BYTES */
  minBytes?: number;
  /**
   * The worker also takes the XXH3-64 of each block of this many bytes of a body it reads, for
   * {@link bodyBlockSums} (the chunk cache's block checksums, off the event loop).
   */
  blockSize?: number;
  /** A worker with no request for this long stops. @default 2000 */
  idleMs?: number;
  clock?: Clock;
  /** The worker's module (tests). @default providers/fetch_worker.ts */
  module?: string;
  /**
   * Told when a worker stops by failure; `inThread` when it failed before it ever answered (it
   * cannot start in this build), so every request goes in-thread from then on.
   */
  onBroken?: (why: string, inThread: boolean) => void;
}

/** The block sums a worker took of each body it handed back, by the bytes' own array. */
const blockSumsOf = new WeakMap<Uint8Array, { blockSize: number; sums: BigUint64Array }>();

/**
 * The XXH3-64 of each `blockSize` block of `bytes`, when a worker took them as it read the body
 * these bytes are (the same array, not a copy or a view of it); undefined otherwise.
 */
export function bodyBlockSums(bytes: Uint8Array, blockSize: number): BigUint64Array | undefined {
  const known = blockSumsOf.get(bytes);
  if (!known || known.blockSize !== blockSize) return undefined;
  return known.sums.length === Math.ceil(bytes.length / blockSize) ? known.sums : undefined;
}

/** Worker threads for `fetch_workers = "auto"`: one fewer than the cores, from 1 to 4. */
export function autoFetchWorkers(): number {
  return Math.max(1, Math.min(4, availableParallelism() - 1));
}

interface Waiting {
  resolve(answer: Extract<WorkerAnswer, { type: "done" }>): void;
  reject(err: Error): void;
}

/** One worker thread and the requests it has not answered yet. */
interface Slot {
  worker: Worker;
  pending: Map<number, Waiting>;
  /** Stops the worker once it has been idle for `idleMs`; armed while it has no request. */
  cancelIdle?: () => void;
  /** It has answered a request (it started, at least). */
  answered: boolean;
}

/** Every {@link FetchWorkers} not closed, for {@link stopFetchWorkers}. */
const running = new Set<FetchWorkers>();

/**
 * Closes every {@link FetchWorkers} of the process: a CLI command's end (Deno's workers, unlike
 * Bun's, would hold the process open until they stop).
 */
export function stopFetchWorkers(): void {
  for (const workers of [...running]) workers.close();
}

/** A worker that can keep the process alive or not (Bun's; Deno's always does). */
type RefWorker = Worker & { ref?(): void; unref?(): void };

/**
 * A fetch that sends large ranged GETs on worker threads and everything else in-thread. Workers
 * start at the first such GET; one that fails fails its requests (retryable transport errors)
 * and is replaced at the next — unless it failed before it ever answered: a worker that cannot
 * start sends everything in-thread from then on. A worker holds the process open only while it
 * has requests.
 * @example
 * ```ts
 * import { FetchWorkers } from "./fetch_workers.ts";
 *
 * const inThread = (input: string, init: RequestInit) => fetch(input, init);
 * const workers = new FetchWorkers({ firstByteMs: 5000, stallMs: 5000, inThread });
 * // new S3Store({ ...options, fetch: workers.fetch }); then, when done:
 * workers.close();
 * ```
 */
export class FetchWorkers {
  readonly #options: FetchWorkersOptions;
  readonly #size: number;
  readonly #minBytes: number;
  readonly #slots: Slot[] = [];
  readonly #clock: Clock;
  readonly #idleMs: number;
  #nextId = 0;
  #closed = false;
  /** Why requests go in-thread for good: a worker could not start. */
  #fellBack?: string;

  constructor(options: FetchWorkersOptions) {
    this.#options = options;
    this.#size = options.workers ?? autoFetchWorkers();
    if (!Number.isSafeInteger(this.#size) || this.#size < 1) {
      throw new RangeError(`fetch workers: ${this.#size} is not a positive whole number`);
    }
    this.#minBytes = options.minBytes ?? OFF_THREAD_MIN_BYTES;
    this.#clock = options.clock ?? systemClock;
    this.#idleMs = options.idleMs ?? 2000;
    running.add(this);
  }

  /** Requests a worker thread answered so far. */
  offThread = 0;

  /** Worker threads at most. */
  get size(): number {
    return this.#size;
  }

  /** Worker threads running now. */
  threads(): number {
    return this.#slots.length;
  }

  readonly fetch: FetchFn = (input, init) => {
    const headers = offThreadHeaders(init, this.#minBytes);
    if (!headers || this.#closed || this.#fellBack !== undefined) {
      return this.#options.inThread(input, init);
    }
    return this.#send(input, headers, init.signal ?? undefined);
  };

  /** Stops the workers; requests still waiting fail. */
  close(): void {
    this.#closed = true;
    running.delete(this);
    for (const slot of this.#slots.splice(0)) this.#stop(slot, new Error("the store was closed"));
  }

  #send(url: string, headers: Record<string, string>, signal?: AbortSignal): Promise<Response> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const slot = this.#pick();
    const id = this.#nextId++;
    return new Promise<Response>((resolve, reject) => {
      const settle = () => {
        signal?.removeEventListener("abort", onAbort);
        if (!slot.pending.delete(id) || slot.pending.size > 0) return;
        (slot.worker as RefWorker).unref?.();
        slot.cancelIdle = this.#clock.setTimer(this.#idleMs, () => this.#retire(slot), {
          unref: true,
        });
      };
      const onAbort = () => {
        settle();
        slot.worker.postMessage({ type: "abort", id } satisfies WorkerAsk);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      slot.pending.set(id, {
        resolve: (answer) => {
          settle();
          this.offThread++;
          resolve(toResponse(answer, this.#options.blockSize));
        },
        reject: (err) => {
          settle();
          reject(err);
        },
      });
      if (slot.pending.size === 1) {
        slot.cancelIdle?.();
        slot.cancelIdle = undefined;
        (slot.worker as RefWorker).ref?.();
      }
      slot.worker.postMessage(
        {
          type: "get",
          id,
          url,
          headers,
          firstByteMs: this.#options.firstByteMs,
          stallMs: this.#options.stallMs,
          blockSize: this.#options.blockSize,
        } satisfies WorkerAsk,
      );
    });
  }

  /** The worker with the fewest requests, or a new one while there are fewer than the size. */
  #pick(): Slot {
    const idle = this.#slots.find((s) => s.pending.size === 0);
    if (idle) return idle;
    if (this.#slots.length < this.#size) return this.#spawn();
    return this.#slots.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
  }

  #spawn(): Slot {
    const worker = new Worker(this.#options.module ?? workerUrl(), { type: "module" });
    (worker as RefWorker).unref?.();
    const slot: Slot = { worker, pending: new Map(), answered: false };
    worker.onmessage = (event: MessageEvent<WorkerAnswer>) => {
      const answer = event.data;
      slot.answered = true;
      const waiting = slot.pending.get(answer.id);
      if (!waiting) return; // given up by its caller
      if (answer.type === "done") waiting.resolve(answer);
      else waiting.reject(errorOf(answer));
    };
    const broken = (what: string) => {
      this.#forget(slot);
      if (!slot.answered) this.#fellBack = what;
      this.#options.onBroken?.(what, !slot.answered);
      this.#stop(slot, new Error(`the store fetch worker stopped: ${what}`));
    };
    worker.onerror = (event: ErrorEvent) => {
      event.preventDefault();
      broken(event.message || "an uncaught error");
    };
    worker.onmessageerror = () => broken("an answer that could not be read");
    this.#slots.push(slot);
    return slot;
  }

  /** Stops a worker that has been idle for `idleMs`. */
  #retire(slot: Slot): void {
    if (slot.pending.size > 0) return;
    this.#forget(slot);
    this.#stop(slot, new Error("the worker was idle"));
  }

  #forget(slot: Slot): void {
    const at = this.#slots.indexOf(slot);
    if (at >= 0) this.#slots.splice(at, 1);
  }

  #stop(slot: Slot, why: Error): void {
    slot.cancelIdle?.();
    const waiting = [...slot.pending.values()];
    slot.pending.clear(); // first: their settling then arms no idle timer
    slot.worker.terminate();
    for (const w of waiting) w.reject(why);
  }
}

/**
 * Where the worker's module is: beside this one, or — in the single binary, where every module is
 * bundled into the entry point at the root and the worker is an entry point of its own
 * (scripts/compile.ts) — under `providers/` from the root.
 */
function workerUrl(): string {
  const here = import.meta.url;
  const beside = here.endsWith("/fetch_workers.ts");
  return new URL(beside ? "./fetch_worker.ts" : "./providers/fetch_worker.ts", here).href;
}

/**
 * The headers of a request a worker should send: a GET without a body whose `Range` (or Azure's
 * `x-ms-range`) asks for at least `minBytes`; undefined for any other.
 */
export function offThreadHeaders(
  init: RequestInit,
  minBytes: number,
): Record<string, string> | undefined {
  if ((init.method ?? "GET") !== "GET" || init.body !== undefined && init.body !== null) {
    return undefined;
  }
  const headers = init.headers;
  if (!headers || headers instanceof Headers || Array.isArray(headers)) return undefined;
  const record = headers as Record<string, string>;
  const range = /^bytes=(\d+)-(\d+)$/.exec(record["range"] ?? record["x-ms-range"] ?? "");
  if (!range || Number(range[2]) - Number(range[1]) + 1 < minBytes) return undefined;
  return { ...record };
}

/** The worker's answer as a response whose body is taken, with the block sums it took of it. */
function toResponse(
  answer: Extract<WorkerAnswer, { type: "done" }>,
  blockSize: number | undefined,
): Response {
  const response = new Response(null, {
    status: answer.status,
    statusText: answer.statusText,
    headers: answer.headers,
  });
  const taken: TakenBody = {
    bytes: new Uint8Array(answer.body, answer.offset, answer.length),
    overlong: answer.overlong,
  };
  if (answer.blockSums && blockSize) {
    blockSumsOf.set(taken.bytes, { blockSize, sums: answer.blockSums });
  }
  Object.defineProperty(response, TAKEN_BODY, { value: taken });
  return response;
}

/** The worker's error as the in-thread transport would have thrown it. */
function errorOf(answer: Extract<WorkerAnswer, { type: "failed" }>): Error {
  const cause = answer.cause === undefined ? undefined : { cause: new Error(answer.cause) };
  if (answer.name === "ResponseDeadlineError") {
    return new ResponseDeadlineError(answer.message, cause);
  }
  const err = new Error(answer.message, cause);
  err.name = answer.name;
  return err;
}
