// Small helpers shared by tests: temporary directories that clean up after themselves.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Creates a fresh temporary directory; `cleanup()` removes it. */
export async function tempDir(
  label = "tierd",
): Promise<{ path: string; cleanup(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `${label}-`));
  return { path, cleanup: () => rm(path, { recursive: true, force: true }) };
}
