// Bounded concurrency for per-key requests (GCS and Azure delete one object per request).
import { classify, type DeleteFailure, StoreError } from "./types.ts";

/**
 * Runs `fn` over `items` with at most `limit` calls in flight. After the first failure no new
 * call starts; the calls in flight are awaited, then that failure is thrown.
 * @param items what to work on
 * @param limit calls in flight at most (at least 1)
 * @param fn one call; gets the item and its index
 * @throws the first error `fn` threw
 */
export async function forEachBounded<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed = false;
  let failure: unknown;
  const worker = async () => {
    while (!failed && next < items.length) {
      const index = next++;
      try {
        await fn(items[index], index);
      } catch (err) {
        if (!failed) {
          failed = true;
          failure = err;
        }
      }
    }
  };
  const width = Math.max(1, Math.min(Math.floor(limit), items.length));
  await Promise.all(Array.from({ length: width }, worker));
  if (failed) throw failure;
}

/**
 * Deletes keys one request each, `limit` at a time, for stores without a batch delete. A key
 * the store refuses becomes a failure entry; an auth, throttling or transport failure stops the
 * batch and is thrown (the caller retries the whole batch).
 * @param deleteOne checks the key and deletes it; a missing object is success
 * @returns the keys that could not be deleted, with why
 */
export async function deleteEach(
  keys: readonly string[],
  limit: number,
  deleteOne: (key: string) => Promise<void>,
): Promise<DeleteFailure[]> {
  const failures: DeleteFailure[] = [];
  await forEachBounded([...new Set(keys)], limit, async (key) => {
    try {
      await deleteOne(key);
    } catch (err) {
      if (!(err instanceof StoreError) || classify(err) === "retry" || classify(err) === "auth") {
        throw err;
      }
      failures.push({ key, error: err });
    }
  });
  return failures;
}
