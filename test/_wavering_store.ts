// A store decorator that wavers: chosen calls on chosen keys fail with a scripted error (a
// `NotFound` the store takes back on the next call, a transport fault) a set number of times,
// then run on the inner store again. The object itself never changes. For the tests that one
// NotFound is not data loss (issue 22): the read path, the verify pass and eviction.
import { decorateStore, type StoreOp } from "../providers/decorate.ts";
import { type ObjectStore, StoreError, type StoreErrorKind } from "../providers/types.ts";

/** One scripted failure: calls of `op` on a key `key` accepts fail `times` more times. */
export interface Waver {
  op: StoreOp;
  key: (key: string) => boolean;
  /** How many more matching calls fail (then they run again). */
  times: number;
  /** @default "NotFound" */
  kind?: StoreErrorKind;
  /** Matching calls that ran (not failed) before this one fails: `skip` of them pass first. */
  skip?: number;
}

/** A wavering store and what it did. */
export interface WaveringStore {
  store: ObjectStore;
  /** Adds a scripted failure; the earliest added that matches a call decides it. */
  waver(w: Waver): void;
  /** Every call, in order, and whether it was failed on purpose. */
  readonly calls: readonly { op: StoreOp; key: string; failed?: StoreErrorKind }[];
  /** Calls failed on purpose so far. */
  readonly failed: number;
}

/** Wraps `inner` (see {@link WaveringStore}). */
export function waveringStore(inner: ObjectStore): WaveringStore {
  const wavers: Waver[] = [];
  const calls: { op: StoreOp; key: string; failed?: StoreErrorKind }[] = [];
  let failed = 0;
  const store = decorateStore(inner, (call) => {
    const w = wavers.find((w) => w.op === call.op && w.times > 0 && w.key(call.key));
    if (w && (w.skip ?? 0) > 0) w.skip!--;
    else if (w) {
      w.times--;
      failed++;
      const kind = w.kind ?? "NotFound";
      calls.push({ op: call.op, key: call.key, failed: kind });
      // As the providers say it: the operation, the key, and (for NotFound) a 404.
      return Promise.reject(
        new StoreError(kind, `${call.op} ${call.key}: scripted ${kind} (the store wavered)`, {
          op: call.op,
          key: call.key,
          ...(kind === "NotFound" && { status: 404, code: "NoSuchKey" }),
        }),
      );
    }
    calls.push({ op: call.op, key: call.key });
    return call.run(call.signal);
  });
  return {
    store,
    waver: (w) => void wavers.push({ ...w }),
    get calls() {
      return calls;
    },
    get failed() {
      return failed;
    },
  };
}

/** A key matcher for `waver`: exactly this key. */
export const exactly = (key: string) => (k: string) => k === key;
