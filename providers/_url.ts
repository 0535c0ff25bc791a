// URL plumbing shared by the GCS and Azure providers: keys percent-encoded the way each service
// expects, keys that URL parsing would rewrite refused up front, and query strings built by hand
// (URLSearchParams writes spaces as `+`, which neither service reads back as a space).
import { checkKey, invalidKey } from "./key_rules.ts";

/**
 * A key as a URL path: each `/`-separated segment percent-encoded, the slashes kept (Azure).
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * assert.equal(encodeKeyPath("a b/c+d"), "a%20b/c%2Bd");
 * ```
 */
export function encodeKeyPath(key: string): string {
  return key.split("/").map(encodeURIComponent).join("/");
}

/**
 * Refuses keys no store accepts (./key_rules.ts) and keys with a `.` or `..` path segment: `fetch`
 * resolves those, sending the request for another name.
 * @throws {StoreError} `Unsupported` with code `InvalidKey`
 */
export function checkPathKey(key: string, op: string): void {
  checkKey(key, op);
  if (/(^|\/)\.\.?(\/|$)/.test(key)) {
    throw invalidKey(key, op, "a '.' or '..' path segment would be rewritten by URL parsing");
  }
}

/** One query parameter, raw (not yet encoded). */
export type QueryParam = [name: string, value: string];

/** `?a=1&b=2` with names and values percent-encoded (`%20` for a space), or `""` for none. */
export function queryString(query: readonly QueryParam[]): string {
  if (query.length === 0) return "";
  return "?" + query.map(([n, v]) => `${encodeURIComponent(n)}=${encodeURIComponent(v)}`).join("&");
}

/**
 * Splits an endpoint URL into origin and path prefix (no trailing slash).
 * @throws {TypeError} for an endpoint that is not an http(s) URL
 */
export function parseEndpoint(
  endpoint: string,
  what: string,
): { origin: string; basePath: string; hostname: string } {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new TypeError(`${what} endpoint is not a URL: ${JSON.stringify(endpoint)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`${what} endpoint must be http or https: ${endpoint}`);
  }
  if (url.search || url.hash || url.username || url.password) {
    throw new TypeError(`${what} endpoint must not carry a query, fragment or user info`);
  }
  return { origin: url.origin, basePath: url.pathname.replace(/\/+$/, ""), hostname: url.hostname };
}
