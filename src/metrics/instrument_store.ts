// A decorator that counts every object store request by operation and outcome, so the store's
// health shows in `tierd_store_requests_total` whatever layer issued the request.
import {
  type CompletedPart,
  type DeleteFailure,
  type GetOptions,
  type GetResult,
  type ListOptions,
  type ListPage,
  type MultipartUpload,
  type ObjectHead,
  type ObjectStore,
  type PutOptions,
  type PutResult,
  StoreError,
  type StoreErrorKind,
  type UserMetadata,
} from "../../providers/types.ts";
import type { TierdMetrics } from "./tierd.ts";

/** The `outcome` label of a failed request: the error kind in snake case, or `aborted`/`error`. */
export function outcomeOf(err: unknown): string {
  if (err instanceof StoreError) return SNAKE[err.kind];
  if (err instanceof DOMException && (err.name === "AbortError" || err.name === "TimeoutError")) {
    return "aborted";
  }
  return "error";
}

const SNAKE: Record<StoreErrorKind, string> = {
  NotFound: "not_found",
  PreconditionFailed: "precondition_failed",
  InvalidRange: "invalid_range",
  Throttled: "throttled",
  Transport: "transport",
  Auth: "auth",
  Malformed: "malformed",
  Unsupported: "unsupported",
};

/**
 * Wraps `store` so every call counts `tierd_store_requests_total{op,outcome}` (outcome `ok`,
 * `already_exists` for a refused conditional create, or the error kind such as `not_found`),
 * `tierd_store_throttled_total{op}` for throttled answers, and observes
 * `tierd_store_request_duration_seconds{op}`. Results and errors pass through unchanged.
 *
 * @param store the store to observe
 * @param metrics where to count
 * @returns a store with the same behaviour and `kind`
 */
export function instrumentStore(store: ObjectStore, metrics: TierdMetrics): ObjectStore {
  return new InstrumentedStore(store, metrics);
}

class InstrumentedStore implements ObjectStore {
  readonly kind: string;
  readonly #inner: ObjectStore;
  readonly #m: TierdMetrics;

  constructor(inner: ObjectStore, metrics: TierdMetrics) {
    this.#inner = inner;
    this.#m = metrics;
    this.kind = inner.kind;
  }

  async #call<T>(op: string, fn: () => Promise<T>, outcome?: (r: T) => string): Promise<T> {
    const started = performance.now();
    try {
      const result = await fn();
      this.#m.storeRequests.inc({ op, outcome: outcome?.(result) ?? "ok" });
      return result;
    } catch (err) {
      const o = outcomeOf(err);
      this.#m.storeRequests.inc({ op, outcome: o });
      if (o === "throttled") this.#m.storeThrottled.inc({ op });
      throw err;
    } finally {
      this.#m.storeRequestDuration.observe({ op }, (performance.now() - started) / 1000);
    }
  }

  put(key: string, body: Uint8Array, options?: PutOptions): Promise<PutResult> {
    return this.#call("put", () => this.#inner.put(key, body, options), putOutcome);
  }

  get(key: string, options?: GetOptions): Promise<GetResult> {
    return this.#call("get", () => this.#inner.get(key, options));
  }

  head(key: string, options?: { signal?: AbortSignal }): Promise<ObjectHead> {
    return this.#call("head", () => this.#inner.head(key, options));
  }

  deleteMany(keys: string[], options?: { signal?: AbortSignal }): Promise<DeleteFailure[]> {
    return this.#call(
      "delete",
      () => this.#inner.deleteMany(keys, options),
      (failures) => failures.length === 0 ? "ok" : "partial",
    );
  }

  list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return this.#call("list", () => this.#inner.list(prefix, options));
  }

  createMultipart(
    key: string,
    options?: { metadata?: UserMetadata; contentType?: string; signal?: AbortSignal },
  ): Promise<string> {
    return this.#call("create_multipart", () => this.#inner.createMultipart(key, options));
  }

  putPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Uint8Array,
    options?: { signal?: AbortSignal },
  ): Promise<CompletedPart> {
    return this.#call(
      "put_part",
      () => this.#inner.putPart(key, uploadId, partNumber, body, options),
    );
  }

  completeMultipart(
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    options?: { ifAbsent?: boolean; signal?: AbortSignal },
  ): Promise<PutResult> {
    return this.#call(
      "complete_multipart",
      () => this.#inner.completeMultipart(key, uploadId, parts, options),
      putOutcome,
    );
  }

  abortMultipart(key: string, uploadId: string, options?: { signal?: AbortSignal }): Promise<void> {
    return this.#call("abort_multipart", () => this.#inner.abortMultipart(key, uploadId, options));
  }

  listMultipartUploads(
    prefix: string,
    options?: { signal?: AbortSignal },
  ): Promise<MultipartUpload[]> {
    return this.#call(
      "list_multipart_uploads",
      () => this.#inner.listMultipartUploads(prefix, options),
    );
  }

  async close(): Promise<void> {
    await this.#inner.close?.();
  }
}

function putOutcome(r: PutResult): string {
  return r.status === "AlreadyExists" ? "already_exists" : "ok";
}
