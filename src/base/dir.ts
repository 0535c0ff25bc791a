// Reading a folder that may not exist yet (a partition's state directory before its first
// marker, a data directory before the broker made it).
import { readdir } from "node:fs/promises";

/** The names in `dir`, unsorted; none when `dir` does not exist. */
export async function namesIn(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}
