// The Azure Blob object store: builds each request (requests.ts), signs it with SharedKey
// (sharedkey.ts), appends a SAS token or sends an Entra ID bearer token (credentials/), sends it through the shared transport (../http.ts) and
// reads the answer (responses.ts). Multipart uploads are block lists; see createMultipart.
import { type Clock, systemClock } from "../../src/base/clock.ts";
import { checkMetadata, checkPutConditions } from "../_rules.ts";
import { checkRange, rangedBody } from "../_ranges.ts";
import { listingFrom, malformed } from "../_errors.ts";
import { PageGuard } from "../listing.ts";
import { type FetchFn, type HttpResponse, isOk, sendHttp } from "../http.ts";
import { deleteEach } from "../_pool.ts";
import { redactingFetch, scrubBody, secretRedactor } from "../_redact.ts";
import type { TokenSource } from "../credentials/tokens.ts";
import {
  noSuchUpload,
  StagedMultipart,
  type StagedObject,
  type StagingCalls,
  type UploadMarker,
} from "../staging.ts";
import { checkPathKey, queryString } from "../_url.ts";
import { bodyChecksum } from "../checksum.ts";
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
  type PutOptions,
  type PutResult,
  StoreError,
  type UserMetadata,
} from "../types.ts";
import * as req from "./requests.ts";
import {
  azureError,
  type AzureErrorInfo,
  listPage,
  parseErrorInfo,
  parseListBlobs,
  parseProperties,
  replaceRefusal,
} from "./responses.ts";
import { authorization, importAccountKey } from "./sharedkey.ts";

/** Configuration of an {@link AzureStore}. */
export interface AzureStoreOptions {
  /** The storage account name. */
  account: string;
  container: string;
  /**
   * The blob service endpoint. An IP or `localhost` endpoint without a path gets the account
   * as its first path segment (Azurite). @default `https://{account}.blob.core.windows.net`
   */
  endpoint?: string;
  /** The account key (base64). One of `sharedKey` and `sasToken` is needed. */
  sharedKey?: string;
  /** An account or container SAS (`sv=…&sig=…`, a leading `?` is fine); wins over `sharedKey`. */
  sasToken?: string;
  /**
   * Entra ID bearer tokens (workload identity, managed identity, client secret), used when
   * neither `sasToken` nor `sharedKey` is given. The service version tierd sends (2024-11-04)
   * accepts them (OAuth needs 2017-11-09 or later).
   */
  tokens?: TokenSource;
  /** The fetch to send with (tests inject faults here). @default globalThis.fetch */
  fetch?: FetchFn;
  /** The clock `x-ms-date` is taken from. @default systemClock */
  clock?: Clock;
  /** Per-request timeout, headers and body. @default 60000 */
  requestTimeoutMs?: number;
  /** Deletes in flight at once in `deleteMany`. @default 16 */
  deleteConcurrency?: number;
  /** Where multipart upload markers live. @default ".tierd-multipart/" */
  stagingPrefix?: string;
  /**
   * Access tier of the blobs tierd writes (markers stay in the account's default) and the
   * encryption scope of every write. @default the account's and container's
   */
  write?: req.AzureWriteSettings;
}

/** A 403 is taken as clock skew when the server's Date is further off than this. */
const SKEW_SUSPECT_MS = 5 * 60_000;

/**
 * An {@link ObjectStore} over the Azure Blob REST API, over plain `fetch`.
 *
 * Multipart uploads: `createMultipart` writes an empty marker blob
 * `{stagingPrefix}{key}/{uploadId}` holding the upload's metadata and content type (so uploads
 * can be listed by key prefix and swept); `putPart` stages a block on the target blob (Put Block,
 * block id = base64 of `{uploadId}-{part:05}`), concurrently; `completeMultipart` commits the
 * blocks in part order with Put Block List and removes the marker; `abortMultipart` removes the
 * marker only: Azure has no call to drop uncommitted blocks, it discards them at the blob's next
 * commit or after 7 days.
 * @example
 * ```ts ignore
 * const store = new AzureStore({ account: "acct", container: "tier", sharedKey: key });
 * await store.put("a/b.log", bytes, { ifAbsent: true });
 * ```
 */
