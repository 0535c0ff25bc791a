// The boot probe (`tierd probe`, readiness): one one-key LIST, and on failure a one-line reason
// that names what is wrong — the endpoint, the credentials, the bucket or the region. Works on
// any ObjectStore; S3 answers are refined by their error code. With `writes`, it then does on a
// probe key what the agent will do — put, conditional create, head, ranged get, a one-part
// multipart upload, delete — and names the first step the store refuses, with the setting that
// fixes it; a store that ignores the conditional create is a warning.
import { errorText } from "./http.ts";
import { CredentialError, type CredentialReport } from "./credentials/types.ts";
import { isRetryable, type ObjectStore, StoreError } from "./types.ts";
import { S3ErrorInfo } from "./s3/responses.ts";
import { S3Store } from "./s3/store.ts";

/**
 * The outcome of {@link probeStore}; a failure says at which stage: `list` (the store cannot be
 * reached or read: nothing works) or `writes` (reads work, copies will not).
 */
export type ProbeResult =
  | { ok: true; warnings?: string[] }
  | {
    ok: false;
    reason: string;
    stage: "list" | "writes";
    /** The store did not answer or was unavailable (an outage, not a setting to fix). */
    retryable: boolean;
  };

/** A step of the write check failed. */
class WriteStepError extends Error {
  override readonly name = "WriteStepError";
  constructor(readonly step: string, readonly fix: string, options: ErrorOptions) {
    super(step, options);
  }
}

/**
 * Where a probe's objects go: `{prefix}/.tierd-probe/{space}/`, beside (never inside) any
 * cluster's key space; `space` is one agent's, so that what a probe cut off by a crash left
 * there is the next probe's to remove.
 */
export function probeDir(prefix: string, space: string): string {
  const root = prefix.replace(/\/+$/, "");
  return `${root === "" ? "" : `${root}/`}.tierd-probe/${space}/`;
}

/** Removes what an earlier probe in `dir` left (objects, unfinished multipart uploads). */
async function clearProbeDir(store: ObjectStore, dir: string, signal?: AbortSignal) {
  const page = await store.list(dir, { maxKeys: 1000, signal });
  const keys = page.objects.map((o) => o.key).filter((k) => k.startsWith(dir));
  if (keys.length > 0) await store.deleteMany(keys, { signal });
  for (const upload of await store.listMultipartUploads(dir, { signal })) {
    if (upload.key.startsWith(dir)) {
      await store.abortMultipart(upload.key, upload.uploadId, { signal });
    }
  }
}

/**
 * Does on a probe key what the agent does, step by step.
 * @returns warnings (a step the store does not honour but that tierd survives)
 * @throws {WriteStepError} naming the first step refused
 */
async function checkWrites(
  store: ObjectStore,
  dir: string,
  signal: AbortSignal | undefined,
): Promise<string[]> {
  const s3 = store instanceof S3Store;
  const key = `${dir}write-${crypto.randomUUID()}`;
  const partsKey = `${key}-multipart`;
  const bytes = crypto.getRandomValues(new Uint8Array(1024));
  const warnings: string[] = [];
  const writable = s3
    ? "the credentials' write permission (s3:PutObject), tiered_storage.s3.checksum, " +
      "storage_class and sse"
    : "the credentials' write permission";
  let uploadId: string | undefined;
  try {
    await step("put", writable, () => store.put(key, bytes, { ifAbsent: true, signal }));
    const again = await step(
      "conditional create",
      writable,
      () => store.put(key, bytes, { ifAbsent: true, signal }),
    );
    if (again.status !== "AlreadyExists") {
      warnings.push(
        "the store ignores If-None-Match on a create: tierd cannot tell a copy it did not " +
          "make from one it made; it still proves every copy's bytes before trusting it",
      );
    }
    const head = await step(
      "head",
      "the credentials' read permission",
      () => store.head(key, { signal }),
    );
    if (head.size !== bytes.length) {
      throw new WriteStepError("head", "nothing: the store answers a wrong size", {
        cause: new Error(`HEAD says ${head.size} bytes, ${bytes.length} were put`),
      });
    }
    const got = await step(
      "ranged get",
      "the credentials' read permission",
      () => store.get(key, { range: { start: 100, length: 200 }, signal }),
    );
    if (got.bytes.length !== 200 || got.bytes.some((b, i) => b !== bytes[100 + i])) {
      throw new WriteStepError("ranged get", "nothing: the store answers other bytes", {
        cause: new Error(`bytes 100-299 came back as ${got.bytes.length} other bytes`),
      });
    }
    const multipart = s3
      ? "the credentials' multipart permissions, tiered_storage.s3.checksum"
      : "the credentials' write permission";
    await step("multipart upload", multipart, async () => {
      uploadId = await store.createMultipart(partsKey, { signal });
      const part = await store.putPart(partsKey, uploadId, 1, bytes, { signal });
      await store.completeMultipart(partsKey, uploadId, [part], { ifAbsent: true, signal });
      uploadId = undefined;
      const whole = await store.head(partsKey, { signal });
      if (whole.size !== bytes.length) {
        throw new Error(`the completed upload is ${whole.size} bytes, ${bytes.length} were sent`);
      }
    });
    const deletable = s3 ? "the credentials' delete permission (s3:DeleteObject)" : "the " +
      "credentials' delete permission";
    await step("delete", deletable, async () => {
      const failures = await store.deleteMany([key, partsKey], { signal });
      if (failures.length > 0) throw failures[0].error;
    });
    return warnings;
  } finally {
    if (uploadId) await store.abortMultipart(partsKey, uploadId, { signal }).catch(() => {});
    await store.deleteMany([key, partsKey], { signal }).catch(() => {});
  }
}

