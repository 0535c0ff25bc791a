// Small helpers shared by tests: temporary directories that clean up after themselves.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Creates a fresh temporary directory; `cleanup()` removes it. */
export async function tempDir(
  label = "tierd",
): Promise<{ path: string; cleanup(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `${label}-`));
  return { path, cleanup: () => rm(path, { recursive: true, force: true }) };
}

/** The repository's root directory (absolute), for scripts that import its modules. */
export const REPO_ROOT = new URL("..", import.meta.url).pathname;

/**
 * Runs `source` as a script under Bun (the compiled binary's runtime), from a file in `dir`,
 * with `args`; a script may import the repository's modules by absolute path ({@link REPO_ROOT}).
 * Kept out of the test tree, so `deno check` never sees its `bun:` imports.
 *
 * @returns what the script printed
 * @throws when it exits with an error (its stderr in the message)
 */
export async function runBunScript(
  dir: string,
  source: string,
  args: readonly string[] = [],
): Promise<string> {
  const script = join(dir, "script.ts");
  await writeFile(script, source);
  const out = await new Deno.Command("npx", {
    args: ["-y", "bun@1", "run", script, ...args],
    cwd: REPO_ROOT,
    stdin: "null",
  }).output();
  if (out.code !== 0) {
    throw new Error(`bun ${script} exited ${out.code}: ${new TextDecoder().decode(out.stderr)}`);
  }
  return new TextDecoder().decode(out.stdout);
}

/**
 * Script text for {@link runBunScript}: defines `directIoSupported(dir)`, whether the file
 * system of `dir` takes O_DIRECT at all, and `pageAligned(length, shift)`, a view of `length`
 * bytes starting `shift` bytes past a page boundary of memory (Bun's `ptr` tells where).
 */
export const BUN_DIRECT_IO = `
import { ptr } from "bun:ffi";
import { closeSync, constants, openSync } from "node:fs";
function pageAligned(length, shift = 0) {
  const raw = new Uint8Array(length + 8192);
  const at = (4096 - (ptr(raw) % 4096)) % 4096 + shift;
  return raw.subarray(at, at + length);
}
function directIoSupported(dir) {
  try {
    closeSync(openSync(dir + "/probe", constants.O_WRONLY | constants.O_CREAT | constants.O_DIRECT));
    return true;
  } catch (err) {
    if (err.code !== "EINVAL") throw err;
    return false;
  }
}
`;
