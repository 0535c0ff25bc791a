// A store that can only be read: GET, HEAD and the listings go through, and every call that would
// change the bucket (a put, a delete, any multipart step) is refused before it is sent. Commands
// that promise to change nothing (`tierd verify`) read through it, so the promise holds by
// construction, not by care.
import { decorateStore, type StoreOp } from "./decorate.ts";
import type { ObjectStore } from "./types.ts";

/** The operations that only read. */
const READS: ReadonlySet<StoreOp> = new Set(["get", "head", "list", "list_multipart_uploads"]);

/** A write reached a read-only store: a bug in its caller, never retried. */
export class WriteRefused extends Error {
  override readonly name = "WriteRefused";
  constructor(readonly op: StoreOp, readonly key: string) {
    super(`refused ${op} of ${JSON.stringify(key)}: this store is read-only`);
  }
}

/**
 * Wraps `inner` so that only reads reach it.
 * @param inner the store to read
 * @returns a store whose writes throw {@link WriteRefused} without a request
 */
export function readOnlyStore(inner: ObjectStore): ObjectStore {
  return decorateStore(inner, (call) => {
    if (!READS.has(call.op)) return Promise.reject(new WriteRefused(call.op, call.key));
    return call.run(call.signal);
  });
}
