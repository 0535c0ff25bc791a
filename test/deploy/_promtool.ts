// Prometheus' promtool for the deploy checks: `TIERD_PROMTOOL_BIN`, `promtool` on PATH, or
// `~/.cache/tierd/bin/promtool` (scripts/install-test-servers.sh builds it). Missing: the test
// is skipped with one loud line, or fails under `CI=true`.
import { join } from "node:path";
import { cacheDir, isExecutable, onPath, unavailable } from "../fixtures/_server.ts";

/** promtool's path, or undefined (after a loud line) when it is not installed outside CI. */
export async function findPromtool(suite: string): Promise<string | undefined> {
  const candidates = [
    Deno.env.get("TIERD_PROMTOOL_BIN"),
    await onPath("promtool"),
    join(cacheDir(), "bin", "promtool"),
  ];
  for (const c of candidates) if (c && await isExecutable(c)) return c;
  return unavailable(
    suite,
    "promtool is not installed (bash scripts/install-test-servers.sh builds it)",
  );
}

/** Runs promtool with `args` (and `stdin`), returning its exit code and output. */
export async function promtool(
  bin: string,
  args: string[],
  o: { stdin?: string; cwd?: string } = {},
): Promise<{ code: number; output: string }> {
  const child = new Deno.Command(bin, {
    args,
    cwd: o.cwd,
    stdin: o.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (o.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(o.stdin));
    await w.close();
  }
  const out = await child.output();
  const d = new TextDecoder();
  return { code: out.code, output: d.decode(out.stdout) + d.decode(out.stderr) };
}
