// Per-key deletes with bounded concurrency (GCS and Azure delete one object per request).
import { forEachBounded } from "../src/base/concurrency.ts";
import { classify, type DeleteFailure, StoreError } from "./types.ts";

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
