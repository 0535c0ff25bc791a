// Bounded concurrency: run an async function over a list with at most N calls in flight.

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