export class AzureStore implements ObjectStore {
  readonly kind = "azure";
  /** A block list's MD5 comes from the caller (Put Block List keeps it, unchecked). */
  readonly completionChecksum = "md5";
  readonly account: string;
  readonly container: string;
  /** The endpoint requests go to (origin and account path, without the container). */
  readonly endpoint: string;
  readonly #location: req.AzureLocation;
  readonly #write: req.AzureWriteSettings | undefined;
  /** Markers get the encryption scope, never the tier. */
  readonly #markerWrite: req.AzureWriteSettings | undefined;
  readonly #sharedKey: string | undefined;
  readonly #sas: string | undefined;
  readonly #tokens: TokenSource | undefined;
  readonly #fetch: FetchFn;
  readonly #clock: Clock;
  readonly #timeoutMs: number | undefined;
  readonly #deleteConcurrency: number;
  readonly #multipart: StagedMultipart<UploadMarker>;
  #key: Uint8Array | undefined;
  #clockOffsetMs = 0;

  /**
   * @throws {TypeError} for a bad endpoint, a shared key that is not base64, or neither a shared
   *   key nor a SAS token
   */
  constructor(options: AzureStoreOptions) {
    this.account = options.account;
    this.container = options.container;
    this.#location = req.resolveLocation(options);
    this.#write = options.write;
    this.#markerWrite = options.write?.encryptionScope
      ? { encryptionScope: options.write.encryptionScope }
      : undefined;
    this.endpoint = this.#location.origin + this.#location.basePath;
    const sas = options.sasToken?.trim().replace(/^\?/, "");
    this.#sas = sas || undefined;
    this.#sharedKey = options.sharedKey?.trim() || undefined;
    this.#tokens = this.#sas || this.#sharedKey ? undefined : options.tokens;
    if (!this.#sas && !this.#sharedKey && !this.#tokens) {
      throw new TypeError("Azure needs a shared key, a SAS token or a bearer token source");
    }
    if (!this.#sas && this.#sharedKey) {
      const key = this.#sharedKey;
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(key) || key.length % 4 !== 0) {
        throw new TypeError("the Azure shared key is not base64");
      }
    }
    this.#fetch = redactingFetch(
      options.fetch ?? ((input, init) => fetch(input, init)),
      this.#redact,
    );
    this.#clock = options.clock ?? systemClock;
    this.#timeoutMs = options.requestTimeoutMs;
    this.#deleteConcurrency = options.deleteConcurrency ?? 16;
    this.#multipart = new StagedMultipart(options.stagingPrefix, this.#stagingCalls());
  }

  /** How requests are authorized. */
  get auth(): "shared-key" | "sas" | "bearer" {
    return this.#sas ? "sas" : this.#tokens ? "bearer" : "shared-key";
  }

  /** The bearer token source, for `tierd probe`'s report; undefined with a key or SAS. */
  get tokenSource(): TokenSource | undefined {
    return this.#tokens;
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
    return `AzureStore { endpoint: ${this.endpoint}, container: ${this.container}, auth: ${this.auth} }`;
  }

  toJSON(): Record<string, string> {
    return { kind: this.kind, endpoint: this.endpoint, container: this.container, auth: this.auth };
  }

  /** The configured write settings, with `tier` in place of the configured access tier. */
  #tiered(tier: string | undefined): req.AzureWriteSettings | undefined {
    return tier ? { ...this.#write, accessTier: tier } : this.#write;
  }

  /**
   * Put Blob. `ifAbsent` sends `If-None-Match: *`; `ifMatch`, the ETag as Azure sent it, goes as
   * `If-Match`, and a 412 ConditionNotMet or 404 BlobNotFound is `PreconditionFailed`.
   */
  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutResult> {
    checkPathKey(key, "put");
    checkPutConditions(options, key);
    checkMetadata(options.metadata, "put", key);
    const ifAbsent = options.ifAbsent === true;
    const md5 = await bodyChecksum("md5", body, options.checksums);
    const response = await this.#exchange(
      "put",
      key,
      req.putBlob(this.#location, key, body, {
        ...options,
        md5,
        write: this.#tiered(options.storageClass),
      }),
      {
        signal: options.signal,
        accept: (status) => isOk(status) || (ifAbsent && (status === 409 || status === 412)),
        refusal: options.ifMatch === undefined
          ? undefined
          : (info) => replaceRefusal(info, key, { redact: this.#redact }),
      },
    );
    if (response.status === 409 || response.status === 412) {
      return this.#conditionalRefusal(response, "put", key);
    }
    return created(response);
  }

  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    checkPathKey(key, "get");
    const range = options.range;
    if (range) checkRange(range, key);
    const response = await this.#exchange("get", key, req.getBlob(this.#location, key, range), {
      signal: options.signal,
    });
    // Azure answers a range starting at the end with 416; Azurite 3.35 with an empty 206
    // (`bytes 1000-999/1000`). rangedBody reads both as InvalidRange.
    const { bytes, size } = rangedBody(response, range, key, {
      malformed: (why) => malformed("get", key, why),
      noun: "blob",
    });
    const etag = response.headers.get("etag");
    return etag ? { bytes, size, etag: quotesOff(etag), version: etag } : { bytes, size };
  }

  /** Get Blob Properties; with `checksums`, its Content-MD5 (a block list has one if given). */
  async head(key: string, options: HeadOptions = {}): Promise<ObjectHead> {
    checkPathKey(key, "head");
    const response = await this.#exchange("head", key, req.getBlobProperties(this.#location, key), {
      signal: options.signal,
    });
    const head = parseProperties(key, response.headers);
    if (!options.checksums) delete head.checksums;
    return head;
  }

  /**
   * Deletes blobs one request each, `deleteConcurrency` at a time; a missing blob is success.
   * A key the store refuses becomes a failure entry; an auth, throttling or transport failure
   * stops the batch and is thrown (the caller retries the whole batch).
   */
  async deleteMany(
    keys: string[],
    options: { signal?: AbortSignal } = {},
  ): Promise<DeleteFailure[]> {
    return await deleteEach(keys, this.#deleteConcurrency, async (key) => {
      checkPathKey(key, "deleteMany");
      await this.#delete(key, "deleteMany", options.signal);
    });
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    const request = req.listBlobs(this.#location, prefix, {
      maxResults: options.maxKeys,
      marker: options.continuationToken,
    });
    // A marker Azure did not hand out is a 400 (OutOfRangeInput / InvalidQueryParameterValue).
    return await listingFrom(options.continuationToken, async () => {
      const response = await this.#exchange("list", undefined, request, { signal: options.signal });
      return listPage(parseListBlobs(response.body));
    });
  }

  /**
   * Starts a block-list upload: writes the marker blob that carries the metadata and content
   * type until completion. The returned id is 32 hex digits.
   */
  createMultipart(
    key: string,
    options: { metadata?: UserMetadata; contentType?: string; signal?: AbortSignal } = {},
  ): Promise<string> {
    return this.#multipart.createMultipart(key, options);
  }

  /** Put Block; the part's `etag` is its block id. Parts may go concurrently, in any order. */
  putPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Uint8Array,
    options: { signal?: AbortSignal } = {},
  ): Promise<CompletedPart> {
    return this.#multipart.putPart(key, uploadId, partNumber, body, options);
  }

  /**
   * Commits the parts with Put Block List, with the metadata given to `createMultipart`, then
   * removes the marker. With `ifAbsent` an existing blob gives `AlreadyExists` and the upload
   * stays for the caller to abort, as with S3.
   * @throws {StoreError} `NotFound` (NoSuchUpload) when the marker is gone (aborted or
   *   completed), `PreconditionFailed` (InvalidPart) for parts this upload did not stage
   */
  completeMultipart(
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    options: CompleteOptions = {},
  ): Promise<PutResult> {
    return this.#multipart.completeMultipart(key, uploadId, parts, options);
  }

  /** Removes the marker; uncommitted blocks expire on their own (see the class notes). */
  abortMultipart(
    key: string,
    uploadId: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    return this.#multipart.abortMultipart(key, uploadId, options);
  }

  listMultipartUploads(
    prefix: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<MultipartUpload[]> {
    return this.#multipart.listMultipartUploads(prefix, options);
  }

  close(): Promise<void> {
    this.#tokens?.close?.();
    return Promise.resolve();
  }

  /**
   * Creates the container (tests and first-time setup). An existing container is fine.
   * @throws {StoreError} on any other failure
   */
  async createContainer(options: { signal?: AbortSignal } = {}): Promise<void> {
    const response = await this.#exchange(
      "createContainer",
      undefined,
      req.createContainer(this.#location),
      {
        signal: options.signal,
        accept: (status) => isOk(status) || status === 409,
      },
    );
    if (response.status === 409) {
      const info = parseErrorInfo(409, response.headers, response.body);
      if (info.code !== "ContainerAlreadyExists") {
        throw azureError(info, "createContainer", this.container, this.#redact);
      }
    }
  }

  /**
   * Multipart as Azure does it: the marker is an empty blob, parts are blocks staged on the
   * target blob, completion is Put Block List, and only the marker is removed (Azure has no
   * call to drop uncommitted blocks).
   */
  #stagingCalls(): StagingCalls<UploadMarker> {
    return {
      checkKey: checkPathKey,
      checkMarker: (marker, _key, op) => checkPathKey(marker, op),
      writeMarker: async (marker, key, { op, metadata, contentType, signal }) => {
        await this.#exchange(
          op,
          key,
          req.putBlob(this.#location, marker, new Uint8Array(0), {
            metadata,
            contentType,
            write: this.#markerWrite,
          }),
          { signal },
        );
      },
      stagePart: async ({ op, key, uploadId, partNumber, body, checksums, signal }) => {
        const id = req.blockId(uploadId, partNumber);
        const md5 = await bodyChecksum("md5", body, checksums);
        await this.#exchange(
          op,
          key,
          req.putBlock(this.#location, key, id, body, md5, this.#write),
          {
            signal,
          },
        );
        return { partNumber, etag: id };
      },
      checkPart: checkStagedBlock,
      readMarker: async (marker, { op, key, uploadId, signal }) => {
        let answer: HttpResponse;
        try {
          answer = await this.#exchange(op, key, req.getBlobProperties(this.#location, marker), {
            signal,
          });
        } catch (err) {
          if (err instanceof StoreError && err.kind === "NotFound") {
            throw noSuchUpload(op, key, uploadId, { cause: err });
          }
          throw err;
        }
        const { metadata } = parseProperties(marker, answer.headers, op);
        return { metadata, contentType: answer.headers.get("content-type") ?? undefined };
      },
      commit: async (
        { op, key, uploadId, upload, parts, ifAbsent, checksum, storageClass, signal },
      ) => {
        const ids = parts.map((part) => req.blockId(uploadId, part.partNumber));
        const request = req.putBlockList(this.#location, key, ids, {
          ifAbsent,
          metadata: upload.metadata,
          contentType: upload.contentType,
          md5: checksum,
          write: this.#tiered(storageClass),
        });
        const response = await this.#exchange(op, key, request, {
          signal,
          accept: (status) => isOk(status) || (ifAbsent && (status === 409 || status === 412)),
        });
        if (response.status === 409 || response.status === 412) {
          return this.#conditionalRefusal(response, op, key);
        }
        return created(response);
      },
      removeStaged: (marker, op, signal) => this.#delete(marker, op, signal),
      listStaged: async (prefix, op, signal) => {
        const out: StagedObject[] = [];
        const guard = new PageGuard(op, prefix, {
          describe: `azure ${this.endpoint} container '${this.container}'`,
          clock: this.#clock,
        });
        let marker: string | undefined;
        do {
          const request = req.listBlobs(this.#location, prefix, { marker });
          const response = await guard.request(
            (signal) => this.#exchange(op, undefined, request, { signal }),
            signal,
          );
          const page = parseListBlobs(response.body, op);
          guard.check(page.blobs.map((blob) => blob.key), page.nextMarker);
          for (const blob of page.blobs) out.push({ name: blob.key, initiated: blob.lastModified });
          marker = page.nextMarker;
        } while (marker);
        return out;
      },
    };
  }

  async #delete(key: string, op: string, signal?: AbortSignal): Promise<void> {
    await this.#exchange(op, key, req.deleteBlob(this.#location, key), {
      signal,
      accept: (status) => isOk(status) || status === 404,
    });
  }

  #conditionalRefusal(response: HttpResponse, op: string, key: string): PutResult {
    const info = parseErrorInfo(response.status, response.headers, response.body);
    // If-None-Match: * on an existing blob: 409 BlobAlreadyExists (412 ConditionNotMet on
    // some paths). Any other 409 (a lease, a pending copy) is a real failure.
    if (
      info.code === "BlobAlreadyExists" || info.code === "ConditionNotMet" ||
      (response.status === 412 && !response.headers.has("x-ms-error-code"))
    ) {
      return { status: "AlreadyExists" };
    }
    throw azureError(info, op, key, this.#redact);
  }

  /** Scrubs the account key, the SAS token and bearer tokens out of text bound for a message. */
  readonly #redact = secretRedactor(() => [
    this.#sharedKey,
    this.#sas,
    ...(this.#tokens?.secrets() ?? []),
  ]);

  #signingKey(): Uint8Array {
    return this.#key ??= importAccountKey(this.#sharedKey!);
  }

  /**
   * Authorizes (SharedKey or SAS) and sends one request; answers `accept` rejects become typed
   * errors: `refusal`'s when it has one for the answer, else {@link azureError}'s. A 403 from a
   * server whose clock is far from ours is re-signed once on its clock.
   */
  async #exchange(
    op: string,
    key: string | undefined,
    request: req.AzureRequest,
    options: {
      signal?: AbortSignal;
      accept?: (status: number) => boolean;
      refusal?: (info: AzureErrorInfo) => StoreError | undefined;
    },
  ): Promise<HttpResponse> {
    const accept = options.accept ?? isOk;
    let resigned = false;
    let refreshed = false;
    for (;;) {
      const headers: Record<string, string> = { ...request.headers };
      const own = queryString(request.query);
      let url = this.#location.origin + request.path + own;
      const token = await this.#tokens?.token({ signal: options.signal });
      if (token) {
        headers["x-ms-date"] = new Date(this.#clock.now() + this.#clockOffsetMs).toUTCString();
        headers["authorization"] = `Bearer ${token}`;
      } else if (this.#sas) {
        // A SAS is the whole authorization: appended to the URL, no Authorization header.
        url += own ? `&${this.#sas}` : `?${this.#sas}`;
      } else {
        headers["x-ms-date"] = new Date(this.#clock.now() + this.#clockOffsetMs).toUTCString();
        // The transport adds Content-Length (0 for a PUT without a body); it is signed too.
        const length = request.body?.byteLength ?? (request.method === "PUT" ? 0 : undefined);
        headers["authorization"] = authorization(this.account, this.#signingKey(), {
          method: request.method,
          path: request.path,
          query: request.query,
          headers: length === undefined
            ? headers
            : { ...headers, "content-length": String(length) },
        });
      }
      const response = await sendHttp(this.#fetch, {
        method: request.method,
        url,
        headers,
        body: request.body,
        signal: options.signal,
        timeoutMs: this.#timeoutMs,
      }, { op, key, redact: this.#redact, clock: this.#clock });
      if (accept(response.status)) return response;
      // Scrubbed before anything quotes (and cuts) it.
      const info = parseErrorInfo(
        response.status,
        response.headers,
        scrubBody(response.body, this.#redact),
      );
      if (!resigned && !this.#sas && !token && this.#skewed(info)) {
        resigned = true;
        this.#clockOffsetMs = info.serverTime!.getTime() - this.#clock.now();
        continue;
      }
      if (token && !refreshed && (info.status === 401 || info.status === 403)) {
        // Revoked or ended early: one out-of-band refresh (rate-limited), one retry.
        refreshed = true;
        if (await this.#tokens!.refused(token, { signal: options.signal })) continue;
      }
      throw options.refusal?.(info) ??
        azureError(info, op, key, this.#redact, this.#hint(info, op));
    }
  }

  #skewed(info: AzureErrorInfo): boolean {
    if (info.status !== 403 || !info.serverTime) return false;
    const ours = this.#clock.now() + this.#clockOffsetMs;
    return Math.abs(info.serverTime.getTime() - ours) > SKEW_SUSPECT_MS;
  }

  /** A pointer to the setting to fix, for the boot probe's one line. */
  #hint(info: AzureErrorInfo, op: string): string {
    switch (info.code) {
      case "ContainerNotFound":
        return ` (container '${this.container}' does not exist at ${this.endpoint})`;
      case "AuthenticationFailed":
        if (this.#tokens) {
          return ` (the bearer token from ${this.#tokens.describe} was refused by ${this.endpoint})`;
        }
        return this.#sas
          ? ` (the SAS token was refused by ${this.endpoint}: expired, wrong signature or scope)`
          : ` (the shared key does not match account '${this.account}' at ${this.endpoint})`;
      case "AuthorizationFailure":
        // Azure: a network rule or a disabled key kind; Azurite 3.35: any signature mismatch.
        return ` (account '${this.account}' at ${this.endpoint} refused the request: check the ${
          this.#sas
            ? "SAS token"
            : this.#tokens
            ? `identity ${this.#tokens.describe}`
            : "shared key"
        } and the account's network rules)`;
      case "AuthorizationPermissionMismatch":
      case "AuthorizationResourceTypeMismatch":
        return ` (the credentials lack permission for ${op} on container '${this.container}')`;
      case "ResourceNotFound":
        return op === "list"
          ? ` (account '${this.account}' or container '${this.container}' not found at ${this.endpoint})`
          : "";
    }
    return "";
  }
}

/** An ETag without its plain quotes; unlike ../_rules.ts bareEtag, a `W/` prefix stays. */
function quotesOff(etag: string): string {
  return etag.replace(/^"(.*)"$/, "$1");
}

/** A Put Blob's or Put Block List's answer: the new blob's ETag, as sent its version. */
function created(response: HttpResponse): PutResult {
  const etag = response.headers.get("etag");
  return etag ? { status: "Created", etag: quotesOff(etag), version: etag } : { status: "Created" };
}

/** Refuses a completion's part whose block id is not the one this upload staged for it. */
function checkStagedBlock(part: CompletedPart, uploadId: string, key: string): void {
  if (part.etag !== req.blockId(uploadId, part.partNumber)) {
    throw new StoreError(
      "PreconditionFailed",
      `part ${part.partNumber} was not staged by upload ${uploadId}`,
      { op: "completeMultipart", key, code: "InvalidPart" },
    );
  }
}
