// Writing a whole new file without holding up the event loop. Deno runs `node:fs` writes on
// its main thread (an 8 MiB chunk file stalled every request for ~15 ms), while its own
// `Deno.FsFile` writes, like Bun's `node:fs`, go to a worker thread; so under Deno the file is
// written through `Deno.open`, elsewhere through `node:fs/promises`.
import { open } from "node:fs/promises";
import { writeAll } from "./bytes.ts";

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
