// Running the CLI from tests: in-process through `main()` with stdout and stderr captured, or as
// a child `deno run -A main.ts …` (for commands that hold the state dir lock for the life of
// their process, like `run`).
import { fileURLToPath } from "node:url";
import { COMMANDS, main } from "../../src/cli/main.ts";
import type { Command } from "../../src/cli/args.ts";

/** What one CLI run printed and returned. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

const MAIN = fileURLToPath(new URL("../../main.ts", import.meta.url));

/** Runs `main(args)` in this process, capturing console output. */
export async function cli(
  args: string[],
  commands: readonly Command[] = COMMANDS,
): Promise<CliResult> {
  const out: string[] = [];
  const err: string[] = [];
  const { log, error } = console;
  console.log = (...a: unknown[]) => void out.push(a.join(" ") + "\n");
  console.error = (...a: unknown[]) => void err.push(a.join(" ") + "\n");
  try {
    const code = await main(args, commands);
    return { code, stdout: out.join(""), stderr: err.join("") };
  } finally {
    console.log = log;
    console.error = error;
  }
}

/** Runs `deno run -A main.ts ...args` as a child process. */
export async function cliProcess(
  args: string[],
  env: Record<string, string> = {},
): Promise<CliResult> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", MAIN, ...args],
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}
