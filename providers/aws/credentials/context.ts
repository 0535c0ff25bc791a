// What every AWS credential source that makes requests is given: the environment, the
// transport, the clock and the scrubber of every secret the chain holds.
import type { Clock } from "../../../src/base/clock.ts";
import type { FetchFn } from "../../http.ts";
import type { EndpointContext } from "../../credentials/endpoint.ts";
import type { Env } from "../../credentials/types.ts";

/** The dependencies of the AWS sources. */
export interface AwsSourceContext {
  env: Env;
  fetch: FetchFn;
  clock: Clock;
  /** Scrubs every secret of the chain (read on each call). */
  redact: (text: string) => string;
  /** Per-request timeout of credential endpoints. @default 10000 */
  timeoutMs?: number;
}

/** The endpoint context of one request by `source`. */
export function endpointContext(
  ctx: AwsSourceContext,
  source: string,
  signal?: AbortSignal,
  timeoutMs?: number,
): EndpointContext {
  return {
    source,
    fetch: ctx.fetch,
    clock: ctx.clock,
    timeoutMs: timeoutMs ?? ctx.timeoutMs,
    redact: ctx.redact,
    signal,
  };
}

/** A session name for STS calls: `tierd-` and 8 random hex digits. */
export function sessionName(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return `tierd-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}
