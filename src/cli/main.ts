// The `tierd` command line: finds the subcommand, parses its flags from its spec, and hands off
// to its module. `--help`/`-h` on any command prints that command's usage and does nothing else.
// Exit codes: 0 success, 1 the operation failed, 2 bad usage or bad configuration.
import { stopFetchWorkers } from "../../providers/fetch_workers.ts";
import { ConfigError } from "../config/error.ts";
import { StateDirLocked } from "../runtime/state_lock.ts";
import { scrubProcessSecrets } from "../log.ts";
import { VERSION } from "../version.ts";
import { type Command, commandUsage, parseCommand, UsageError } from "./args.ts";
import { configCommand } from "./config_cmd.ts";
import { genCommand } from "./gen.ts";
import { lsCommand } from "./ls.ts";
import { planCommand } from "./plan.ts";
import { probeCommand } from "./probe.ts";
import { readCommand } from "./read.ts";
import { restoreCommand } from "./restore.ts";
import { runCommand } from "./run.ts";
import { verifyCommand } from "./verify.ts";

/** Every command, in the order `tierd --help` lists them. */
export const COMMANDS: readonly Command[] = [
  runCommand,
  probeCommand,
  configCommand,
  genCommand,
  lsCommand,
  verifyCommand,
  planCommand,
  readCommand,
  restoreCommand,
];

/** The help text `tierd --help` prints, and an unknown command ends with. */
export function mainUsage(commands: readonly Command[] = COMMANDS): string {
  const width = Math.max(...commands.map((c) => c.spec.name.length), "version".length);
  const line = (name: string, summary: string) => `  ${name.padEnd(width)}  ${summary}`;
  return [
    `tierd ${VERSION} — tiered-storage agent for Apache Iggy`,
    "",
    "usage: tierd <command> [flags]     tierd <command> --help lists a command's flags",
    "",
    "commands:",
    ...commands.map((c) => line(c.spec.name, c.spec.summary)),
    line("version", "print the version"),
    line("help", "this text; `tierd help <command>` is `tierd <command> --help`"),
    "",
    "The default config file is ./tierd.toml (see tierd.example.toml). Exit codes: 0 success,",
    "1 the operation failed, 2 bad usage or bad configuration.",
    "",
  ].join("\n");
}

/**
 * Runs the CLI and returns the exit code.
 *
 * @param args the arguments without the program name
 * @param commands the command table (tests pass their own)
 */
export async function main(
  args: string[],
  commands: readonly Command[] = COMMANDS,
): Promise<number> {
  const [name, ...rest] = args;
  const find = (n: string | undefined) => commands.find((c) => c.spec.name === n);
  switch (name) {
    case "--version":
    case "version":
      console.log(VERSION);
      return 0;
    case undefined:
      console.error(mainUsage(commands));
      return 2;
    case "help":
    case "--help":
    case "-h": {
      const topic = find(rest[0]);
      console.log(topic ? commandUsage(topic.spec) : mainUsage(commands));
      return rest[0] === undefined || topic ? 0 : 2;
    }
  }
  const command = find(name);
  if (!command) {
    console.error(`tierd: unknown command ${JSON.stringify(name)}\n\n${mainUsage(commands)}`);
    return 2;
  }
  try {
    const parsed = parseCommand(command.spec, rest);
    if (parsed === "help") {
      console.log(commandUsage(command.spec));
      return 0;
    }
    return await command.run(parsed);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`tierd ${name}: ${err.message}\n\n${commandUsage(command.spec)}`);
      return 2;
    }
    if (err instanceof ConfigError || err instanceof StateDirLocked) {
      console.error(scrubProcessSecrets(`tierd: ${err.message}`));
      return 2;
    }
    console.error(
      scrubProcessSecrets(`tierd: ${err instanceof Error ? err.message : String(err)}`),
    );
    return 1;
  } finally {
    stopFetchWorkers();
  }
}
