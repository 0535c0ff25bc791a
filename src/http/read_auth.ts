// Who may read tiered messages through the API's records route (`agent.read_auth`):
// - `iggy`: the caller's Iggy credentials, checked with the broker for the very partition read —
//   a bearer token (the broker's JWT) as it is, or Basic user and password logged in at the
//   broker — by a poll of one message on the caller's behalf, as the Iggy listener probes, so
//   the broker's users and permissions decide; an answer is reused for `ttlMs` per credentials
//   and partition;
// - `token`: `Bearer <read_token>`, compared in constant time;
// - `none`: anyone who reaches the listener (loopback only, unless set insecure on purpose).
import { createHash } from "node:crypto";
import { Buffer } from "node:buffer";
import type { Clock } from "../base/clock.ts";
import type { PartitionId } from "../layout/partition.ts";
import { ClientCalls } from "../iggy_http/client_calls.ts";
import { BrokerRefused, IggyHttpError } from "../iggy_http/errors.ts";
import { parsePollQuery } from "../iggy_http/query.ts";
import type { Upstream } from "../iggy_http/upstream.ts";
import { loginToken } from "../tier/broker_client.ts";
import { tokensMatch } from "./auth.ts";
import { ApiError } from "./errors.ts";

/** Checks a read's `Authorization` header; throws the API's 401 or 403, or 502. */
export type ReadGuard = (
  authorization: string | undefined,
  partition: PartitionId,
) => Promise<void>;

const CHALLENGE = { "www-authenticate": 'Bearer realm="tierd", Basic realm="tierd"' };

function unauthorized(message: string): ApiError {
  return new ApiError(401, "unauthorized", message, CHALLENGE);
}

/** `read_auth = "token"`: the configured bearer token. */
export function tokenReadGuard(token: string): ReadGuard {
  return (authorization) => {
    const given = authorization === undefined
      ? undefined
      : /^Bearer +(\S+) *$/i.exec(authorization)?.[1];
    if (given === undefined) {
      return Promise.reject(unauthorized("reading records needs Authorization: Bearer <token>"));
    }
    if (!tokensMatch(given, token)) {
      return Promise.reject(
        new ApiError(403, "forbidden", "the bearer token is not the configured read_token"),
      );
    }
    return Promise.resolve();
  };
}

/** `read_auth = "iggy"`: whatever the broker lets these credentials poll. */
export function iggyReadGuard(upstream: Upstream, ttlMs: number, clock: Clock): ReadGuard {
  const calls = new ClientCalls(upstream, ttlMs, clock);
  const logins = new Map<string, { at: number; bearer: string }>();

  /** The bearer the broker takes for Basic credentials: a login at the broker, reused. */
  const bearerFor = async (basic: string): Promise<string> => {
    const key = createHash("sha256").update(basic).digest("base64");
    const now = clock.monotonic();
    const hit = logins.get(key);
    if (hit && now - hit.at < ttlMs) return hit.bearer;
    const text = Buffer.from(basic, "base64").toString("utf8");
    const colon = text.indexOf(":");
    if (colon < 0) throw unauthorized("Basic credentials are user:password");
    const res = await upstream.call({
      method: "POST",
      path: "/users/login",
      headers: new Headers({ "content-type": "application/json", accept: "application/json" }),
      body: new TextEncoder().encode(
        JSON.stringify({ username: text.slice(0, colon), password: text.slice(colon + 1) }),
      ),
    });
    if (res.status !== 200) {
      throw unauthorized(`the broker refused these credentials (HTTP ${res.status})`);
    }
    const token = loginToken(new TextDecoder().decode(res.body));
    if (token === undefined) {
      throw new ApiError(502, "broker_answer_unreadable", "the broker's login answer has no token");
    }
    if (logins.size >= 10_000) logins.clear();
    const bearer = `Bearer ${token}`;
    logins.set(key, { at: now, bearer });
    return bearer;
  };

  return async (authorization, id) => {
    const scheme = authorization === undefined ? undefined : /^(Bearer|Basic) +(\S+) *$/i.exec(
      authorization,
    );
    if (!scheme) {
      throw unauthorized(
        "reading records needs the caller's Iggy credentials: Authorization: Bearer <the " +
          "broker's token> or Basic <user:password>",
      );
    }
    const bearer = scheme[1].toLowerCase() === "basic"
      ? await bearerFor(scheme[2])
      : `Bearer ${scheme[2]}`;
    try {
      await calls.probe(
        bearer,
        { stream: String(id.stream), topic: String(id.topic) },
        parsePollQuery(new URLSearchParams({ partition_id: String(id.partition) }))!,
      );
    } catch (err) {
      if (err instanceof BrokerRefused) {
        if (err.status === 401) {
          throw unauthorized("the broker does not accept these credentials");
        }
        throw new ApiError(
          403,
          "forbidden",
          `the broker does not let these credentials poll partition ${id.stream}/${id.topic}/` +
            `${id.partition} (HTTP ${err.status})`,
        );
      }
      if (err instanceof IggyHttpError) throw new ApiError(502, err.code, err.message);
      throw err;
    }
  };
}
