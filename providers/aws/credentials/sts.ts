// The two STS calls tierd makes: AssumeRole (signed with SigV4 by the credentials it builds on)
// and AssumeRoleWithWebIdentity (unsigned: the token is the proof), as form POSTs to the STS
// endpoint — AWS's regional one, or MinIO's own root. Answers are `<Credentials>` XML; errors
// are `<ErrorResponse><Error>` with a code.
import type { Clock } from "../../../src/base/clock.ts";
import { type Credentials, sha256Hex, signRequest } from "../../s3/sigv4.ts";
import { childText, parseXml, rootElement, type XmlNode } from "../../_xml.ts";
import { callEndpoint, type EndpointContext, refusalKind } from "../../credentials/endpoint.ts";
import { CredentialError, type Expiring } from "../../credentials/types.ts";

/** STS's API version. */
const VERSION = "2011-06-15";

/** Where STS is and how to reach it. */
export interface StsContext extends EndpointContext {
  /** `https://sts.{region}.amazonaws.com`, or MinIO's endpoint. */
  endpoint: string;
  region: string;
  clock: Clock;
}

/** The STS endpoint for a region: AWS's regional one. */
export function awsStsEndpoint(region: string): string {
  return `https://sts.${region}.amazonaws.com`;
}

/** What AssumeRole and AssumeRoleWithWebIdentity share. */
export interface RoleRequest {
  roleArn: string;
  sessionName: string;
  /** Seconds, 900 and up (STS's minimum). */
  durationSeconds: number;
}

function form(params: Record<string, string | undefined>): string {
  return Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== "")
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v!)}`)
    .join("&");
}

/**
 * STS AssumeRole, signed with `base`.
 * @throws {CredentialError} naming `ctx.source`: `Auth` when STS refuses
 */
export async function assumeRole(
  ctx: StsContext,
  base: Credentials,
  request: RoleRequest & { externalId?: string },
): Promise<Expiring<Credentials>> {
  const body = form({
    Action: "AssumeRole",
    Version: VERSION,
    RoleArn: request.roleArn,
    RoleSessionName: request.sessionName,
    DurationSeconds: String(request.durationSeconds),
    ExternalId: request.externalId,
  });
  const url = new URL(ctx.endpoint);
  const signed = await signRequest({
    method: "POST",
    protocol: url.protocol,
    host: url.host,
    path: url.pathname === "" ? "/" : url.pathname,
    headers: { "content-type": "application/x-www-form-urlencoded; charset=utf-8" },
    credentials: base,
    region: ctx.region,
    service: "sts",
    now: new Date(ctx.clock.now()),
    payloadHash: await sha256Hex(body),
  });
  const answer = await callEndpoint(ctx, {
    method: "POST",
    url: signed.url,
    headers: signed.headers,
    body,
  });
  return readCredentials(ctx, "AssumeRole", answer.status, answer.text);
}

/**
 * STS AssumeRoleWithWebIdentity: unsigned, the token is the proof.
 * @throws {CredentialError} naming `ctx.source`: `Auth` when STS refuses the token
 */
export async function assumeRoleWithWebIdentity(
  ctx: StsContext,
  request: RoleRequest & { token: string },
): Promise<Expiring<Credentials>> {
  const body = form({
    Action: "AssumeRoleWithWebIdentity",
    Version: VERSION,
    RoleArn: request.roleArn,
    RoleSessionName: request.sessionName,
    DurationSeconds: String(request.durationSeconds),
    WebIdentityToken: request.token,
  });
  const answer = await callEndpoint(ctx, {
    method: "POST",
    url: ctx.endpoint,
    headers: { "content-type": "application/x-www-form-urlencoded; charset=utf-8" },
    body,
  });
  return readCredentials(ctx, "AssumeRoleWithWebIdentity", answer.status, answer.text);
}

/**
 * Reads an STS answer: the `<Credentials>` of `{action}Response/{action}Result`, or the code
 * and message of an error.
 * @throws {CredentialError} for an error answer (`Auth`, or `Throttled`/`Transport` by status)
 *   or an answer without credentials (`Malformed`)
 */
export function readCredentials(
  ctx: Pick<EndpointContext, "source" | "redact">,
  action: string,
  status: number,
  text: string,
): Expiring<Credentials> {
  let doc: XmlNode | undefined;
  try {
    doc = parseXml(text);
  } catch {
    doc = undefined;
  }
  const scrubbed = () => ctx.redact(text).replace(/\s+/g, " ").trim().slice(0, 200);
  if (status < 200 || status >= 300) {
    const error = doc && (rootElement(doc, "ErrorResponse") ?? doc)["Error"];
    const node = error && typeof error === "object" && !Array.isArray(error)
      ? error as XmlNode
      : undefined;
    const code = node ? childText(node, "Code")?.trim() || `Http${status}` : `Http${status}`;
    const message = node ? childText(node, "Message")?.trim() ?? "" : scrubbed();
    const throttled = code === "Throttling" || code === "ThrottlingException";
    throw new CredentialError(
      throttled ? "Throttled" : refusalKind(status),
      ctx.source,
      ctx.redact(`STS ${action} refused: ${status} ${code}${message ? `: ${message}` : ""}`),
      { status, code },
    );
  }
  const result = doc && rootElement(doc, `${action}Response`);
  const inner = result && result[`${action}Result`];
  const creds = inner && typeof inner === "object" && !Array.isArray(inner)
    ? (inner as XmlNode)["Credentials"]
    : undefined;
  const node = creds && typeof creds === "object" && !Array.isArray(creds)
    ? creds as XmlNode
    : undefined;
  const id = node && childText(node, "AccessKeyId")?.trim();
  const secret = node && childText(node, "SecretAccessKey")?.trim();
  const token = node && childText(node, "SessionToken")?.trim();
  const expiration = node && childText(node, "Expiration")?.trim();
  const expiresAt = expiration ? Date.parse(expiration) : NaN;
  if (!id || !secret || !token || !Number.isFinite(expiresAt)) {
    // Never quoted: a half-complete answer may still hold a secret.
    const missing = !node ? "<Credentials>" : [
      ["AccessKeyId", id],
      ["SecretAccessKey", secret],
      ["SessionToken", token],
      ["Expiration", Number.isFinite(expiresAt) ? "ok" : ""],
    ].filter(([, v]) => !v).map(([n]) => `<${n}>`).join(", ");
    throw new CredentialError(
      "Malformed",
      ctx.source,
      `STS ${action} answered ${status} without ${missing}`,
      { status, code: "Malformed" },
    );
  }
  return { value: { accessKeyId: id, secretAccessKey: secret, sessionToken: token }, expiresAt };
}
