// Incarnation ids: a random u64 recorded the first time tierd sees a partition directory,
// so objects of a recreated partition never collide with the old ones (docs/architecture.md,
// "The broker contract").

/** A fresh random incarnation id. */
export function newIncarnation(): bigint {
  const words = crypto.getRandomValues(new Uint32Array(2));
  return (BigInt(words[0]) << 32n) | BigInt(words[1]);
}
