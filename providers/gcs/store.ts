// The Google Cloud Storage object store over the JSON API: builds each request (requests.ts),
// adds a bearer token from its TokenSource (credentials.ts), sends it through the shared
// transport (../http.ts) and reads the answer (responses.ts). Multipart uploads are parallel
// part objects joined by compose; see createMultipart.
import { checkKey, invalidKey } from "../key_rules.ts";
import { bareEtag, checkMetadata, checkPutConditions, versionMismatch } from "../_rules.ts";
import { checkRange, rangedBody } from "../_ranges.ts";
import { listingFrom, malformed } from "../_errors.ts";
import { PageGuard } from "../listing.ts";
import { type FetchFn, type HttpResponse, isOk, sendHttp } from "../http.ts";
import { deleteEach } from "../_pool.ts";
import { forEachBounded } from "../../src/base/concurrency.ts";
import { bodyChecksum } from "../checksum.ts";
import { redactingFetch, scrubBody, secretRedactor } from "../_redact.ts";
import {
  type StagedCompletion,
  StagedMultipart,
  type StagingCalls,
  type UploadMarker,
} from "../staging.ts";
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
import type { TokenSource } from "./token_source.ts";
import * as req from "./requests.ts";
import {
  gcsError,
  type GcsErrorInfo,
  type GcsObject,
  generationOf,
  listPage,
  parseErrorInfo,
  parseJson,
  parseList,
  parseObject,
  replaceRefusal,
} from "./responses.ts";

/** Configuration of a {@link GcsStore}. */
export interface GcsStoreOptions {
  bucket: string;
  /** The JSON API endpoint. @default "https://storage.googleapis.com" */
  endpoint?: string;
  /** Where bearer tokens come from (`NoTokenSource` for the emulator). */
  tokens: TokenSource;
  /** The fetch to send with (tests inject faults here). @default globalThis.fetch */
  fetch?: FetchFn;
  /** Per-request timeout, headers and body. @default 60000 */
  requestTimeoutMs?: number;
  /** Deletes in flight at once (`deleteMany`, cleaning up a multipart upload). @default 16 */
  deleteConcurrency?: number;
  /** Where multipart upload markers and parts live. @default ".tierd-multipart/" */
  stagingPrefix?: string;
  /**
   * How `completeMultipart({ ifAbsent })` refuses to overwrite: `precondition` composes with
   * `ifGenerationMatch=0` (GCS answers 412 when the object exists); `head` also looks first, for
   * servers that ignore preconditions on compose (fake-gcs-server 1.56). @default "precondition"
   */
  conditionalCompose?: "precondition" | "head";
  /**
   * Storage class of the objects tierd writes (staged parts stay in the bucket's default: they
   * live minutes, and a colder class would bill its minimum duration for each) and the KMS key
   * of every object. @default the bucket's
   */
  write?: req.GcsWriteSettings;
}

/** `write` with `storageClass` in place of its class, when one is given. */
function classed(
  write: req.GcsWriteSettings | undefined,
  storageClass: string | undefined,
): req.GcsWriteSettings | undefined {
  return storageClass ? { ...write, storageClass } : write;
}

/** Staged objects of an upload, next to its marker: parts and intermediate composites. */
const STAGED = /^(part-\d{5}|compose-\d+-\d+)$/;
const isStagedName = (last: string) => STAGED.test(last);

function partName(marker: string, partNumber: number): string {
  return `${marker}/part-${String(partNumber).padStart(5, "0")}`;
}

/** An upload's marker read back, with the generation of every object staged for it. */
interface StagedUpload extends UploadMarker {
  generations: Map<string, string>;
}

/**
 * An {@link ObjectStore} over the GCS JSON API, over plain `fetch`.
 *
 * Multipart uploads (GCS has no S3-style upload in its JSON API): `createMultipart` writes an
 * empty marker object `{stagingPrefix}{key}/{uploadId}` with the upload's metadata and content
 * type; `putPart` uploads each part as its own object `{marker}/part-{n:05}`, concurrently and
 * in any order (the part's `etag` is its generation); `completeMultipart` joins the parts with
 * compose — 32 sources per call, in a tree above that — into the key with the marker's metadata,
 * then deletes the staged objects; `abortMultipart` deletes them. A resumable upload session
 * was not chosen: its chunks must arrive in order and 256 KiB-aligned (no parallel parts without
 * buffering them all), and sessions cannot be listed, so nothing could sweep an abandoned one.
 * The cost: one extra write per part plus the deletes; in a bucket whose default storage class
 * has a minimum storage duration (Nearline and colder), the short-lived parts bill that minimum.
 * @example
 * ```ts ignore
 * const store = new GcsStore({ bucket: "tier", tokens: new ServiceAccountTokenSource(key) });
 * await store.put("a/b.log", bytes, { ifAbsent: true });
 * ```
 */
