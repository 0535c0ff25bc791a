// Uploads a local file (a sealed segment) to a store: one PUT with a known length when it fits
// one part, else a multipart upload read in part-sized chunks with positional reads, so memory
// stays near partSize × (concurrency + 1) whatever the file's size.
import { open } from "node:fs/promises";
import { MAX_PART_NUMBER } from "./_rules.ts";
import { BufferedMultipartWriter, type MultipartWriterOptions } from "./multipart_writer.ts";
import type { ObjectStore, PutResult } from "./types.ts";

/** Options of {@link uploadFile}: those of the multipart writer. */
export type UploadFileOptions = MultipartWriterOptions;

/**
 * Uploads the file at `path` to `key`.
 * Files of at most `partSize` bytes go as one `put`; larger ones as a multipart upload whose
 * part size grows past `partSize` only when the file would otherwise need more than 10,000 parts.
 * @param store where the object goes
 * @param key the object's key
 * @param path the local file; it must not change during the upload
 * @returns `Created`, or `AlreadyExists` with `ifAbsent` when the key was taken
 * @throws {StoreError} from the store (the multipart upload is aborted first)
 * @throws {Error} when the file cannot be read or shrinks while being read
 * @example
 * await uploadFile(store, key, "/data/…/00000000000000000000.log", {
 *   partSize: 16 * MiB, concurrency: 4, ifAbsent: true, metadata,
 *   onUploadId: (id) => journal.recordUpload(segment, id),
 * });
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
      options.signal?.throwIfAborted();
      const result = await (options.run ?? ((op) => op()))((signal) =>
        store.put(key, body, {
          ifAbsent: options.ifAbsent,
          metadata: options.metadata,
          contentType: options.contentType,
          signal: signal && options.signal
            ? AbortSignal.any([signal, options.signal])
            : signal ?? options.signal,
        })
      );
      options.onProgress?.(size);
      return result;
    }
    const partSize = Math.max(options.partSize, Math.ceil(size / MAX_PART_NUMBER));
    const writer = new BufferedMultipartWriter(store, key, { ...options, partSize });
    try {
      for (let position = 0; position < size; position += partSize) {
        const part = new Uint8Array(Math.min(partSize, size - position));
        await readFully(file, part, position, path);
        await writer.writePart(part);
      }
      return await writer.complete();
    } catch (err) {
      await writer.abort().catch(() => {});
      throw err;
    }
  } finally {
    await file.close();
  }
}

async function readFully(
  file: {
    read(
      buffer: Uint8Array,
      offset: number,
      length: number,
      position: number,
    ): Promise<{ bytesRead: number }>;
  },
  target: Uint8Array,
  position: number,
  path: string,
): Promise<void> {
  let done = 0;
  while (done < target.byteLength) {
    const { bytesRead } = await file.read(target, done, target.byteLength - done, position + done);
    if (bytesRead === 0) {
      throw new Error(`${path} shrank while uploading: no bytes at offset ${position + done}`);
    }
    done += bytesRead;
  }
}
