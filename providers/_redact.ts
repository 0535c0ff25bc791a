// Keeps credentials out of errors: a redactor for the secrets a provider holds, and a `fetch`
// wrapper that scrubs them from network errors (Deno's name the URL, which carries a SAS token)
// before the transport wraps those errors as `cause`s.
import type { FetchFn } from "./http.ts";

/**
 * Shorter secrets are not scrubbed: they are not distinctive, and replacing them would blot out
 * keys and paths in the same message (the rule of src/scrub.ts, `MIN_SCRUB_LENGTH`).
 */
const MIN_SECRET = 8;

/**
 * A function that replaces every secret (and SAS/URL `sig=` values) in a text with
 * `[redacted]`. `secrets` is read on each call, so tokens that rotate are covered.
 */
export function secretRedactor(
  secrets: () => Iterable<string | undefined>,
): (text: string) => string {
  return (text) => {
    let out = text;
    for (const secret of secrets()) {
      if (!secret || secret.length < MIN_SECRET) continue;
      for (const form of new Set([secret, encodeURIComponent(secret)])) {
        if (out.includes(form)) out = out.replaceAll(form, "[redacted]");
      }
    }
    return out.replace(/([?&]sig=)[^&\s)"'<]+/gi, "$1[redacted]");
  };
}

/**
 * A copy of `err` whose message and `cause` chain went through `redact`; `err` itself when
 * nothing needed scrubbing.
 */
export function redactError(err: unknown, redact: (text: string) => string, depth = 0): unknown {
  if (!(err instanceof Error) || depth > 4) {
    return typeof err === "string" ? redact(err) : err;
  }
  const message = redact(err.message);
  const cause = err.cause === undefined ? undefined : redactError(err.cause, redact, depth + 1);
  if (message === err.message && cause === err.cause) return err;
  const copy = err instanceof DOMException
    ? new DOMException(message, err.name)
    : new (err instanceof TypeError ? TypeError : Error)(
      message,
      cause === undefined ? undefined : { cause },
    );
  if (!(copy instanceof DOMException) && copy.name !== err.name) copy.name = err.name;
  return copy;
}

/** `fetchFn` with thrown errors passed through {@link redactError}. */
export function redactingFetch(fetchFn: FetchFn, redact: (text: string) => string): FetchFn {
  return async (input, init) => {
    try {
      return await fetchFn(input, init);
    } catch (err) {
      throw redactError(err, redact);
    }
  };
}
