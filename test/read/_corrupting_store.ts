// A store decorator that corrupts GET answers in transit: the object in the store stays good,
// only the bytes handed back are changed (the last byte flipped), the way a bad NIC, proxy or
// memory does it. For the cache-healing tests.
import { decorateStore } from "../../providers/decorate.ts";
import type { GetResult, ObjectStore } from "../../providers/types.ts";

/** A store whose next GET answers (or every one) come back corrupted. */
export interface CorruptingStore {
  store: ObjectStore;
  /** Corrupts the next `n` GET answers of `.log` objects. */
  corruptNext(n?: number): void;
  /** Corrupts every GET answer of `.log` objects until set back. */
  corruptAll(on: boolean): void;
  /** GETs of `.log` objects so far, and how many of them were corrupted. */
  readonly gets: number;
  readonly corrupted: number;
}

/** Wraps `inner` (see {@link CorruptingStore}). */
export function corruptingStore(inner: ObjectStore): CorruptingStore {
  let next = 0;
  let all = false;
  let gets = 0;
  let corrupted = 0;
  const store = decorateStore(inner, async (call) => {
    const result = await call.run(call.signal);
    if (call.op !== "get" || !call.key.endsWith(".log")) return result;
    gets++;
    if (!all && next === 0) return result;
    if (next > 0) next--;
    corrupted++;
    const got = result as GetResult;
    // A copy: a Node Buffer's slice() is a view, and the store's object must stay good.
    const bytes = new Uint8Array(got.bytes);
    bytes[bytes.length - 1] ^= 0x5a;
    return { ...got, bytes } as typeof result;
  });
  return {
    store,
    corruptNext: (n = 1) => void (next += n),
    corruptAll: (on) => void (all = on),
    get gets() {
      return gets;
    },
    get corrupted() {
      return corrupted;
    },
  };
}
