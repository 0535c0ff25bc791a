// Builds the single-file binary dist/tierd with `bun build --compile` (Bun from npm).
// Online, `deno compile -A --output dist/tierd main.ts` builds an equivalent Deno binary;
// it needs a runtime download that this project's build machines cannot reach.
import { spawnSync } from "node:child_process";
import { dirname, fromFileUrl } from "./_paths.ts";

const root = dirname(dirname(fromFileUrl(import.meta.url)));
const out = process.argv[2] ?? "dist/tierd";

/** Runs a command in the repo root, streaming its output; exits on failure. */
function run(cmd: string, args: string[], env: Record<string, string> = {}): void {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", env: { ...process.env, ...env } });
  if (r.status !== 0) {
    console.error(`compile: ${cmd} ${args.join(" ")} failed (exit ${r.status})`);
    process.exit(r.status ?? 1);
  }
}

// Bun resolves the npm packages through node_modules: the ones main.ts imports, at the versions
// deno.lock pins, as `deno task tierd` installs them (deno.json) — not the test tools.
run(process.execPath, ["install", "--entrypoint", "main.ts"], {
  DENO_UNSTABLE_NPM_LAZY_CACHING: "1",
});
// The store fetch worker (providers/fetch_workers.ts) is an entry point of its own: a worker
// thread loads it by path, which the bundle of main.ts would not contain.
const entries = ["main.ts", "providers/fetch_worker.ts"];
run("npx", ["-y", "bun@1", "build", "--compile", "--minify", "--outfile", out, ...entries]);
console.error(`compile: built ${out}`);
