// Writing a whole new file without holding up the event loop. Deno runs `node:fs` writes on
// its main thread (an 8 MiB chunk file stalled every request for ~15 ms), while its own
// `Deno.FsFile` writes, like Bun's `node:fs`, go to a worker thread; so under Deno the file is
// written through `Deno.open`, elsewhere through `node:fs/promises`.
//
// A file the process will not read back soon (a cache chunk, whose reads right after it landed
// are answered from memory) can be written with direct I/O: the disk takes the bytes from the
// process's own memory, and the page cache takes no copy. Where first touching a free page is
// dear (a VM that hands the memory the guest frees back to its host), a Bun script writing a GiB
// of new 8 MiB files through the page cache took 3.6–6.2 CPU s on this project's 2-core bench
// machine, and 0.25 with direct I/O (docs/architecture.md, "The chunk cache").
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { writeAll } from "./bytes.ts";

/** Bytes direct I/O needs file offsets, lengths and memory aligned to (covers 512-byte disks). */
export const DIRECT_IO_ALIGN = 4096;

/** Linux's O_DIRECT, where the runtime's `node:fs` has it (Bun, Node; not Deno: see above). */
const O_DIRECT: number | undefined = (constants as { O_DIRECT?: number }).O_DIRECT;

/** The part of Deno's file API used here. */
interface DenoFiles {
  open(
    path: string,
    options: { write: true; create: true; truncate: true },
  ): Promise<{ write(p: Uint8Array): Promise<number>; close(): void }>;
}

const deno = (globalThis as { Deno?: DenoFiles }).Deno;

/**
 * Creates (or truncates) `path` and writes `parts` to it, one after another. Not fsynced.
 * @throws the runtime's file-system error (e.g. `ENOSPC`); the file may be left part-written
 */
export async function writeNewFile(path: string, parts: readonly Uint8Array[]): Promise<void> {
  if (deno) {
    const file = await deno.open(path, { write: true, create: true, truncate: true });
    try {
      for (const part of parts) {
        for (let done = 0; done < part.length;) done += await file.write(part.subarray(done));
      }
    } finally {
      file.close();
    }
    return;
  }
  const fh = await open(path, "w");
  try {
    for (const part of parts) await writeAll(fh, part);
  } finally {
    await fh.close();
  }
}

/**
 * How {@link writeNewFileDirect} wrote a file: `direct` when the page-aligned bulk of its body
 * went around the page cache; `buffered` when it all went through it (a body shorter than a
 * page, a body whose memory is not page-aligned, or a runtime without direct I/O);
 * `unsupported` when the file system refused direct I/O (then the file was written buffered,
 * and the caller should stop asking).
 */
export type DirectWriteMode = "direct" | "buffered" | "unsupported";

/**
 * Creates (or truncates) `path` holding `head` then `body`, the page-aligned bulk of `body` written
 * with direct I/O (O_DIRECT) and the rest (`head`, the body's last partial page) through the page
 * cache. `head.length` must be a multiple of {@linkcode DIRECT_IO_ALIGN}, so the body starts on a
 * page boundary. The bytes on disk are the same whichever way they went. Not fsynced.
 *
 * @param path the file to write
 * @param head the bytes before the body (whole pages)
 * @param body the bulk of the file; direct I/O needs its memory page-aligned, and a body whose
 *   memory is not (the kernel answers EINVAL) is written through the page cache instead
 * @returns how the body was written
 * @throws the runtime's file-system error (e.g. `ENOSPC`); the file may be left part-written
 */
export async function writeNewFileDirect(
  path: string,
  head: Uint8Array,
  body: Uint8Array,
): Promise<DirectWriteMode> {
  if (head.length % DIRECT_IO_ALIGN !== 0) {
    throw new RangeError(`head of ${head.length} bytes is not whole pages of ${DIRECT_IO_ALIGN}`);
  }
  const bulk = body.length - body.length % DIRECT_IO_ALIGN;
  if (deno || O_DIRECT === undefined || bulk === 0) {
    await writeNewFile(path, [head, body]);
    return "buffered";
  }
  let direct;
  try {
    direct = await open(
      path,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | O_DIRECT,
    );
  } catch (err) {
    if (!isInvalid(err)) throw err;
    await writeNewFile(path, [head, body]);
    return "unsupported";
  }
  let refused = false;
  try {
    await writeAll(direct, body.subarray(0, bulk), head.length);
  } catch (err) {
    if (!isInvalid(err)) throw err;
    refused = true; // the body's memory is not page-aligned: all of it goes the other way
  } finally {
    await direct.close();
  }
  if (refused) {
    await writeNewFile(path, [head, body]);
    return "buffered";
  }
  const rest = await open(path, "r+");
  try {
    await writeAll(rest, head, 0);
    await writeAll(rest, body.subarray(bulk), head.length + bulk);
  } finally {
    await rest.close();
  }
  return "direct";
}

function isInvalid(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === "EINVAL";
}
