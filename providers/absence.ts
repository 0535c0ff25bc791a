// Is an object really gone? One `NotFound` is not enough to call data lost: a store may answer it
// for a moment (a replica behind, an eventually consistent listing, a proxy's hiccup). The
// absence is confirmed by a HEAD, then by a listing of the key itself; only when both agree is
// the object gone. Store faults while confirming are thrown as they are (the caller answers
// "retry"), never taken for an absence.
import { type ObjectStore, StoreError } from "./types.ts";

/**
 * Where a key stands after a `NotFound`: `present` (a HEAD finds it: the store wavered),
 * `listed` (the HEAD still says NotFound but a listing has the key: the store contradicts
 * itself — an object it cannot read), or `absent` (both agree it is gone).
 * @throws {StoreError} any failure but `NotFound` while asking (a fault, not an answer)
 */
export async function probeAbsence(
  store: ObjectStore,
  key: string,
  options: { signal?: AbortSignal } = {},
): Promise<"present" | "listed" | "absent"> {
  try {
    await store.head(key, { signal: options.signal });
    return "present";
  } catch (err) {
    if (!(err instanceof StoreError && err.kind === "NotFound")) throw err;
  }
  const page = await store.list(key, { maxKeys: 1, signal: options.signal });
  return page.objects.some((o) => o.key === key) ? "listed" : "absent";
}

/**
 * True when `key` is confirmed gone (HEAD NotFound, and no listing entry with that key); false
 * when either finds it.
 * @throws {StoreError} any failure but `NotFound` while asking (a fault, not an answer)
 */
export async function confirmAbsent(
  store: ObjectStore,
  key: string,
  options: { signal?: AbortSignal } = {},
): Promise<boolean> {
  return await probeAbsence(store, key, options) === "absent";
}
