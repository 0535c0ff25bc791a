// Multipart uploads for stores without S3's upload ids (GCS, Azure): each upload is a small
// marker object at `{root}{key}/{uploadId}` that holds the upload's metadata and content type,
// so uploads can be listed by key prefix, completed with the metadata they were created with,
// and swept. The root is a reserved prefix outside tierd's key space. `StagedMultipart` runs
// the flow both stores share; each store supplies how it stages parts and commits them.
import { checkMetadata, checkPartNumber, inPartOrder } from "./_rules.ts";
import {
  type Checksum,
  type CompletedPart,
  type CompleteOptions,
  type MultipartUpload,
  type PartOptions,
  type PutResult,
  StoreError,
  type UserMetadata,
} from "./types.ts";

/** Where upload markers (and GCS part objects) live by default. */
export const DEFAULT_STAGING_ROOT = ".tierd-multipart/";

/** A fresh upload id: 32 lowercase hex digits (128 random bits). */
export function newUploadId(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(16)),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
}

/** True for a string shaped like {@link newUploadId}'s. */
export function isUploadId(text: string): boolean {
  return /^[0-9a-f]{32}$/.test(text);
}

/** The marker object of an upload. */
export function uploadMarkerName(root: string, key: string, uploadId: string): string {
  return `${root}${key}/${uploadId}`;
}

/**
 * The key and upload id an object name under `root` belongs to: a marker
 * (`{root}{key}/{id}`), or an object staged for it (`{root}{key}/{id}/{name}` where `name` passes
 * `isStagedName`). Parsed from the end, so keys may hold any characters, `/` included.
 */
export function parseStagingName(
  root: string,
  name: string,
  isStagedName: (last: string) => boolean = () => false,
): { key: string; uploadId: string; marker: boolean } | undefined {
  if (!name.startsWith(root)) return undefined;
  const rest = name.slice(root.length);
  const last = rest.lastIndexOf("/");
  if (last <= 0) return undefined;
  const tail = rest.slice(last + 1);
  if (isUploadId(tail)) return { key: rest.slice(0, last), uploadId: tail, marker: true };
  if (!isStagedName(tail)) return undefined;
  const second = rest.lastIndexOf("/", last - 1);
  if (second <= 0) return undefined;
  const uploadId = rest.slice(second + 1, last);
  if (!isUploadId(uploadId)) return undefined;
  return { key: rest.slice(0, second), uploadId, marker: false };
}

/**
 * Refuses an upload id this store could not have handed out.
 * @throws {StoreError} `NotFound` with code `NoSuchUpload`
 */
export function checkUploadId(uploadId: string, op: string, key: string): void {
  if (!isUploadId(uploadId)) {
    throw new StoreError(
      "NotFound",
      `${op} ${key}: ${JSON.stringify(uploadId)} is not an upload of this store`,
      { op, key, code: "NoSuchUpload" },
    );
  }
}

/** The error (a 404, code `NoSuchUpload`) for an upload whose marker is gone. */
export function noSuchUpload(
  op: string,
  key: string,
  uploadId: string,
  options?: ErrorOptions,
): StoreError {
  return new StoreError("NotFound", `${op} ${key}: upload ${uploadId} does not exist`, {
    op,
    key,
    status: 404,
    code: "NoSuchUpload",
  }, options);
}

/** What a store reads back from an upload's marker: what completion writes the object with. */
export interface UploadMarker {
  metadata: UserMetadata;
  contentType?: string;
}

/** An object under the staging root, as a store's listing gives it. */
export interface StagedObject {
  name: string;
  /** When the object was created (or last modified, where the store says no more). */
  initiated?: Date;
}

/** A completion as {@link StagingCalls.commit} gets it, once its parts and marker are checked. */
export interface StagedCompletion<M extends UploadMarker> {
  op: string;
  key: string;
  uploadId: string;
  marker: string;
  /** The marker as the store read it back. */
  upload: M;
  /** The parts, in part-number order, each named once. */
  parts: CompletedPart[];
  ifAbsent: boolean;
  /** The whole object's checksum, when the caller gave one (see `completionChecksum`). */
  checksum?: Checksum;
  /** The object's storage class or tier, when the caller gave one. */
  storageClass?: string;
  signal?: AbortSignal;
}

