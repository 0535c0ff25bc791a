// Scrubbing secrets out of foreign text: what a store or the broker answered (error bodies, which
// reach tierd's logs inside `StoreError` and `BrokerError` messages) may quote anything it was
// sent. tierd's own text (messages, object keys, the prefix, paths) is kept free of secrets at
// its source and is never scrubbed, so it stays readable whatever the secrets are.
//
// Only secrets of at least {@link MIN_SCRUB_LENGTH} characters are scrubbed. A shorter one is
// not distinctive: replacing Iggy's default password `iggy` wherever it appears would also
// replace the key prefix `iggy`, every object key under it and every path holding it, and
// still give nothing away that a reader could not guess. Eight characters is the shortest that
// common words and key parts rarely match by chance, and the shortest password or token that
// deserves the name; every generated credential tierd handles (S3 secret keys, SAS tokens,
// bearer tokens, JWTs) is far longer.

/** Secrets shorter than this are not scrubbed from foreign text (see the module comment). */
export const MIN_SCRUB_LENGTH = 8;

/** What replaces a secret in scrubbed text. */
export const SCRUBBED = "***";

/** Replaces every scrubbable secret in a text. */
export type Scrub = (text: string) => string;

/**
 * A scrubber for `secrets`: each one of at least {@link MIN_SCRUB_LENGTH} characters is replaced
 * by `***` raw, as it appears inside a JSON string, and URL-encoded. Longer secrets go first, so
 * a secret that contains another is replaced whole.
 *
 * @param secrets the secret values (empty and short ones are ignored)
 * @returns a pure function of the text; the identity when no secret qualifies
 */
export function foreignTextScrubber(secrets: Iterable<string>): Scrub {
  const forms = new Set<string>();
  for (const s of secrets) {
    if (s.length < MIN_SCRUB_LENGTH) continue;
    forms.add(s);
    forms.add(JSON.stringify(s).slice(1, -1));
    forms.add(encodeURIComponent(s));
  }
  const ordered = [...forms].sort((a, b) => b.length - a.length);
  if (ordered.length === 0) return (text) => text;
  return (text) => {
    let out = text;
    for (const form of ordered) if (out.includes(form)) out = out.replaceAll(form, SCRUBBED);
    return out;
  };
}

/**
 * Scrubs every string inside a JSON-like value (arrays and plain objects are copied; other
 * values are returned as they are).
 */
export function scrubDeep(value: unknown, scrub: Scrub, depth = 0): unknown {
  if (typeof value === "string") return scrub(value);
  if (depth > 8 || typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, scrub, depth + 1));
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, scrubDeep(v, scrub, depth + 1)]),
  );
}
