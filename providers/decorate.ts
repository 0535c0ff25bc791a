// One way to wrap an `ObjectStore`: every method becomes a `StoreCall` handed to one function,
// which may run it (with another signal, more than once, never), time it or count it. The
// metrics, retry and test-fault decorators are all built on it.
import type { ObjectStore } from "./types.ts";

/** The operation names of the store contract, as metrics and logs spell them. */
export type StoreOp =
  | "put"
  | "get"
  | "head"
  | "delete"
  | "list"
  | "create_multipart"
  | "put_part"
  | "complete_multipart"
  | "abort_multipart"
  | "list_multipart_uploads";

/** One call of a wrapped store, ready to run. */
export interface StoreCall<T> {
  op: StoreOp;
  /** The key (or prefix) the call is about, for messages. */
  key: string;
  /** The caller's signal, if any. */
  signal?: AbortSignal;
  /** Bytes of the body the call sends (`put`, `put_part`). */
  bytes?: number;
  /** Runs the call on the inner store with `signal` in place of the caller's. */
  run(signal?: AbortSignal): Promise<T>;
}

/** What a decorator does with each call. */
export type AroundCall = <T>(call: StoreCall<T>) => Promise<T>;

/**
 * Wraps `inner` so every call goes through `around`.
 * @param inner the store that does the work
 * @param around runs (or not) each call
 * @returns a store with the same `kind`; `close()` closes `inner`
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimStore } from "./sim/store.ts";
 *
 * const calls: string[] = [];
 * const counted = decorateStore(new SimStore(), (call) => {
 *   calls.push(call.op);
 *   return call.run(call.signal);
 * });
 * await counted.put("k", new Uint8Array(1));
 * await counted.head("k");
 * assert.deepEqual(calls, ["put", "head"]);
 * ```
 */
export function decorateStore(inner: ObjectStore, around: AroundCall): ObjectStore {
  return {
    kind: inner.kind,
    completionChecksum: inner.completionChecksum,
    put: (key, body, o) =>
      around({
        op: "put",
        key,
        signal: o?.signal,
        bytes: body.length,
        run: (signal) => inner.put(key, body, { ...o, signal }),
      }),
    get: (key, o) =>
      around({
        op: "get",
        key,
        signal: o?.signal,
        run: (signal) => inner.get(key, { ...o, signal }),
      }),
    head: (key, o) =>
      around({
        op: "head",
        key,
        signal: o?.signal,
        run: (signal) => inner.head(key, { ...o, signal }),
      }),
    deleteMany: (keys, o) =>
      around({
        op: "delete",
        key: keys[0] ?? "",
        signal: o?.signal,
        run: (signal) => inner.deleteMany(keys, { signal }),
      }),
    list: (prefix, o) =>
      around({
        op: "list",
        key: prefix,
        signal: o?.signal,
        run: (signal) => inner.list(prefix, { ...o, signal }),
      }),
    createMultipart: (key, o) =>
      around({
        op: "create_multipart",
        key,
        signal: o?.signal,
        run: (signal) => inner.createMultipart(key, { ...o, signal }),
      }),
    putPart: (key, uploadId, partNumber, body, o) =>
      around({
        op: "put_part",
        key,
        signal: o?.signal,
        bytes: body.length,
        run: (signal) => inner.putPart(key, uploadId, partNumber, body, { ...o, signal }),
      }),
    completeMultipart: (key, uploadId, parts, o) =>
      around({
        op: "complete_multipart",
        key,
        signal: o?.signal,
        run: (signal) => inner.completeMultipart(key, uploadId, parts, { ...o, signal }),
      }),
    abortMultipart: (key, uploadId, o) =>
      around({
        op: "abort_multipart",
        key,
        signal: o?.signal,
        run: (signal) => inner.abortMultipart(key, uploadId, { signal }),
      }),
    listMultipartUploads: (prefix, o) =>
      around({
        op: "list_multipart_uploads",
        key: prefix,
        signal: o?.signal,
        run: (signal) => inner.listMultipartUploads(prefix, { signal }),
      }),
    close: () => inner.close?.() ?? Promise.resolve(),
  };
}
