// Bearer-token guard of the admin routes. The token is compared in constant time (both sides
// hashed first, so neither length nor content leaks through timing); an empty configured token
// disables the admin API rather than leaving it open.
import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { ApiError } from "./errors.ts";

function digest(text: string): Uint8Array {
  return createHash("sha256").update(text, "utf8").digest();
}

/** True when `given` equals `expected`, in time independent of where they differ. */
export function tokensMatch(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/**
 * Middleware requiring `Authorization: Bearer <token>`.
 *
 * @param token `agent.api_token`; empty disables every guarded route (403)
 * @throws {ApiError} 403 `admin_disabled` when the token is empty, 401 `unauthorized` without a
 *   bearer token, 403 `forbidden` for a wrong one
 */
export function requireBearer(token: string): MiddlewareHandler {
  return async (c, next) => {
    if (token === "") {
      throw new ApiError(
        403,
        "admin_disabled",
        "the admin API is disabled: set agent.api_token (or TIERD_API_TOKEN) to enable it",
      );
    }
    const header = c.req.header("authorization");
    const given = header === undefined ? undefined : /^Bearer +(\S+) *$/i.exec(header)?.[1];
    if (given === undefined) {
      throw new ApiError(401, "unauthorized", "admin routes need Authorization: Bearer <token>", {
        "www-authenticate": 'Bearer realm="tierd"',
      });
    }
    if (!tokensMatch(given, token)) {
      throw new ApiError(403, "forbidden", "the bearer token is not the configured api_token");
    }
    await next();
  };
}
