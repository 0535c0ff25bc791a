// The upload bandwidth limit (`tiered_storage.upload_bandwidth`): every body a store call sends —
// a PUT, a multipart part, and each of their retries — first waits for its bytes from one pace
// shared node-wide, so a backlog after an outage does not saturate the broker's network.
import { decorateStore } from "./decorate.ts";
import type { ObjectStore } from "./types.ts";

/** What paces uploads: a token bucket over bytes. */
export interface UploadPace {
  /** Waits until `bytes` may be sent; throws the signal's reason when it aborts first. */
  take(bytes: number, signal?: AbortSignal): Promise<void>;
}

/**
 * Wraps `inner` so that each body it sends waits for `pace` first.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimStore } from "./sim/store.ts";
 *
 * const taken: number[] = [];
 * const pace = {
 *   take(bytes: number) {
 *     taken.push(bytes);
 *     return Promise.resolve();
 *   },
 * };
 * const store = paceUploads(new SimStore(), pace); // in tierd: a TokenBucket at upload_bandwidth
 * await store.put("iggy/a.log", new Uint8Array(100));
 * assert.deepEqual(taken, [100]);
 * ```
 */
export function paceUploads(inner: ObjectStore, pace: UploadPace): ObjectStore {
  return decorateStore(inner, async (call) => {
    if (call.bytes !== undefined) await pace.take(call.bytes, call.signal);
    return await call.run(call.signal);
  });
}