/**
 * The store-specific calls of a {@link StagedMultipart}. `op` is the operation the call serves
 * (`createMultipart`, …), for the store's errors.
 * @typeParam M what the store reads back from a marker
 */
export interface StagingCalls<M extends UploadMarker> {
  /**
   * Refuses a key this store cannot hold.
   * @throws {StoreError} `Unsupported` (code `InvalidKey`)
   */
  checkKey(key: string, op: string): void;
  /**
   * Refuses an upload whose marker name (or the names staged next to it) this store cannot
   * hold.
   * @throws {StoreError} `Unsupported` (code `InvalidKey`)
   */
  checkMarker(marker: string, key: string, op: string): void;
  /** Writes the empty marker object, carrying the upload's metadata and content type. */
  writeMarker(marker: string, key: string, options: {
    op: string;
    metadata?: UserMetadata;
    contentType?: string;
    signal?: AbortSignal;
  }): Promise<void>;
  /** Stages one part of the upload; returns the part as `completeMultipart` wants it back. */
  stagePart(part: {
    op: string;
    key: string;
    uploadId: string;
    partNumber: number;
    body: Uint8Array;
    /** Checksums of `body` the caller already took (`PartOptions.checksums`). */
    checksums?: readonly Checksum[];
    signal?: AbortSignal;
  }): Promise<CompletedPart>;
  /**
   * Refuses a completion's part this upload could not have staged, before the marker is read.
   * @throws {StoreError} `PreconditionFailed` (code `InvalidPart`)
   */
  checkPart?(part: CompletedPart, uploadId: string, key: string): void;
  /**
   * Reads the marker back: undefined when it is gone (or throws {@link noSuchUpload}'s error
   * itself, to keep the store's answer as the cause).
   */
  readMarker(marker: string, upload: {
    op: string;
    key: string;
    uploadId: string;
    signal?: AbortSignal;
  }): Promise<M | undefined>;
  /**
   * Writes the object at `key` from the staged parts, with the marker's metadata. With
   * `ifAbsent`, an existing object gives `AlreadyExists`.
   */
  commit(completion: StagedCompletion<M>): Promise<PutResult>;
  /** Removes what the upload staged and then its marker; what is already gone is fine. */
  removeStaged(marker: string, op: string, signal?: AbortSignal): Promise<void>;
  /** Every object whose name starts with `prefix` (all pages). */
  listStaged(prefix: string, op: string, signal?: AbortSignal): Promise<StagedObject[]>;
  /**
   * True for the last name segment of an object staged next to a marker (a GCS part); such
   * objects list their upload even when its marker is gone. @default none are
   */
  isStagedName?(last: string): boolean;
}

/**
 * The multipart flow of a store without upload ids, over the store's own calls: the
 * {@link ObjectStore}'s multipart methods, with their key, upload id, part and metadata checks,
 * marker bookkeeping and listing. Completion commits through the store, then removes what was
 * staged (a failure there is left for the sweep); a refused conditional completion leaves the
 * upload for the caller to abort, as with S3.
 * @typeParam M what the store reads back from a marker
 * @example
 * ```ts ignore
 * // In a store: the calls stage parts and commit them the store's way (see AzureStore, GcsStore).
 * this.#multipart = new StagedMultipart(options.stagingPrefix, this.#stagingCalls());
 * // …and each multipart method of the store delegates:
 * return this.#multipart.completeMultipart(key, uploadId, parts, options);
 * ```
 */
export class StagedMultipart<M extends UploadMarker> {
  /** The reserved prefix markers (and staged objects) live under. */
  readonly root: string;
  readonly #calls: StagingCalls<M>;

  /** @param root where markers live @default DEFAULT_STAGING_ROOT */
  constructor(root: string | undefined, calls: StagingCalls<M>) {
    this.root = root ?? DEFAULT_STAGING_ROOT;
    this.#calls = calls;
  }

  /**
   * The marker object of an upload, checked by the store.
   * @throws {StoreError} `Unsupported` (code `InvalidKey`) when the store cannot hold it
   */
  marker(key: string, uploadId: string, op: string): string {
    const marker = uploadMarkerName(this.root, key, uploadId);
    this.#calls.checkMarker(marker, key, op);
    return marker;
  }

