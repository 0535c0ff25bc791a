// A process that holds a file open until killed: how a running broker looks from /proc (open for
// writing, as Iggy holds its active segment), or a reader (a backup agent, `du`, `tail`).
/**
 * A child process holding `path` open until killed: for appending (as a broker holds its active
 * segment), or read-only (`mode: "read"`, as a backup agent does).
 */
export async function holdOpen(
  path: string,
  mode: "write" | "read" = "write",
): Promise<Deno.ChildProcess> {
  const open = mode === "write" ? 'exec 3>>"$1"' : 'exec 3<"$1"';
  const child = new Deno.Command("sh", {
    args: ["-c", `${open}; echo ready; exec sleep 300`, "holder", path],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.getReader();
  await reader.read(); // "ready": the file is open
  reader.releaseLock();
  await child.stdout.cancel();
  // Then `sh` becomes `sleep` (same process, the file still open): wait for the new name.
  const comm = `/proc/${child.pid}/comm`;
  for (let i = 0; i < 200; i++) {
    const name = await Deno.readTextFile(comm).then((t) => t.trim(), () => "sleep");
    if (name === "sleep") break;
    await new Promise((r) => setTimeout(r, 10));
  }
  return child;
}

/** Kills a holder started by {@link holdOpen} and waits for it. */
export async function release(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGKILL");
  } catch {
    // already gone
  }
  await child.status;
}
