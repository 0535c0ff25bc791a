// The S3 object store (AWS, MinIO, Ceph RGW, R2): builds each request (requests.ts), signs it
// (sigv4.ts), sends it through the shared transport (../http.ts) and reads the answer
// (responses.ts). The only state is the signing-key cache, the learned clock offset and the
// address style; credentials come from a supplier (../credentials/) that keeps them fresh, and a
// 401/403 gets one out-of-band refresh and one retry.
import {
  bareEtag,
  checkMetadata,
  checkPartNumber,
  checkPutConditions,
  requireParts,
} from "../_rules.ts";
import { checkRange, rangedBody } from "../_ranges.ts";
import { listingFrom } from "../_errors.ts";
import { PageGuard } from "../listing.ts";
import { type FetchFn, type HttpResponse, isOk, sendHttp } from "../http.ts";
import { xmlRepresentable } from "../_xml.ts";
import { scrubBody, secretRedactor } from "../_redact.ts";
import type { CredentialSupplier } from "../credentials/types.ts";
import { StaticSupplier } from "../credentials/chain.ts";
import { type Clock, sleep, systemClock } from "../../src/base/clock.ts";
import { backoffDelay } from "../retry.ts";
import {
  type CompletedPart,
  type CompleteOptions,
  type DeleteFailure,
  type GetOptions,
  type GetResult,
  type HeadOptions,
  type ListOptions,
  type ListPage,
  type MultipartUpload,
  type ObjectHead,
  type ObjectStore,
  type PartOptions,
  type PutOptions,
  type PutResult,
  StoreError,
  type UserMetadata,
} from "../types.ts";
import * as req from "./requests.ts";
import {
  parseCompleteMultipart,
  parseDeleteResult,
  parseErrorInfo,
  parseHead,
  parseInitiateMultipart,
  parseListMultipartUploads,
  parseListObjectsV2,
  replaceRefusal,
  s3Error,
  type S3ErrorInfo,
} from "./responses.ts";
import {
  type Credentials,
  presignGetUrl,
  type SigningKeyEntry,
  signRequest,
  unsignedRequest,
} from "./sigv4.ts";
import { bodyChecksum, checksumOf } from "../checksum.ts";
import {
  type ChecksumReport,
  isAmzChecksum,
  negotiateChecksumWay,
  type S3ChecksumMode,
  type S3ChecksumWay,
  wayOf,
} from "./checksum_way.ts";

/** Configuration of an {@link S3Store}. */
export interface S3StoreOptions {
  /** The S3 endpoint. @default `https://s3.{region}.amazonaws.com` */
  endpoint?: string;
  region: string;
  bucket: string;
  /**
   * Fixed keys, a supplier that keeps temporary ones fresh, or `"none"`: unsigned requests (no
   * Authorization header at all).
   */
  credentials: Credentials | CredentialSupplier<Credentials> | "none";
  /** `auto`: virtual-host style on AWS hosts, path style elsewhere. @default "auto" */
  urlStyle?: "auto" | "path" | "virtual";
  /** The fetch to send with (tests inject faults here). @default globalThis.fetch */
  fetch?: FetchFn;
  /** The clock requests are signed with, and conflict retries wait on. @default systemClock */
  clock?: Clock;
  /** Per-request timeout, headers and body. @default 60000 */
  requestTimeoutMs?: number;
  /**
   * How `completeMultipart({ ifAbsent })` refuses to overwrite: `header` sends
   * `If-None-Match: *` with the completion (AWS since 2024, MinIO); `head` checks with a HEAD
   * first (racy, for stores that ignore the header). @default "header"
   */
  conditionalComplete?: "header" | "head";
  /**
   * The checksum sent with every upload, which S3 verifies on ingest and keeps: an algorithm
   * (`x-amz-checksum-{alg}`; multipart uploads declare a full-object CRC), `md5` (`Content-MD5`),
   * `none`, a way settled elsewhere, or `auto`: settled by {@link S3Store.settleChecksum} (the
   * probe calls it) or before the first request that needs it, by trying each on a probe key in
   * `probeDir` (checksum_way.ts). @default "crc64nvme"
   */
  checksum?: S3ChecksumMode | S3ChecksumWay;
  /**
   * Where `checksum = "auto"` writes its probe objects when it settles before the first request
   * that needs it (without {@link S3Store.settleChecksum}): a key prefix ending in `/`.
   * @default ".tierd-probe/"
   */
  probeDir?: string;
  /** Storage class and server-side encryption of every object written. @default the bucket's */
  write?: req.WriteSettings;
}