  /** Starts an upload: writes its marker. The returned id is 32 hex digits. */
  async createMultipart(
    key: string,
    options: { metadata?: UserMetadata; contentType?: string; signal?: AbortSignal } = {},
  ): Promise<string> {
    const op = "createMultipart";
    this.#calls.checkKey(key, op);
    checkMetadata(options.metadata, op, key);
    const uploadId = newUploadId();
    await this.#calls.writeMarker(this.marker(key, uploadId, op), key, {
      op,
      metadata: options.metadata,
      contentType: options.contentType,
      signal: options.signal,
    });
    return uploadId;
  }

  /** Checks the key, part number and upload id, then stages the part through the store. */
  async putPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Uint8Array,
    options: PartOptions = {},
  ): Promise<CompletedPart> {
    const op = "putPart";
    this.#calls.checkKey(key, op);
    checkPartNumber(partNumber, op, key);
    checkUploadId(uploadId, op, key);
    return await this.#calls.stagePart({
      op,
      key,
      uploadId,
      partNumber,
      body,
      checksums: options.checksums,
      signal: options.signal,
    });
  }

  /**
   * Checks the parts, reads the marker back, commits through the store and removes what was
   * staged.
   * @throws {StoreError} `NotFound` (NoSuchUpload) when the marker is gone (aborted or
   *   completed), `PreconditionFailed` (InvalidPart, InvalidPartOrder) for parts that do not
   *   make a completion
   */
  async completeMultipart(
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    options: CompleteOptions = {},
  ): Promise<PutResult> {
    const op = "completeMultipart";
    const signal = options.signal;
    this.#calls.checkKey(key, op);
    checkUploadId(uploadId, op, key);
    const ordered = inPartOrder(key, parts, (part) => {
      checkPartNumber(part.partNumber, op, key);
      this.#calls.checkPart?.(part, uploadId, key);
      return part;
    });
    const marker = this.marker(key, uploadId, op);
    const upload = await this.#calls.readMarker(marker, { op, key, uploadId, signal });
    if (!upload) throw noSuchUpload(op, key, uploadId);
    const result = await this.#calls.commit({
      op,
      key,
      uploadId,
      marker,
      upload,
      parts: ordered,
      ifAbsent: options.ifAbsent === true,
      checksum: options.checksum,
      storageClass: options.storageClass,
      signal,
    });
    if (result.status === "Created") {
      // The object is complete; what is left behind is swept with the upload's marker.
      await this.#calls.removeStaged(marker, op, signal).catch(() => {});
    }
    return result;
  }

  /** Removes what the upload staged and its marker. Aborting an unknown upload does nothing. */
  async abortMultipart(
    key: string,
    uploadId: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    const op = "abortMultipart";
    this.#calls.checkKey(key, op);
    if (!isUploadId(uploadId)) return; // never one of ours: nothing to abort
    await this.#calls.removeStaged(this.marker(key, uploadId, op), op, options.signal);
  }

  /**
   * Uploads under `prefix`: their markers, and objects staged for an upload whose marker is gone
   * (strays), each upload once, initiated when its oldest object was.
   */
  async listMultipartUploads(
    prefix: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<MultipartUpload[]> {
    const op = "listMultipartUploads";
    const found = new Map<string, MultipartUpload>();
    const staged = await this.#calls.listStaged(this.root + prefix, op, options.signal);
    for (const object of staged) {
      const parsed = parseStagingName(this.root, object.name, this.#calls.isStagedName);
      if (!parsed || !parsed.key.startsWith(prefix)) continue;
      const id = `${parsed.uploadId}/${parsed.key}`;
      const initiated = object.initiated;
      const known = found.get(id);
      if (!known) {
        const upload: MultipartUpload = { key: parsed.key, uploadId: parsed.uploadId };
        if (initiated) upload.initiated = initiated;
        found.set(id, upload);
      } else if (initiated && (!known.initiated || initiated < known.initiated)) {
        known.initiated = initiated;
      }
    }
    return [...found.values()];
  }
}