/**
 * Lists at most one key under `prefix` and explains a failure in one line.
 * @param store any object store (an {@link S3Store} may switch address style on the way)
 * @param prefix the key prefix tierd will write under
 * @returns `{ ok: true }`, or `{ ok: false, reason }` naming the setting to fix
 */
export async function probeStore(
  store: ObjectStore,
  prefix: string,
  options: { signal?: AbortSignal; writes?: boolean; space?: string } = {},
): Promise<ProbeResult> {
  const signal = options.signal;
  try {
    if (store instanceof S3Store) await store.probe(prefix, options);
    else await store.list(prefix, { maxKeys: 1, signal });
  } catch (err) {
    if (signal?.aborted) throw err;
    return {
      ok: false,
      reason: probeReason(store, err),
      stage: "list",
      retryable: isRetryable(err),
    };
  }
  // The fs store's writes are the local disk's (and would create a mistyped root).
  if (!options.writes || store.kind === "fs") return { ok: true };
  const dir = probeDir(prefix, options.space ?? "probe");
  try {
    await step(
      "clearing an earlier probe's objects",
      "the credentials' delete permission",
      () => clearProbeDir(store, dir, signal),
    );
    if (store instanceof S3Store && store.settlesChecksum) {
      // `checksum = "auto"`: settled here, where a refusal is named.
      await step(
        'settling the checksum (checksum = "auto")',
        CHECKSUM_FIX,
        () => store.settleChecksum(dir, { signal }),
      );
    }
    const warnings = await checkWrites(store, dir, signal);
    return warnings.length > 0 ? { ok: true, warnings } : { ok: true };
  } catch (err) {
    if (signal?.aborted) throw err instanceof WriteStepError ? err.cause : err;
    const step = err instanceof WriteStepError ? err : undefined;
    return {
      ok: false,
      stage: "writes",
      retryable: isRetryable(step ? step.cause : err),
      reason: step
        ? `${step.step} on a probe key failed: ${probeReason(store, step.cause)}; check ${step.fix}`
        : probeReason(store, err),
    };
  }
}

const CHECKSUM_FIX = "the credentials' write permission (s3:PutObject), tiered_storage.s3." +
  "storage_class, sse and sse_kms_key_id";

/**
 * Runs one named step of the write check: what it throws becomes the step's failure (an abort
 * too, which `probeStore` rethrows as itself).
 */
async function step<T>(name: string, fix: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof WriteStepError) throw err;
    throw new WriteStepError(name, fix, { cause: err });
  }
}