/** Retries of a 409 ConditionalRequestConflict (a concurrent conditional write) before giving up. */
const CONFLICT_RETRIES = 3;
/** A bodiless 403 (HEAD) is taken as clock skew when the server's Date is further off than this. */
const SKEW_SUSPECT_MS = 5 * 60_000;

/**
 * An {@link ObjectStore} over the S3 REST API, signed with SigV4, over plain `fetch`.
 * @example
 * ```ts ignore
 * const store = new S3Store({
 *   endpoint: "http://127.0.0.1:9000",
 *   region: "us-east-1",
 *   bucket: "tier",
 *   credentials: { accessKeyId, secretAccessKey },
 *   urlStyle: "path",
 * });
 * await store.put("a/b.log", bytes, { ifAbsent: true });
 * ```
 */
export class S3Store implements ObjectStore {
  readonly kind = "s3";
  /** The endpoint URL requests go to (without the bucket). */
  readonly endpoint: string;
  readonly region: string;
  readonly bucket: string;
  readonly #credentials: CredentialSupplier<Credentials> | undefined;
  readonly #urlStyle: "auto" | "path" | "virtual";
  readonly #fetch: FetchFn;
  readonly #clock: Clock;
  readonly #timeoutMs: number | undefined;
  readonly #conditionalComplete: "header" | "head";
  readonly #options: S3StoreOptions;
  #checksumWay: S3ChecksumWay | undefined;
  #settling: Promise<S3ChecksumWay> | undefined;
  #checksumReport: ChecksumReport | undefined;
  readonly #keys = new Map<string, SigningKeyEntry>();
  #location: req.S3Location;
  #clockOffsetMs = 0;
  /** The server said `Server: MinIO`; some of its S3 answers differ from AWS's. */
  #minio = false;

  constructor(options: S3StoreOptions) {
    this.endpoint = options.endpoint || `https://s3.${options.region}.amazonaws.com`;
    this.region = options.region;
    this.bucket = options.bucket;
    this.#credentials = supplierOf(options.credentials);
    this.#urlStyle = options.urlStyle ?? "auto";
    this.#location = req.resolveLocation({ ...options, urlStyle: this.#urlStyle });
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#clock = options.clock ?? systemClock;
    this.#timeoutMs = options.requestTimeoutMs;
    this.#conditionalComplete = options.conditionalComplete ?? "header";
    this.#options = options;
    const checksum = options.checksum ?? "crc64nvme";
    this.#checksumWay = typeof checksum === "object"
      ? checksum
      : checksum === "auto"
      ? undefined
      : wayOf(checksum);
  }

  /** The configured write settings, with `storageClass` in place of the configured class. */
  #writeFor(storageClass: string | undefined): req.WriteSettings | undefined {
    if (!storageClass) return this.#options.write;
    return { ...this.#options.write, storageClass };
  }

  /** What `checksum = "auto"` settled on and why, once it has; undefined otherwise. */
  get checksumReport(): ChecksumReport | undefined {
    return this.#checksumReport;
  }

