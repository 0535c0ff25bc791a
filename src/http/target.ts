// The route of a request comes from its request line, never from its Host header: what a client
// sends as the request target (RFC 9112 §3.2) is checked and reduced to the path and query that
// route it — on the API and on the Iggy listener, whose forwarded path is the same one. A target
// that a URL parser would rewrite into another route than a proxy in front of tierd saw (dot
// segments, raw or percent-encoded; backslashes; anything outside printable ASCII) is refused, not
// normalized: an ingress rule exposing only `/healthz` must not reach `/v1/…` through
// `/healthz/%2e%2e/v1/…`.

/** The longest request target answered; a longer one gets 414. */
export const MAX_TARGET_BYTES = 8 * 1024;

/** A request target tierd will not route: the status to answer and why. */
export class TargetError extends Error {
  override readonly name = "TargetError";
  constructor(readonly status: 400 | 414, readonly code: string, message: string) {
    super(message);
  }
}

const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;

/**
 * The path and query of a request target: origin-form (`/path?query`) as it came; absolute-form
 * (`http://authority/path?query`) reduced to its path and query — its authority chooses nothing,
 * as Host does not.
 *
 * @throws {TargetError} 414 `uri_too_long` over {@link MAX_TARGET_BYTES}; 400 `bad_target` for
 *   authority-form and asterisk-form, a path starting `//`, bytes outside printable ASCII, a
 *   fragment, a backslash, or a `.` or `..` path segment (also as `%2e`)
 */
export function routeTarget(target: string): string {
  if (target.length > MAX_TARGET_BYTES) {
    throw new TargetError(
      414,
      "uri_too_long",
      `the request target is ${target.length} bytes, more than ${MAX_TARGET_BYTES}`,
    );
  }
  let rest = target;
  const scheme = ABSOLUTE_FORM.exec(rest);
  if (scheme) {
    rest = rest.slice(scheme[0].length);
    const end = rest.search(/[/?]/);
    rest = end < 0 ? "/" : rest[end] === "?" ? `/${rest.slice(end)}` : rest.slice(end);
  }
  if (!rest.startsWith("/")) {
    throw new TargetError(400, "bad_target", "the request target is not a path (origin-form)");
  }
  if (rest.startsWith("//")) {
    // A URL parser takes `//host/path` for another host's path.
    throw new TargetError(400, "bad_target", "the request target starts with an empty segment");
  }
  for (let i = 0; i < rest.length; i++) {
    const c = rest.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f) {
      throw new TargetError(
        400,
        "bad_target",
        "the request target has a byte that is not printable ASCII",
      );
    }
    if (c === 0x23 /* # */ || c === 0x5c /* \ */) {
      throw new TargetError(
        400,
        "bad_target",
        `the request target has a ${c === 0x23 ? "fragment" : "backslash"}`,
      );
    }
  }
  const query = rest.indexOf("?");
  const path = query < 0 ? rest : rest.slice(0, query);
  for (const segment of path.split("/")) {
    const plain = segment.replace(/%2e/gi, ".");
    if (plain === "." || plain === "..") {
      throw new TargetError(400, "bad_target", "the request target has a dot segment");
    }
  }
  return rest;
}
