// Uploads a local file (a sealed segment) to a store: one PUT with a known length when it fits
// one part, else a multipart upload read in part-sized chunks with positional reads, so memory
// stays near partSize × (concurrency + 1) whatever the file's size. The bytes are hashed as they
// are read: the caller's digest is checked before the upload completes (a file that changed
// while it was read is never published), and a store that wants the whole object's checksum at
// completion gets it.
import { type FileHandle, open } from "node:fs/promises";
import { readInto } from "../src/base/bytes.ts";
import { type ChecksumHasher, createChecksum } from "./checksum.ts";
import { MAX_PART_NUMBER } from "./_rules.ts";
import { BufferedMultipartWriter, type MultipartWriterOptions } from "./multipart_writer.ts";
import { PartBufferPool } from "./part_pool.ts";
import type { Checksum, ObjectStore, PutResult } from "./types.ts";

/**
 * A digest the caller keeps over the bytes as they are read, in order, and checks before the
 * upload is completed (or, for a single put, sent): `verify` throws to stop it.
 */
export interface ReadVerifier {
  /**
   * Sees the next bytes read: one part of a multipart upload, or the whole of a single put.
   * @returns checksums of `bytes` it took on the way, sent with them so the store's
   *   checksum is not taken a second time (`PartOptions.checksums`)
   */
  update(bytes: Uint8Array): readonly Checksum[] | void;
  /** @throws when the bytes read are not the ones expected (the upload is then aborted) */
  verify(): void | Promise<void>;
}

/** Options of {@link uploadFile}: those of the multipart writer, plus a shared buffer pool. */
export interface UploadFileOptions extends MultipartWriterOptions {
  /**
   * Part buffers shared with other uploads (bounds memory node-wide).
   * @default a pool of `concurrency + 1` buffers for this upload alone
   */
  pool?: PartBufferPool;
  /** Checks the bytes read before the object is published. */
  verifyRead?: ReadVerifier;
}

/**
 * The part size {@link uploadFile} cuts a file of `size` bytes at: `partSize`, or more when the
 * file would otherwise need more than 10,000 parts. A file of at most `partSize` bytes is one put.
 */
export function uploadPartSize(size: number, partSize: number): number {
  return Math.max(partSize, Math.ceil(size / MAX_PART_NUMBER));
}

/**
 * Uploads the file at `path` to `key`.
 * Files of at most `partSize` bytes go as one `put`; larger ones as a multipart upload whose
 * part size grows past `partSize` only when the file would otherwise need more than 10,000 parts.
 * @param store where the object goes
 * @param key the object's key
 * @param path the local file; it must not change during the upload
 * @returns `Created`, or `AlreadyExists` with `ifAbsent` when the key was taken
 * @throws {StoreError} from the store (the multipart upload is aborted first)
 * @throws {Error} when the file cannot be read or shrinks while being read; what
 *   `verifyRead.verify` throws (nothing is published then)
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mkdtemp, rm, writeFile } from "node:fs/promises";
 * import { tmpdir } from "node:os";
 * import { join } from "node:path";
 * import { SimStore } from "./sim/store.ts";
 *
 * const dir = await mkdtemp(join(tmpdir(), "tierd-"));
 * const path = join(dir, "00000000000000000000.log");
 * await writeFile(path, new Uint8Array(3 * 1024));
 * const store = new SimStore({ minPartSize: 1024 });
 * const uploadIds: string[] = [];
 * const result = await uploadFile(store, "iggy/a.log", path, {
 *   partSize: 1024, // 3 parts
 *   minPartSize: 1024, // the store's smallest part (S3's is 5 MiB)
 *   concurrency: 2,
 *   ifAbsent: true,
 *   onUploadId: (id) => void uploadIds.push(id), // journal it: a crash leaves it to abort
 * });
 * assert.equal(result.status, "Created");
 * assert.equal(uploadIds.length, 1);
 * assert.equal(store.objects.get("iggy/a.log")?.bytes.length, 3 * 1024);
 * await rm(dir, { recursive: true });
 * ```
 */
export async function uploadFile(
  store: ObjectStore,
  key: string,
  path: string,
  options: UploadFileOptions,
): Promise<PutResult> {
  const file = await open(path, "r");
  try {
    const size = (await file.stat()).size;
    if (size <= options.partSize) {
      const body = new Uint8Array(size);
      await readFully(file, body, 0, path);
      const checksums = options.verifyRead?.update(body) ?? undefined;
      await options.verifyRead?.verify();
      options.signal?.throwIfAborted();
      const result = await (options.run ?? ((op) => op()))((signal) =>
        store.put(key, body, {
          ifAbsent: options.ifAbsent,
          metadata: options.metadata,
          contentType: options.contentType,
          storageClass: options.storageClass,
          checksums,
          signal: signal && options.signal
            ? AbortSignal.any([signal, options.signal])
            : signal ?? options.signal,
        })
      );
      options.onProgress?.(size);
      return result;
    }
    const partSize = uploadPartSize(size, options.partSize);
    const shared = options.pool && options.pool.partSize >= partSize ? options.pool : undefined;
    const pool = shared ?? new PartBufferPool(partSize, (options.concurrency ?? 4) + 1);
    // Every buffer this upload took goes back exactly once: when the store is done with it,
    // or at the end for any the writer never sent (a failure before its turn).
    const held = new Set<Uint8Array>();
    const giveBack = (part: Uint8Array) => {
      if (held.delete(part)) pool.release(part);
    };
    const writer = new BufferedMultipartWriter(store, key, {
      ...options,
      partSize,
      recycle: giveBack,
    });
    const whole: ChecksumHasher | undefined = store.completionChecksum
      ? await createChecksum(store.completionChecksum)
      : undefined;
    try {
      for (let position = 0; position < size; position += partSize) {
        const part = await pool.acquire(Math.min(partSize, size - position), options.signal);
        held.add(part);
        await readFully(file, part, position, path);
        // Hashed before the writer owns the part (a sent part's buffer is recycled).
        const checksums = options.verifyRead?.update(part) ?? undefined;
        whole?.update(part);
        await writer.writePart(part, checksums);
        await writer.flush(); // never hold a pooled buffer while waiting for the next one
      }
      await options.verifyRead?.verify();
      return await writer.complete({ checksum: whole?.digest() });
    } catch (err) {
      await writer.abort().catch(() => {});
      throw err;
    } finally {
      for (const part of [...held]) giveBack(part);
    }
  } finally {
    await file.close();
  }
}

async function readFully(
  file: Pick<FileHandle, "read">,
  target: Uint8Array,
  position: number,
  path: string,
): Promise<void> {
  const got = await readInto(file, target, position);
  if (got < target.length) {
    throw new Error(`${path} shrank while uploading: no bytes at offset ${position + got}`);
  }
}