  /** How checksums are sent, settling `auto` first (once) when it has not been. */
  async #way(signal?: AbortSignal): Promise<S3ChecksumWay> {
    if (this.#checksumWay) return this.#checksumWay;
    this.#settling ??= this.#settle(this.#options.probeDir ?? ".tierd-probe/", signal).finally(
      () => {
        this.#settling = undefined;
      },
    );
    return await this.#settling;
  }

  /** True while `checksum = "auto"` has not been settled. */
  get settlesChecksum(): boolean {
    return this.#checksumWay === undefined;
  }

  /**
   * Settles `checksum = "auto"` now (the probe does, where a failure is named), with probe objects
   * in `dir` (a key prefix ending in `/`). A no-op once settled or when a checksum was set.
   * @throws {StoreError} when even a put without any checksum fails
   */
  async settleChecksum(dir: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    if (this.#checksumWay) return;
    await this.#settle(dir, options.signal);
  }

  async #settle(dir: string, signal?: AbortSignal): Promise<S3ChecksumWay> {
    const report = await negotiateChecksumWay(
      (way) =>
        new S3Store({
          ...this.#options,
          urlStyle: this.#location.style,
          checksum: way,
        }),
      dir,
      { signal },
    );
    this.#checksumReport = report;
    this.#checksumWay = report.way;
    return report.way;
  }

  /** The address style in use (`auto` resolves to one; the boot probe may switch it). */
  get addressStyle(): req.AddressStyle {
    return this.#location.style;
  }

  /** The clock correction learned from a `RequestTimeTooSkewed` answer, in ms. */
  get clockOffsetMs(): number {
    return this.#clockOffsetMs;
  }

  /** Never shows credentials (Deno.inspect / console.log). */
  [Symbol.for("Deno.customInspect")](): string {
    return this.#describe();
  }

  /** Never shows credentials (Node / Bun inspect). */
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.#describe();
  }

  #describe(): string {
    return `S3Store { bucket: ${this.bucket}, region: ${this.region}, style: ${this.addressStyle}, credentials: ${this.credentials} }`;
  }

  /** Where the credentials come from (the source in use, `none`); never a secret. */
  get credentials(): string {
    return this.#credentials?.describe ?? "none";
  }

  /** The credential supplier, for `tierd probe`'s report; undefined for unsigned requests. */
  get credentialSupplier(): CredentialSupplier<Credentials> | undefined {
    return this.#credentials;
  }

  toJSON(): Record<string, string> {
    return { kind: this.kind, bucket: this.bucket, region: this.region, style: this.addressStyle };
  }

  /**
   * PutObject. `ifAbsent` sends `If-None-Match: *`; `ifMatch` sends `If-Match` with the ETag, and
   * a 412 or a 404 NoSuchKey is `PreconditionFailed`. A 409 ConditionalRequestConflict (another
   * conditional write in flight) is retried a few times here, then `Transport`.
   */
  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutResult> {
    req.checkKey(key, "put");
    checkPutConditions(options, key);
    checkMetadata(options.metadata, "put", key);
    const way = await this.#way(options.signal);
    const checksum = way.body === "none"
      ? undefined
      : await bodyChecksum(way.body, body, options.checksums);
    const response = await this.#exchange(
      "put",
      key,
      req.putObject(this.#location, key, body, {
        ...options,
        checksum,
        write: this.#writeFor(options.storageClass),
      }),
      {
        signal: options.signal,
        accept: (status) => isOk(status) || (options.ifAbsent === true && status === 412),
        refusal: options.ifMatch === undefined
          ? undefined
          : (info) => replaceRefusal(info, key, { redact: this.#redact }),
      },
    );
    if (response.status === 412) return { status: "AlreadyExists" };
    return created(response);
  }

  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    req.checkKey(key, "get");
    const range = options.range;
    if (range) checkRange(range, key);
    const response = await this.#exchange("get", key, req.getObject(this.#location, key, range), {
      signal: options.signal,
    });
    const { bytes, size } = rangedBody(response, range, key, {
      malformed: (why) =>
        new StoreError("Malformed", `get ${key}: ${why}`, { op: "get", key, status: 206 }),
      // S3 refuses a range starting at or past the end with 416; its 206 is taken as is.
      trustPartial: true,
    });
    const etag = response.headers.get("etag");
    return etag ? { bytes, size, etag: bareEtag(etag), version: bareEtag(etag) } : { bytes, size };
  }

  async head(key: string, options: HeadOptions = {}): Promise<ObjectHead> {
    req.checkKey(key, "head");
    const ask = options.checksums === true && (await this.#way(options.signal)).headMode;
    const request = req.headObject(this.#location, key, { checksums: ask });
    const response = await this.#exchange("head", key, request, { signal: options.signal });
    return this.#parse(() => parseHead(key, response.headers));
  }

  async deleteMany(
    keys: string[],
    options: { signal?: AbortSignal } = {},
  ): Promise<DeleteFailure[]> {
    const failures: DeleteFailure[] = [];
    const batchable: string[] = [];
    const single: string[] = [];
    for (const key of new Set(keys)) {
      try {
        req.checkKey(key, "deleteMany");
      } catch (err) {
        failures.push({ key, error: err as StoreError });
        continue;
      }
      // XML 1.0 cannot carry some characters at all; such keys go one DELETE each.
      (xmlRepresentable(key) ? batchable : single).push(key);
    }
    for (let i = 0; i < batchable.length; i += req.DELETE_BATCH_MAX) {
      const batch = batchable.slice(i, i + req.DELETE_BATCH_MAX);
      const body = req.deleteObjectsBody(batch);
      const request = req.deleteObjects(
        this.#location,
        body,
        (await checksumOf("md5", body)).value,
      );
      const response = await this.#exchange("deleteMany", undefined, request, {
        signal: options.signal,
      });
      const result = this.#parse(() => parseDeleteResult(response.body));
      for (const failure of result) {
        failures.push({ key: failure.key, error: this.#redactError(failure.error) });
      }
    }
    for (const key of single) {
      await this.#exchange("deleteMany", key, req.deleteObject(this.#location, key), {
        signal: options.signal,
        accept: (status) => isOk(status) || status === 404,
      });
    }
    return failures;
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    const request = req.listObjectsV2(this.#location, prefix, options);
    // S3 answers a token it did not hand out with 400 InvalidArgument.
    return await listingFrom(options.continuationToken, async () => {
      const response = await this.#exchange("list", undefined, request, { signal: options.signal });
      return this.#parse(() => parseListObjectsV2(response.body));
    }, { refusalCode: "InvalidArgument" });
  }

  async createMultipart(
    key: string,
    options: {
      metadata?: UserMetadata;
      contentType?: string;
      storageClass?: string;
      signal?: AbortSignal;
    } = {},
  ): Promise<string> {
    req.checkKey(key, "createMultipart");
    checkMetadata(options.metadata, "createMultipart", key);
    const { multipart } = await this.#way(options.signal);
    const request = req.createMultipartUpload(this.#location, key, {
      ...options,
      checksumAlgorithm: isAmzChecksum(multipart) ? multipart : undefined,
      write: this.#writeFor(options.storageClass),
    });
    const response = await this.#exchange("createMultipart", key, request, {
      signal: options.signal,
    });
    return this.#parse(() => parseInitiateMultipart(response.body, key));
  }

  async putPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Uint8Array,
    options: PartOptions = {},
  ): Promise<CompletedPart> {
    req.checkKey(key, "putPart");
    checkPartNumber(partNumber, "putPart", key);
    const { multipart } = await this.#way(options.signal);
    const checksum = multipart === "none"
      ? undefined
      : await bodyChecksum(multipart, body, options.checksums);
    const request = req.uploadPart(this.#location, key, uploadId, partNumber, body, checksum);
    const response = await this.#exchange("putPart", key, request, { signal: options.signal });
    const etag = response.headers.get("etag");
    if (!etag) {
      throw new StoreError(
        "Malformed",
        `putPart ${key}: part ${partNumber} answered without an ETag`,
        {
          op: "putPart",
          key,
          status: response.status,
        },
      );
    }
    const part: CompletedPart = { partNumber, etag: bareEtag(etag) };
    // The completion names each part's x-amz checksum again; a Content-MD5 is the part's alone.
    if (checksum && isAmzChecksum(checksum.algorithm)) part.checksum = checksum.value;
    return part;
  }

  async completeMultipart(
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    options: CompleteOptions = {},
  ): Promise<PutResult> {
    const op = "completeMultipart";
    req.checkKey(key, op);
    requireParts(key, parts);
    const ifAbsent = options.ifAbsent === true;
    if (ifAbsent && this.#conditionalComplete === "head") {
      // Racy fallback for stores that ignore If-None-Match on completion: look first.
      const exists = await this.head(key, options).then(() => true, (err) => {
        if (err instanceof StoreError && err.kind === "NotFound") return false;
        throw err;
      });
      if (exists) return { status: "AlreadyExists" };
    }
    const { multipart } = await this.#way(options.signal);
    const request = req.completeMultipartUpload(this.#location, key, uploadId, parts, {
      ifAbsent: ifAbsent && this.#conditionalComplete === "header",
      algorithm: isAmzChecksum(multipart) ? multipart : undefined,
    });
    const response = await this.#exchange(op, key, request, {
      signal: options.signal,
      accept: (status) => isOk(status) || (ifAbsent && status === 412),
    });
    // Like S3 itself (and the sim), a refused completion leaves the upload for the caller to
    // retry or abort.
    if (response.status === 412) return { status: "AlreadyExists" };
    const etag = this.#parse(() => parseCompleteMultipart(response.body, key)) ??
      response.headers.get("etag");
    return etag
      ? { status: "Created", etag: bareEtag(etag), version: bareEtag(etag) }
      : { status: "Created" };
  }

  async abortMultipart(
    key: string,
    uploadId: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    req.checkKey(key, "abortMultipart");
    await this.#exchange(
      "abortMultipart",
      key,
      req.abortMultipartUpload(this.#location, key, uploadId),
      { signal: options.signal, accept: (status) => isOk(status) || status === 404 },
    );
  }

  async listMultipartUploads(
    prefix: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<MultipartUpload[]> {
    // MinIO treats `prefix` as one exact key (minio/minio#20989, "working as intended") but
    // lists every upload of the bucket without one: there, list them all and filter here.
    const clientSide = () => this.#minio && prefix !== "";
    const filtered = clientSide();
    const uploads: MultipartUpload[] = [];
    const listed = filtered ? "" : prefix;
    // Uploads come by key, then by initiation on AWS, by initiation alone from MinIO's cache:
    // the markers show the listing advancing, not the order of the uploads.
    const guard = new PageGuard("listMultipartUploads", listed, {
      describe: this.#where(),
      clock: this.#clock,
      order: "markers",
    });
    let markers: { keyMarker?: string; uploadIdMarker?: string } = {};
    for (;;) {
      const request = req.listMultipartUploads(this.#location, listed, markers);
      const response = await guard.request(
        (signal) => this.#exchange("listMultipartUploads", undefined, request, { signal }),
        options.signal,
      );
      if (!filtered && clientSide()) return this.listMultipartUploads(prefix, options);
      const page = this.#parse(() => parseListMultipartUploads(response.body));
      guard.check(
        page.uploads.map((u) => u.key),
        page.next && { key: page.next.keyMarker, id: page.next.uploadIdMarker },
      );
      uploads.push(
        ...(filtered ? page.uploads.filter((u) => u.key.startsWith(prefix)) : page.uploads),
      );
      if (!page.next) return uploads;
      markers = page.next;
    }
  }

  /** The store in a listing's errors, as the boot names it. */
  #where(): string {
    return `s3 ${this.endpoint} bucket '${this.bucket}'`;
  }

  close(): Promise<void> {
    this.#keys.clear();
    this.#credentials?.close();
    return Promise.resolve();
  }

  /**
   * The boot probe's request: a one-key LIST under `prefix`. With `urlStyle: "auto"` and
   * virtual-host addressing, a connection failure (a bucket host name that does not resolve)
   * is retried once in path style, which is kept if it works.
   * @throws {StoreError} what the LIST threw
   */
  async probe(prefix: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    try {
      await this.list(prefix, { maxKeys: 1, signal: options.signal });
    } catch (err) {
      const virtual = this.#location;
      if (
        this.#urlStyle !== "auto" || virtual.style !== "virtual" ||
        !(err instanceof StoreError) || err.kind !== "Transport"
      ) throw err;
      this.#location = { ...virtual, style: "path" };
      try {
        await this.list(prefix, { maxKeys: 1, signal: options.signal });
      } catch {
        this.#location = virtual;
        throw err;
      }
    }
  }

  /**
   * Creates the bucket (tests and first-time setup). An existing bucket of ours is fine.
   * @throws {StoreError} on any other failure
   */
  async createBucket(options: { signal?: AbortSignal } = {}): Promise<void> {
    const response = await this.#exchange(
      "createBucket",
      undefined,
      req.createBucket(this.#location, this.region),
      { signal: options.signal, accept: (status) => isOk(status) || status === 409 },
    );
    if (response.status === 409) {
      const info = parseErrorInfo(409, response.headers, response.body);
      if (info.code !== "BucketAlreadyOwnedByYou") {
        throw s3Error(info, "createBucket", this.bucket, this.#redact);
      }
    }
  }

  /** A presigned GET URL for `key`, valid for `expiresSeconds` (1 s to 7 days). */
  async presignGet(key: string, expiresSeconds: number): Promise<string> {
    req.checkKey(key, "presignGet");
    const request = req.getObject(this.#location, key);
    if (!this.#credentials) {
      return unsignedRequest({ protocol: this.#location.protocol, ...request }).url;
    }
    return await presignGetUrl({
      protocol: this.#location.protocol,
      host: request.host,
      path: request.path,
      credentials: await this.#credentials.get(),
      region: this.region,
      now: this.#signingTime(),
      expiresSeconds,
      cache: this.#keys,
    });
  }

  /** Now, corrected by what a `RequestTimeTooSkewed` answer taught. */
  #signingTime(): Date {
    return new Date(this.#clock.now() + this.#clockOffsetMs);
  }

  /**
   * Scrubs the access key id, the secret and the session token (raw or URL-encoded) — of every
   * credential the supplier handed out — out of error text.
   */
  readonly #redact = secretRedactor(() => this.#credentials?.secrets() ?? []);

  /** Runs a response parser; its errors (which may quote the body) are scrubbed of secrets. */
  #parse<T>(parse: () => T): T {
    try {
      return parse();
    } catch (err) {
      throw err instanceof StoreError ? this.#redactError(err) : err;
    }
  }

  /** The same error with secrets scrubbed from its message and its cause dropped if it had any. */
  #redactError(err: StoreError): StoreError {
    const message = this.#redact(err.message);
    const cause = err.cause instanceof Error ? err.cause.message : "";
    const detail = { ...err.detail };
    if (detail.key !== undefined) detail.key = this.#redact(detail.key);
    if (detail.code !== undefined) detail.code = this.#redact(detail.code);
    if (
      message === err.message && this.#redact(cause) === cause &&
      detail.key === err.detail.key && detail.code === err.detail.code
    ) return err;
    return new StoreError(err.kind, message, detail);
  }

  /**
   * Signs and sends one request; answers `accept` rejects become typed errors: `refusal`'s when
   * it has one for the answer, else {@link s3Error}'s. A `RequestTimeTooSkewed` answer is met
   * with one re-sign on the server's clock, a 409 `ConditionalRequestConflict` with a few quick
   * retries.
   */
  async #exchange(
    op: string,
    key: string | undefined,
    request: req.S3Request,
    options: {
      signal?: AbortSignal;
      accept?: (status: number) => boolean;
      refusal?: (info: S3ErrorInfo) => StoreError | undefined;
    },
  ): Promise<HttpResponse> {
    const accept = options.accept ?? isOk;
    let resigned = false;
    let refreshed = false;
    let conflicts = 0;
    for (;;) {
      const credentials = await this.#credentials?.get({ signal: options.signal });
      const signed = credentials
        ? await signRequest({
          method: request.method,
          protocol: this.#location.protocol,
          host: request.host,
          path: request.path,
          query: request.query,
          headers: request.headers,
          credentials,
          region: this.region,
          now: this.#signingTime(),
          cache: this.#keys,
        })
        : unsignedRequest({ protocol: this.#location.protocol, ...request });
      const response = await sendHttp(this.#fetch, {
        method: request.method,
        url: signed.url,
        headers: signed.headers,
        body: request.body,
        signal: options.signal,
        timeoutMs: this.#timeoutMs,
      }, { op, key, redact: this.#redact, clock: this.#clock });
      if (!this.#minio && /^minio/i.test(response.headers.get("server") ?? "")) this.#minio = true;
      if (accept(response.status)) return response;

      // Scrubbed before anything quotes (and cuts) it: a proxy may echo the Authorization header.
      const info = parseErrorInfo(
        response.status,
        response.headers,
        scrubBody(response.body, this.#redact),
      );
      if (!resigned && this.#skewed(info, response.body.byteLength === 0)) {
        resigned = true;
        this.#clockOffsetMs = info.serverTime!.getTime() - this.#clock.now();
        continue;
      }
      if (info.code === "ConditionalRequestConflict" && conflicts < CONFLICT_RETRIES) {
        await sleep(
          backoffDelay(conflicts++, { baseMs: 50, maxMs: 1000 }),
          options.signal,
          this.#clock,
        );
        continue;
      }
      if ((info.status === 401 || info.status === 403) && credentials && this.#credentials) {
        // A credential revoked or ended early: one out-of-band refresh (rate-limited), one retry.
        if (!refreshed) {
          refreshed = true;
          if (await this.#credentials.refused(credentials, { signal: options.signal })) continue;
        }
        throw s3Error(info, op, key, this.#redact, ` (credentials from ${this.credentials})`);
      }
      throw options.refusal?.(info) ?? s3Error(info, op, key, this.#redact);
    }
  }

  #skewed(info: S3ErrorInfo, bodiless: boolean): boolean {
    if (!info.serverTime) return false;
    if (info.code === "RequestTimeTooSkewed") return true;
    // A HEAD answer has no body to name the code: a 403 from a server whose clock is far
    // from ours is most likely skew.
    return info.status === 403 && bodiless &&
      Math.abs(info.serverTime.getTime() - this.#signingTime().getTime()) > SKEW_SUSPECT_MS;
  }
}

/** A put's answer: the new object's ETag, which is also its version. */
function created(response: HttpResponse): PutResult {
  const etag = response.headers.get("etag");
  return etag
    ? { status: "Created", etag: bareEtag(etag), version: bareEtag(etag) }
    : { status: "Created" };
}

/** The supplier behind the `credentials` option (undefined: unsigned). */
function supplierOf(
  credentials: Credentials | CredentialSupplier<Credentials> | "none",
): CredentialSupplier<Credentials> | undefined {
  if (credentials === "none") return undefined;
  if ("get" in credentials) return credentials;
  const fixed = { ...credentials };
  return new StaticSupplier("static", fixed, [
    fixed.accessKeyId,
    fixed.secretAccessKey,
    fixed.sessionToken,
  ]);
}
