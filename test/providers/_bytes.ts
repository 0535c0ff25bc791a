// Bodies for the provider and contract tests: random bytes of any size (parts are joined back
// with concatBytes, src/base/bytes.ts).

/** `n` random bytes (`crypto.getRandomValues` fills at most 64 KiB per call). */
export function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, i + 65536));
  return out;
}
