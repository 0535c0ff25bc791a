// The narrow object-store contract every provider implements, and its typed error
// (docs/architecture.md, "Providers"). Higher layers (uploads, reads, retries) are written once
// against this interface.

/** Why a store operation failed, decided once by the provider. */
export type StoreErrorKind =
  | "NotFound" // the key (or upload id) does not exist
  | "PreconditionFailed" // a conditional request's condition did not hold
  | "InvalidRange" // a ranged get starts at or past the end of the object
  | "Throttled" // 429 / 503 SlowDown: retry, slower
  | "Transport" // connection refused or reset, timeout, 5xx, truncated body: retry
  | "Auth" // 401 / 403, bad credentials or signature
  | "Malformed" // a response tierd cannot parse
  | "Unsupported"; // the store does not implement this operation

/** A store failure with enough context to act on; never carries credentials. */
export class StoreError extends Error {
  override readonly name = "StoreError";
  constructor(
    readonly kind: StoreErrorKind,
    message: string,
    readonly detail: { op?: string; key?: string; status?: number; code?: string } = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** What the retry layer does with an error. */
export type ErrorClass = "retry" | "fail" | "not_found" | "auth" | "unsupported";

/**
 * Classifies any error thrown by a store call. Only a `StoreError` the provider called
 * `Throttled` or `Transport` is "retry"; anything else — a segment that changed on disk, a copy
 * that does not match, a cancelled call, a plain bug — is not a store fault and fails as itself.
 */
export function classify(err: unknown): ErrorClass {
  if (!(err instanceof StoreError)) return "fail";
  switch (err.kind) {
    case "Throttled":
    case "Transport":
      return "retry";
    case "NotFound":
      return "not_found";
    case "Auth":
      return "auth";
    case "Unsupported":
      return "unsupported";
    default:
      return "fail";
  }
}

/**
 * The retry predicate: true only for store faults another attempt may cure (throttling, a
 * connection refused or reset, a timeout, a 5xx, a truncated body). A clock-skew rejection is
 * re-signed once inside the S3 client, not here.
 */
export function isRetryable(err: unknown): boolean {
  return classify(err) === "retry";
}

/** User metadata: lowercase keys of `[a-z0-9-]`, ASCII values. */
export type UserMetadata = Record<string, string>;

export interface ObjectInfo {
  key: string;
  size: number;
  etag?: string;
  lastModified?: Date;
}

/** The checksums tierd sends with uploads and compares with what a store keeps. */
export type ChecksumAlgorithm = "crc32" | "crc64nvme" | "crc32c" | "sha256" | "md5";

/** A checksum of some bytes: its value is base64 of the big-endian digest, as stores spell it. */
export interface Checksum {
  algorithm: ChecksumAlgorithm;
  value: string;
}

/** A checksum a store keeps with an object and reports on HEAD. */
export interface StoredChecksum extends Checksum {
  /**
   * `full`: of the object's bytes (comparable with a checksum tierd computes over a file);
   * `composite`: of its parts' checksums (S3's `…-N`), not comparable without the part sizes.
   */
  type: "full" | "composite";
}

/** What `head` tells about an object. */
export interface ObjectHead extends ObjectInfo {
  metadata: UserMetadata;
  /**
   * An opaque token naming this state of the object, for {@link PutOptions.ifMatch}. It changes
   * on every successful put of the key, except on S3, where it is the ETag (the MD5 of the
   * bytes) and so repeats when the same bytes are put again. Per store: S3 the ETag, bare; GCS
   * the object's generation; Azure the ETag as Azure sent it, quotes included; fs a random token
   * kept in the object's metadata file; sim a counter. Compare versions of one store only.
   */
  version?: string;
  /** The checksums the store keeps, when the HEAD asked for them (`checksums: true`). */
  checksums?: StoredChecksum[];
}

/** Options of {@link ObjectStore.head}. */
export interface HeadOptions {
  signal?: AbortSignal;
  /**
   * Also report the checksums the store keeps with the object (S3 sends
   * `x-amz-checksum-mode: ENABLED`; the fs store re-hashes its file). A store that keeps none
   * reports none.
   */
  checksums?: boolean;
}

/**
 * Options of {@link ObjectStore.put}. `ifAbsent` and `ifMatch` exclude each other: giving both is
 * a `RangeError`, thrown before any request.
 */
export interface PutOptions {
  /** Create only: if the key exists, answer `AlreadyExists` and leave the object alone. */
  ifAbsent?: boolean;
  /**
   * Replace only: write only if the key exists and its current version is this one (a `version`
   * from `head`, `get` or `put`); otherwise throw `StoreError` of kind `PreconditionFailed`
   * (also when the key does not exist). A compare-and-swap: of two replacements with the same
   * version, at most one succeeds.
   *
   * Make each replacement's bytes unique (a timestamp and a random nonce): S3's version is the
   * ETag, the MD5 of the bytes, so a replacement with the same bytes keeps the version, and a
   * writer holding the old version would still match. A retried replacement whose first attempt
   * went through (a reset connection) is refused with `PreconditionFailed`: read the object back
   * to tell your own write from another writer's.
   */
  ifMatch?: string;
  metadata?: UserMetadata;
  contentType?: string;
  /**
   * The object's storage class (S3, GCS) or access tier (Azure), in the store's spelling, in
   * place of the store's configured one; ignored by the fs and sim stores.
   */
  storageClass?: string;
  /** Checksums of `body` the caller already took: see {@link PartOptions.checksums}. */
  checksums?: readonly Checksum[];
  signal?: AbortSignal;
}

/** Options of `putPart`. */
export interface PartOptions {
  signal?: AbortSignal;
  /**
   * Checksums of `body` the caller already took (an upload takes them as it checks the bytes it
   * read against a verify pass). A store that sends a checksum of one of these algorithms with
   * every body sends the given value instead of hashing the body again, and its check on
   * ingest refuses a body that is not the bytes the value was taken of. Any other is ignored.
   * Giving a value that is not the body's is the caller's error: the store refuses the body.
   */
  checksums?: readonly Checksum[];
}

/**
 * What a put or a multipart completion did. `Created` carries the new object's `version` (see
 * {@link ObjectHead.version}) where the store answers one.
 */
export type PutResult =
  | { status: "Created"; etag?: string; version?: string }
  | { status: "AlreadyExists" };

export interface GetOptions {
  /** Byte range [start, start + length). Without it the whole object. */
  range?: { start: number; length: number };
  signal?: AbortSignal;
}

/** What `get` read: the bytes (of the range asked for) and the object they belong to. */
export interface GetResult {
  bytes: Uint8Array;
  /** Total size of the object (not of the range). */
  size: number;
  etag?: string;
  /** The version of the object the bytes were read from (see {@link ObjectHead.version}). */
  version?: string;
}

export interface ListOptions {
  continuationToken?: string;
  /** At most this many keys in one page (the store may return fewer). */
  maxKeys?: number;
  signal?: AbortSignal;
}

export interface ListPage {
  objects: ObjectInfo[];
  /** Present when more keys follow. */
  continuationToken?: string;
}

export interface DeleteFailure {
  key: string;
  error: StoreError;
}

export interface MultipartUpload {
  key: string;
  uploadId: string;
  initiated?: Date;
}

export interface CompletedPart {
  partNumber: number;
  etag: string;
  /** The part's checksum as the store took it, for stores that list it in the completion (S3). */
  checksum?: string;
}

/** Options of {@link ObjectStore.completeMultipart}. */
export interface CompleteOptions {
  /** Create only: if the key exists, answer `AlreadyExists` and leave the object alone. */
  ifAbsent?: boolean;
  /** The whole object's checksum, of the store's {@link ObjectStore.completionChecksum}. */
  checksum?: Checksum;
  /** As given to `createMultipart` (GCS and Azure set it when the object is made). */
  storageClass?: string;
  signal?: AbortSignal;
}

/**
 * The object store contract. Keys are plain strings; providers encode them. Every upload carries
 * a checksum the store verifies on ingest and keeps where it can (S3 CRC-64/NVME, GCS CRC-32C,
 * Azure MD5); `head(key, { checksums: true })` reports what it keeps.
 */
export interface ObjectStore {
  /** Short name for logs and metrics: "s3", "gcs", "azure", "fs", "sim". */
  readonly kind: string;
  /**
   * The whole object's checksum `completeMultipart` wants as `checksum`, computed by the caller
   * over the bytes it sent (Azure keeps it as the blob's Content-MD5). Unset when the store
   * derives the object's checksum from its parts itself (S3, GCS) or keeps none.
   */
  readonly completionChecksum?: ChecksumAlgorithm;
  /**
   * Writes the object. With `ifAbsent` an existing key answers `AlreadyExists`; with `ifMatch` a
   * key that is absent or at another version throws `PreconditionFailed`.
   * @throws {RangeError} for `ifAbsent` and `ifMatch` together, before any request
   */
  put(key: string, body: Uint8Array, options?: PutOptions): Promise<PutResult>;
  /** Throws `NotFound` for a missing key and `InvalidRange` for a range starting past the end. */
  get(key: string, options?: GetOptions): Promise<GetResult>;
  /** Throws `NotFound` for a missing key. */
  head(key: string, options?: HeadOptions): Promise<ObjectHead>;
  /** Deletes keys; a missing key is not a failure. Returns the keys that could not be deleted. */
  deleteMany(keys: string[], options?: { signal?: AbortSignal }): Promise<DeleteFailure[]>;
  /** One page of keys under `prefix`, in lexicographic (UTF-8 byte) order. */
  list(prefix: string, options?: ListOptions): Promise<ListPage>;
  createMultipart(
    key: string,
    options?: {
      metadata?: UserMetadata;
      contentType?: string;
      /** The object's storage class or tier, as for `put`; repeated to `completeMultipart`. */
      storageClass?: string;
      signal?: AbortSignal;
    },
  ): Promise<string>;
  putPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Uint8Array,
    options?: PartOptions,
  ): Promise<CompletedPart>;
  completeMultipart(
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    options?: CompleteOptions,
  ): Promise<PutResult>;
  /** Aborting an unknown or finished upload is not a failure. */
  abortMultipart(key: string, uploadId: string, options?: { signal?: AbortSignal }): Promise<void>;
  listMultipartUploads(
    prefix: string,
    options?: { signal?: AbortSignal },
  ): Promise<MultipartUpload[]>;
  /** Releases connections, timers and servers owned by the store. */
  close?(): Promise<void>;
}