/** The one-line reason for a failed probe. */
export function probeReason(store: ObjectStore, err: unknown): string {
  const target = store instanceof S3Store
    ? `${store.kind} ${store.endpoint} bucket '${store.bucket}'`
    : `${store.kind} store`;
  if (err instanceof CredentialError) return `credentials unavailable: ${err.message}`;
  if (!(err instanceof StoreError)) return `${target}: unexpected failure: ${errorText(err)}`;
  if (store instanceof S3Store) {
    const s3 = s3Reason(store, err);
    if (s3) return s3;
  }
  switch (err.kind) {
    case "Transport":
      return `endpoint unreachable: ${target}: ${connectionProblem(err)}`;
    case "Auth":
      return `credentials rejected by ${target}: ${err.message}`;
    case "NotFound":
      return `bucket or root not found: ${target}: ${err.message}`;
    case "Throttled":
      return `${target} is throttling requests; try again: ${err.message}`;
    default:
      return `${target}: ${err.kind}: ${err.message}`;
  }
}

function connectionProblem(err: StoreError): string {
  const text = errorText(err);
  if (
    /dns error|failed to lookup|name or service not known|nodename nor servname|ENOTFOUND|getaddrinfo/i
      .test(text)
  ) {
    return "the host name does not resolve (DNS)";
  }
  if (/connection refused|ECONNREFUSED|os error 111/i.test(text)) {
    return "connection refused (nothing listening at that address and port)";
  }
  if (/timed out|timeout/i.test(text)) return "no answer in time (timed out)";
  if (/certificate|tls|ssl/i.test(text)) return `TLS failed: ${err.message}`;
  return err.message;
}

function s3Reason(store: S3Store, err: StoreError): string | undefined {
  const code = err.detail.code ?? "";
  const info = err.cause instanceof S3ErrorInfo ? err.cause : undefined;
  const where = `${store.endpoint} bucket '${store.bucket}'`;
  switch (code) {
    case "InvalidAccessKeyId":
      return `credentials: the access key id is not known to ${store.endpoint} (InvalidAccessKeyId)`;
    case "SignatureDoesNotMatch":
      return `credentials: the secret key does not match the access key id at ${store.endpoint} (SignatureDoesNotMatch)`;
    case "ExpiredToken":
    case "InvalidToken":
    case "TokenRefreshRequired":
      return `credentials: the session token was refused by ${store.endpoint} (${code})`;
    case "AccessDenied":
      return `credentials: access denied to ${where}; check the key's permissions (AccessDenied)`;
    case "RequestTimeTooSkewed":
      return `clock: this host's clock is too far from ${store.endpoint}'s, even after one correction (RequestTimeTooSkewed)`;
    case "NoSuchBucket":
      return `bucket: '${store.bucket}' does not exist at ${store.endpoint} (NoSuchBucket)`;
    case "AuthorizationHeaderMalformed":
    case "PermanentRedirect":
    case "IllegalLocationConstraintException":
    case "InvalidRegion": {
      const expected = info?.region && info.region !== store.region
        ? `; the bucket is in '${info.region}'`
        : "";
      return `region: '${store.region}' is wrong for ${where}${expected} (${code})`;
    }
    case "InvalidStorageClass":
      return `storage class: ${where} does not take this storage class; set ` +
        `tiered_storage.s3.storage_class to one it supports, or "" (${code})`;
  }
  // AWS KMS.NotFoundException, KMS.DisabledException…; MinIO kms:KeyNotFound.
  if (/^kms[.:]/i.test(code) || /KMS/.test(code)) {
    return `encryption key: ${where} cannot encrypt with the KMS key asked for; check ` +
      `tiered_storage.s3.sse_kms_key_id and the key's policy (${code}: ${err.message})`;
  }
  if (err.kind === "Transport" && err.detail.status === undefined) {
    return `endpoint unreachable: ${store.endpoint}: ${connectionProblem(err)}`;
  }
  return undefined;
}

/**
 * The credential chain's report as lines for `tierd probe`: which source answered (and when its
 * credential expires), then every source looked at, with why it was skipped or failed.
 * @param nowMs the wall clock, for "expires in"
 */
export function describeCredentials(report: CredentialReport, nowMs: number): string[] {
  const expires = report.expiresAt === undefined
    ? ""
    : `, expires in ${Math.max(0, Math.round((report.expiresAt - nowMs) / 1000))} s`;
  const lines = [
    report.source ? `credentials: ${report.source}${expires}` : "credentials: no source answered",
  ];
  for (const step of report.steps) {
    lines.push(`  ${step.outcome} ${step.source}${step.reason ? `: ${step.reason}` : ""}`);
  }
  return lines;
}
