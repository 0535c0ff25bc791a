// One request to a credential endpoint (STS, a token endpoint, a metadata server) through the
// shared transport, its answer read as JSON or text, and a refusal turned into a
// `CredentialError` naming the source. Answers are scrubbed of every secret before any of
// their text is cut down for a message.
import type { Clock } from "../../src/base/clock.ts";
import { type FetchFn, sendHttp } from "../http.ts";
import { snippet } from "../_xml.ts";
import { StoreError } from "../types.ts";
import { CredentialError } from "./types.ts";

/** How a credential request is sent. */
export interface EndpointContext {
  /** The source, for messages: `imds`, `web_identity`… */
  source: string;
  fetch: FetchFn;
  clock?: Clock;
  /** @default 10000 */
  timeoutMs?: number;
  /** Scrubs secrets from any text bound for a message. */
  redact: (text: string) => string;
  signal?: AbortSignal;
}

/** A request to a credential endpoint. */
export interface EndpointRequest {
  method: "GET" | "POST" | "PUT";
  url: string;
  headers?: Record<string, string>;
  body?: Uint8Array | string;
}

/** A credential endpoint's answer, its body as text. */
export interface EndpointAnswer {
  status: number;
  headers: Headers;
  text: string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Sends one request and returns any answer.
 * @throws {CredentialError} `Transport` when the endpoint cannot be reached or times out
 */
export async function callEndpoint(
  ctx: EndpointContext,
  request: EndpointRequest,
): Promise<EndpointAnswer> {
  const body = typeof request.body === "string" ? encoder.encode(request.body) : request.body;
  try {
    const response = await sendHttp(ctx.fetch, {
      method: request.method,
      url: request.url,
      headers: request.headers ?? {},
      body,
      signal: ctx.signal,
      timeoutMs: ctx.timeoutMs ?? 10_000,
    }, { op: "credentials", redact: ctx.redact, clock: ctx.clock });
    return {
      status: response.status,
      headers: response.headers,
      text: decoder.decode(response.body),
    };
  } catch (err) {
    if (ctx.signal?.aborted || !(err instanceof StoreError)) throw err;
    throw new CredentialError(err.kind, ctx.source, ctx.redact(err.message), {
      status: err.detail.status,
    }, { cause: err.cause });
  }
}

/** The error kind of a refusing status: throttling, a server fault, else a refusal. */
export function refusalKind(status: number): "Throttled" | "Transport" | "Auth" {
  if (status === 429 || status === 503) return "Throttled";
  if (status >= 500) return "Transport";
  return "Auth";
}

/**
 * The error for an endpoint that answered `status`: its OAuth-style `error` /
 * `error_description` (or `Code` / `Message`) when the body is JSON, else the start of the body,
 * scrubbed before it is cut.
 */
export function refusal(
  ctx: EndpointContext,
  what: string,
  answer: EndpointAnswer,
): CredentialError {
  const json = parseJsonObject(answer.text);
  const code = str(json?.error) ?? str(json?.Code) ?? str(json?.code) ?? `Http${answer.status}`;
  const description = str(json?.error_description) ?? str(json?.Message) ?? str(json?.message) ??
    (json ? "" : snippet(ctx.redact(answer.text)));
  return new CredentialError(
    refusalKind(answer.status),
    ctx.source,
    ctx.redact(`${what} answered ${answer.status} ${code}${description ? `: ${description}` : ""}`),
    { status: answer.status, code },
  );
}

/** The body as a JSON object, or undefined when it is not one. */
export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const value = text ? JSON.parse(text) : undefined;
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? value as Record<string, unknown>
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The JSON object of a 2xx answer.
 * @throws {CredentialError} the refusal for another status; `Malformed` for a body that is not
 *   a JSON object
 */
export function jsonAnswer(
  ctx: EndpointContext,
  what: string,
  answer: EndpointAnswer,
): Record<string, unknown> {
  if (answer.status < 200 || answer.status >= 300) throw refusal(ctx, what, answer);
  const json = parseJsonObject(answer.text);
  if (!json) {
    throw new CredentialError(
      "Malformed",
      ctx.source,
      `${what} answered ${answer.status} without a JSON object: ${
        snippet(ctx.redact(answer.text))
      }`,
      { status: answer.status, code: "Malformed" },
    );
  }
  return json;
}

/** A non-empty string field, else undefined. */
export function str(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/**
 * A required non-empty string field of an answer.
 * @throws {CredentialError} `Malformed` naming the field
 */
export function requireField(
  source: string,
  what: string,
  json: Record<string, unknown>,
  field: string,
): string {
  const value = str(json[field]);
  if (value === undefined) {
    throw new CredentialError("Malformed", source, `${what} answered without "${field}"`, {
      code: "Malformed",
    });
  }
  return value;
}

/**
 * An expiry time from an ISO 8601 text (`2026-01-01T00:00:00Z`), epoch seconds (number or
 * digit string), or seconds from `now` (`expires_in`).
 * @throws {CredentialError} `Malformed` for a value that is none of these
 */
export function expiryFrom(
  source: string,
  value: unknown,
  kind: "date" | "epoch-seconds" | "seconds-from-now",
  now: number,
): number {
  const n = typeof value === "number"
    ? value
    : typeof value === "string" && /^\d+$/.test(value.trim())
    ? Number(value)
    : NaN;
  let at = NaN;
  if (kind === "date" && typeof value === "string") at = Date.parse(value);
  else if (kind === "epoch-seconds") at = n * 1000;
  else if (kind === "seconds-from-now") at = now + n * 1000;
  if (!Number.isFinite(at)) {
    throw new CredentialError("Malformed", source, `bad expiry ${JSON.stringify(value)}`, {
      code: "Malformed",
    });
  }
  return at;
}
