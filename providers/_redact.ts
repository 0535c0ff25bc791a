// Keeps credentials out of errors: a redactor for the secrets a provider holds (key ids
// included), a scrub of answer bodies before any of their text is cut down for a message, and a
// `fetch` wrapper that scrubs network errors (Deno's name the URL, which carries a SAS token)
// before the transport wraps those errors as `cause`s.
import type { FetchFn } from "./http.ts";

/**
 * Shorter secrets are not scrubbed: they are not distinctive, and replacing them would blot out
 * keys and paths in the same message (the rule of src/scrub.ts, `MIN_SCRUB_LENGTH`).
 */
const MIN_SECRET = 8;
/** How `snippet` (./_xml.ts) marks a cut. */
const CUT = "…";

/**
 * A function that replaces every secret (and SAS/URL `sig=` values) in a text with
 * `[redacted]`. `secrets` is read on each call, so tokens that rotate are covered. A secret cut
 * short by a snippet (`…AKIAEXAM…`) has its leading part scrubbed too, as a second line of
 * defence: answer bodies are scrubbed before they are cut ({@link scrubBody}).
 */
export function secretRedactor(
  secrets: () => Iterable<string | undefined>,
): (text: string) => string {
  return (text) => {
    let out = text;
    const forms: string[] = [];
    for (const secret of secrets()) {
      if (!secret || secret.length < MIN_SECRET) continue;
      for (const form of new Set([secret, encodeURIComponent(secret)])) {
        forms.push(form);
        if (out.includes(form)) out = out.replaceAll(form, "[redacted]");
      }
    }
    if (out.includes(CUT)) out = scrubCutPrefixes(out, forms);
    return out.replace(/([?&]sig=)[^&\s)"'<]+/gi, "$1[redacted]");
  };
}

/** Replaces a leading part (at least 4 characters) of any form that ends right at a cut. */
function scrubCutPrefixes(text: string, forms: readonly string[]): string {
  let out = text;
  for (let at = out.indexOf(CUT); at >= 0; at = out.indexOf(CUT, at + 1)) {
    let longest = 0;
    for (const form of forms) {
      for (let n = Math.min(form.length - 1, at); n >= MIN_SECRET; n--) {
        if (n > longest && out.startsWith(form.slice(0, n), at - n)) {
          longest = n;
          break;
        }
      }
    }
    if (longest > 0) {
      out = out.slice(0, at - longest) + "[redacted]" + out.slice(at);
      at += "[redacted]".length - longest;
    }
  }
  return out;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * An answer body with every secret scrubbed, for error paths that quote it: scrubbing happens
 * before the body is cut into a snippet, so no part of a secret survives the cut. The same
 * array when nothing needed scrubbing.
 */
export function scrubBody(body: Uint8Array, redact: (text: string) => string): Uint8Array {
  if (body.byteLength === 0) return body;
  const text = decoder.decode(body);
  const clean = redact(text);
  return clean === text ? body : encoder.encode(clean);
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