export class GcsStore implements ObjectStore {
  readonly kind = "gcs";
  readonly bucket: string;
  /** The endpoint requests go to. */
  readonly endpoint: string;
  readonly #location: req.GcsLocation;
  readonly #tokens: TokenSource;
  readonly #fetch: FetchFn;
  readonly #timeoutMs: number | undefined;
  readonly #deleteConcurrency: number;
  readonly #multipart: StagedMultipart<StagedUpload>;
  readonly #conditionalCompose: "precondition" | "head";
  /** What the objects tierd writes get. */
  readonly #write: req.GcsWriteSettings | undefined;
  /** What staged parts, markers and intermediate composites get: the key, never the class. */
  readonly #stagedWrite: req.GcsWriteSettings | undefined;

  /** @throws {TypeError} for an endpoint that is not an http(s) URL */
  constructor(options: GcsStoreOptions) {
    this.bucket = options.bucket;
    this.#location = req.resolveLocation(options);
    this.endpoint = this.#location.origin + this.#location.basePath;
    this.#tokens = options.tokens;
    this.#fetch = redactingFetch(
      options.fetch ?? ((input, init) => fetch(input, init)),
      this.#redact,
    );
    this.#timeoutMs = options.requestTimeoutMs;
    this.#deleteConcurrency = options.deleteConcurrency ?? 16;
    this.#conditionalCompose = options.conditionalCompose ?? "precondition";
    this.#write = options.write;
    this.#stagedWrite = options.write?.kmsKeyName
      ? { kmsKeyName: options.write.kmsKeyName }
      : undefined;
    this.#multipart = new StagedMultipart(options.stagingPrefix, this.#stagingCalls());
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
    return `GcsStore { endpoint: ${this.endpoint}, bucket: ${this.bucket}, credentials: ${this.#tokens.describe} }`;
  }

  toJSON(): Record<string, string> {
    return {
      kind: this.kind,
      endpoint: this.endpoint,
      bucket: this.bucket,
      credentials: this.#tokens.describe,
    };
  }

  /**
   * One upload. `ifAbsent` sends `ifGenerationMatch=0`; `ifMatch`, a generation, sends
   * `ifGenerationMatch={generation}`, and a 412 or 404 is `PreconditionFailed` (so is a version
   * that is no generation at all, without a request: no object has it).
   */
  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutResult> {
    checkName(key, "put");
    checkPutConditions(options, key);
    checkMetadata(options.metadata, "put", key);
    const { ifMatch } = options;
    if (ifMatch !== undefined && !req.isGeneration(ifMatch)) {
      throw versionMismatch(key, {
        ifMatch,
        why: "it is not a GCS generation",
        code: "conditionNotMet",
      });
    }
    const ifAbsent = options.ifAbsent === true;
    const checksum = await bodyChecksum("crc32c", body, options.checksums);
    const response = await this.#exchange(
      "put",
      key,
      req.insertObject(this.#location, key, body, {
        ...options,
        checksum,
        write: classed(this.#write, options.storageClass),
      }),
      {
        signal: options.signal,
        accept: (status) => isOk(status) || (ifAbsent && status === 412),
        refusal: ifMatch === undefined
          ? undefined
          : (info, redact) => replaceRefusal(info, key, { redact }),
      },
    );
    if (response.status === 412) return { status: "AlreadyExists" };
    return created(parseObject(parseJson(response.body, "put", key), "put", key));
  }

  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    checkName(key, "get");
    const range = options.range;
    if (range) checkRange(range, key);
    const response = await this.#exchange("get", key, req.getMedia(this.#location, key, range), {
      signal: options.signal,
    });
    // GCS ignores a range it cannot parse and sends the whole object: rangedBody cuts it out.
    const { bytes, size } = rangedBody(response, range, key, {
      malformed: (why) => malformed("get", key, why),
    });
    const result: GetResult = { bytes, size };
    const etag = response.headers.get("etag");
    if (etag) result.etag = bareEtag(etag);
    const generation = generationOf(response.headers);
    if (generation) result.version = generation;
    return result;
  }

  /** The object resource; with `checksums`, its `crc32c` (and `md5Hash`, not for composed ones). */
  async head(key: string, options: HeadOptions = {}): Promise<ObjectHead> {
    const object = await this.#object(key, "head", options.signal);
    const head: ObjectHead = {
      key,
      size: object.size,
      metadata: object.metadata,
      version: object.generation,
    };
    if (object.etag) head.etag = object.etag;
    if (object.lastModified) head.lastModified = object.lastModified;
    if (options.checksums && object.stored) head.checksums = object.stored;
    return head;
  }

  /**
   * Deletes objects one request each, `deleteConcurrency` at a time; a missing object is
   * success. A key the store refuses becomes a failure entry; an auth, throttling or transport
   * failure stops the batch and is thrown (the caller retries the whole batch).
   */
  async deleteMany(
    keys: string[],
    options: { signal?: AbortSignal } = {},
  ): Promise<DeleteFailure[]> {
    return await deleteEach(keys, this.#deleteConcurrency, async (key) => {
      checkName(key, "deleteMany");
      await this.#delete(key, "deleteMany", options.signal);
    });
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    const request = req.listObjects(this.#location, prefix, {
      maxResults: options.maxKeys,
      pageToken: options.continuationToken,
    });
    // A page token GCS did not hand out is a 400.
    return await listingFrom(options.continuationToken, async () => {
      const response = await this.#exchange("list", undefined, request, { signal: options.signal });
      return listPage(parseList(response.body));
    });
  }

  /** Starts an upload: writes its marker object (metadata and content type). */
  createMultipart(
    key: string,
    options: { metadata?: UserMetadata; contentType?: string; signal?: AbortSignal } = {},
  ): Promise<string> {
    return this.#multipart.createMultipart(key, options);
  }

  /** Uploads the part as its own object; its `etag` is that object's generation. */
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
   * Composes the parts, in part order, into the key with the upload's metadata and deletes the
   * staged objects. With `ifAbsent` an existing object gives `AlreadyExists` and the upload stays
   * for the caller to abort, as with S3.
   * @throws {StoreError} `NotFound` (NoSuchUpload) when the marker is gone, `PreconditionFailed`
   *   (InvalidPart) for a part that was not uploaded or has another generation
   */
  completeMultipart(
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    options: CompleteOptions = {},
  ): Promise<PutResult> {
    return this.#multipart.completeMultipart(key, uploadId, parts, options);
  }

  /** Deletes the upload's parts and marker. Aborting an unknown upload does nothing. */
  abortMultipart(
    key: string,
    uploadId: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    return this.#multipart.abortMultipart(key, uploadId, options);
  }

  /** Uploads under `prefix`: their markers, and staged parts whose marker is gone (strays). */
  listMultipartUploads(
    prefix: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<MultipartUpload[]> {
    return this.#multipart.listMultipartUploads(prefix, options);
  }

  close(): Promise<void> {
    this.#tokens.close?.();
    return Promise.resolve();
  }

  /** Where the bearer tokens come from, for `tierd probe`'s report. */
  get tokenSource(): TokenSource {
    return this.#tokens;
  }

  /**
   * Creates the bucket (tests and first-time setup). An existing bucket is fine.
   * @param project the project that owns the bucket
   * @throws {StoreError} on any other failure
   */
  async createBucket(project = "tierd", options: { signal?: AbortSignal } = {}): Promise<void> {
    await this.#exchange("createBucket", undefined, req.createBucket(this.#location, project), {
      signal: options.signal,
      accept: (status) => isOk(status) || status === 409,
    });
  }

  /**
   * Multipart as GCS does it: the marker is an empty object, each part its own object next to
   * it, completion a compose (a tree of them above 32 parts), and the staged objects are deleted
   * after.
   */
  #stagingCalls(): StagingCalls<StagedUpload> {
    return {
      checkKey: checkName,
      checkMarker: (marker, key, op) => {
        try {
          checkName(partName(marker, 1), op);
        } catch {
          throw invalidKey(
            key,
            op,
            "too long for a multipart upload (the staged part names exceed 1024 bytes)",
          );
        }
      },
      writeMarker: async (marker, key, { op, metadata, contentType, signal }) => {
        await this.#exchange(
          op,
          key,
          req.insertObject(this.#location, marker, new Uint8Array(0), {
            metadata,
            contentType,
            write: this.#stagedWrite,
          }),
          { signal },
        );
      },
      stagePart: async ({ op, key, uploadId, partNumber, body, checksums, signal }) => {
        const name = partName(this.#multipart.marker(key, uploadId, op), partNumber);
        const checksum = await bodyChecksum("crc32c", body, checksums);
        const response = await this.#exchange(
          op,
          key,
          req.insertObject(this.#location, name, body, { checksum, write: this.#stagedWrite }),
          { signal },
        );
        const part = parseObject(parseJson(response.body, op, key), op, key);
        return { partNumber, etag: part.generation };
      },
      readMarker: async (marker, { signal }) => {
        const staged = await this.#staged(marker, signal);
        const upload = staged.find((o) => o.key === marker);
        if (!upload) return undefined;
        return {
          metadata: upload.metadata,
          contentType: upload.contentType,
          generations: new Map(staged.map((o) => [o.key, o.generation])),
        };
      },
      commit: (completion) => this.#compose(completion),
      removeStaged: (marker, _op, signal) => this.#removeStaged(marker, signal),
      listStaged: async (prefix, op, signal) =>
        (await this.#listAll(prefix, op, signal)).map((o) => ({
          name: o.key,
          initiated: o.created ?? o.lastModified,
        })),
      isStagedName,
    };
  }

  /** Composes the staged parts into the key, checking each against the generation listed. */
  async #compose(
    { op, key, marker, upload, parts, ifAbsent, storageClass, signal }: StagedCompletion<
      StagedUpload
    >,
  ): Promise<PutResult> {
    const sources = parts.map((part): req.ComposeSource => {
      const name = partName(marker, part.partNumber);
      const generation = upload.generations.get(name);
      if (generation === undefined || generation !== part.etag) {
        throw new StoreError(
          "PreconditionFailed",
          generation === undefined
            ? `${op} ${key}: part ${part.partNumber} was not uploaded`
            : `${op} ${key}: part ${part.partNumber} has generation ${generation}, not ${part.etag}`,
          { op, key, code: "InvalidPart" },
        );
      }
      return { name, generation };
    });
    if (ifAbsent && this.#conditionalCompose === "head" && await this.#exists(key, signal)) {
      return { status: "AlreadyExists" };
    }
    const top = await this.#composeTree(key, marker, sources, signal);
    const request = req.composeObject(this.#location, key, top, {
      ifAbsent,
      metadata: upload.metadata,
      contentType: upload.contentType,
      write: classed(this.#write, storageClass),
    });
    const response = await this.#exchange(op, key, request, {
      signal,
      accept: (status) => isOk(status) || (ifAbsent && status === 412),
    });
    if (response.status === 412) return { status: "AlreadyExists" };
    return created(parseObject(parseJson(response.body, op, key), op, key));
  }

  async #object(key: string, op: string, signal?: AbortSignal): Promise<GcsObject> {
    checkName(key, op);
    const response = await this.#exchange(op, key, req.getObject(this.#location, key), { signal });
    return parseObject(parseJson(response.body, op, key), op, key);
  }

  async #exists(key: string, signal?: AbortSignal): Promise<boolean> {
    try {
      await this.#object(key, "completeMultipart", signal);
      return true;
    } catch (err) {
      if (err instanceof StoreError && err.kind === "NotFound") return false;
      throw err;
    }
  }

  /** Every object of the upload: its marker, parts and intermediates. */
  async #staged(marker: string, signal?: AbortSignal): Promise<GcsObject[]> {
    const all = await this.#listAll(marker, "completeMultipart", signal);
    return all.filter((o) =>
      o.key === marker ||
      (o.key.startsWith(`${marker}/`) && isStagedName(o.key.slice(marker.length + 1)))
    );
  }

  async #listAll(prefix: string, op: string, signal?: AbortSignal): Promise<GcsObject[]> {
    const out: GcsObject[] = [];
    const guard = new PageGuard(op, prefix, {
      describe: `gcs ${this.endpoint} bucket '${this.bucket}'`,
    });
    let pageToken: string | undefined;
    do {
      const request = req.listObjects(this.#location, prefix, { pageToken });
      const response = await guard.request(
        (signal) => this.#exchange(op, undefined, request, { signal }),
        signal,
      );
      const page = parseList(response.body, op);
      guard.check(page.objects.map((o) => o.key), page.nextPageToken);
      out.push(...page.objects);
      pageToken = page.nextPageToken;
    } while (pageToken);
    return out;
  }

  /** Deletes the staged objects of an upload, the marker last. */
  async #removeStaged(marker: string, signal?: AbortSignal): Promise<void> {
    const staged = await this.#staged(marker, signal);
    const others = staged.filter((o) => o.key !== marker).map((o) => o.key);
    await forEachBounded(
      others,
      this.#deleteConcurrency,
      (name) => this.#delete(name, "abortMultipart", signal),
    );
    if (staged.some((o) => o.key === marker)) await this.#delete(marker, "abortMultipart", signal);
  }

  /**
   * Reduces `sources` to at most 32 by composing runs of 32 into intermediate objects next to
   * the marker, level by level (10,000 parts take two levels).
   */
  async #composeTree(
    key: string,
    marker: string,
    sources: req.ComposeSource[],
    signal?: AbortSignal,
  ): Promise<req.ComposeSource[]> {
    let level = 0;
    let current = sources;
    while (current.length > req.MAX_COMPOSE_SOURCES) {
      const groups: req.ComposeSource[][] = [];
      for (let i = 0; i < current.length; i += req.MAX_COMPOSE_SOURCES) {
        groups.push(current.slice(i, i + req.MAX_COMPOSE_SOURCES));
      }
      const next: req.ComposeSource[] = new Array(groups.length);
      await forEachBounded(groups, 4, async (group, i) => {
        const name = `${marker}/compose-${level}-${i}`;
        const response = await this.#exchange(
          "completeMultipart",
          key,
          req.composeObject(this.#location, name, group, { write: this.#stagedWrite }),
          {
            signal,
          },
        );
        const object = parseObject(
          parseJson(response.body, "completeMultipart", key),
          "completeMultipart",
          key,
        );
        next[i] = { name, generation: object.generation };
      });
      current = next;
      level++;
    }
    return current;
  }

  async #delete(name: string, op: string, signal?: AbortSignal): Promise<void> {
    await this.#exchange(op, name, req.deleteObject(this.#location, name), {
      signal,
      accept: (status) => isOk(status) || status === 404,
    });
  }

  /** Scrubs bearer tokens (and a service account's private key) out of error text. */
  readonly #redact = secretRedactor(() => this.#tokens.secrets());

  /**
   * Adds the bearer token and sends one request; answers `accept` rejects become typed errors:
   * `refusal`'s when it has one for the answer, else {@link gcsError}'s. A 401 drops the token
   * and tries once more with a fresh one.
   */
  async #exchange(
    op: string,
    key: string | undefined,
    request: req.GcsRequest,
    options: {
      signal?: AbortSignal;
      accept?: (status: number) => boolean;
      refusal?: (info: GcsErrorInfo, redact: (text: string) => string) => StoreError | undefined;
    },
  ): Promise<HttpResponse> {
    const accept = options.accept ?? isOk;
    let refreshed = false;
    for (;;) {
      const token = await this.#tokens.token({ signal: options.signal });
      const headers = token
        ? { ...request.headers, authorization: `Bearer ${token}` }
        : request.headers;
      const redact = token
        ? (text: string) => this.#redact(text.replaceAll(token, "[redacted]"))
        : this.#redact;
      const response = await sendHttp(this.#fetch, {
        method: request.method,
        url: request.url,
        headers,
        body: request.body,
        signal: options.signal,
        timeoutMs: this.#timeoutMs,
      }, { op, key, redact });
      if (accept(response.status)) return response;
      if ((response.status === 401 || response.status === 403) && token && !refreshed) {
        // Revoked or ended early: one out-of-band refresh (rate-limited), one retry.
        refreshed = true;
        if (await this.#tokens.refused(token, { signal: options.signal })) continue;
      }
      // Scrubbed before anything quotes (and cuts) it.
      const info = parseErrorInfo(response.status, scrubBody(response.body, redact));
      throw options.refusal?.(info, redact) ??
        gcsError(info, op, key, redact, this.#hint(info, op));
    }
  }

  /** A pointer to the setting to fix, for the boot probe's one line. */
  #hint(info: GcsErrorInfo, op: string): string {
    if (
      info.status === 404 &&
      (op === "list" || op === "listMultipartUploads" || op === "createMultipart")
    ) {
      return ` (bucket '${this.bucket}' does not exist at ${this.endpoint})`;
    }
    if (info.status === 401) {
      return ` (${this.#tokens.describe} was not accepted by ${this.endpoint})`;
    }
    if (info.status === 403) {
      return ` (${this.#tokens.describe} lacks permission for ${op} on bucket '${this.bucket}')`;
    }
    return "";
  }
}

/**
 * Refuses names GCS cannot hold: those no store accepts (../key_rules.ts), `.` and `..` (URL
 * parsing would resolve them), and names with a carriage return or line feed.
 * @throws {StoreError} `Unsupported` with code `InvalidKey`
 */
export function checkName(key: string, op: string): void {
  checkKey(key, op);
  if (key === "." || key === "..") {
    throw invalidKey(key, op, "GCS does not allow '.' or '..' as a name");
  }
  if (/[\r\n]/.test(key)) throw invalidKey(key, op, "GCS names cannot hold CR or LF");
}

/** An upload's or compose's answer: the new object, whose generation is its version. */
function created(object: GcsObject): PutResult {
  const result: PutResult = { status: "Created", version: object.generation };
  if (object.etag) result.etag = object.etag;
  return result;
}
