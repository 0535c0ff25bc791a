// The `tierd` command line: parses the subcommand and hands off to its module.
// Exit codes: 0 success, 1 the operation failed, 2 bad usage or bad configuration.
import { ConfigError } from "../config/error.ts";
import { StateDirLocked } from "../runtime/state_lock.ts";
import { scrubProcessSecrets } from "../log.ts";
import { VERSION } from "../version.ts";
import { UsageError } from "./args.ts";
import { genCommand } from "./gen.ts";
import { configCommand } from "./config_cmd.ts";
import { runCommand } from "./run.ts";
import { probeCommand } from "./probe.ts";
import { lsCommand } from "./ls.ts";
import { readCommand } from "./read.ts";
import { restoreCommand } from "./restore.ts";

/** The help text `tierd help` prints, and usage errors end with. */
export const USAGE = `tierd ${VERSION} — tiered-storage agent for Apache Iggy

usage:
  tierd run [--config F] [--once]        run the agent (--once: one full pass, then exit)
  tierd probe [--config F]               check the object store (one-key LIST)
  tierd config check|show [--config F]   validate / print the effective config (secrets redacted)
  tierd gen --format iggy-0.8|iggy-0.9 --data-dir D --stream S --topic T --partition P
            --messages N --segment-size SIZE [--payload-size B] [--seed N]
                                         write byte-exact Iggy segments (demos, tests, benchmarks)
  tierd ls [--config F] [--stream S --topic T --partition P]
                                         segments with their state, location and offsets
  tierd read [--config F] --stream S --topic T --partition P (--offset N | --timestamp T)
            [--max-bytes M] [--json]     read records (raw bytes to stdout, or decoded JSON)
  tierd restore [--config F] [--stream S --topic T --partition P] [--cluster-id C] [--with-data]
                                         rebuild state_dir from the bucket on a new host
                                         (--with-data: also the broker's partition dirs)

The default config file is ./tierd.toml (see tierd.example.toml).
`;

/** Runs the CLI with `args` (without the program name) and returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  try {
    switch (command) {
      case "run":
        return await runCommand(rest);
      case "probe":
        return await probeCommand(rest);
      case "config":
        return await configCommand(rest);
      case "gen":
        return await genCommand(rest);
      case "ls":
        return await lsCommand(rest);
      case "read":
        return await readCommand(rest);
      case "restore":
        return await restoreCommand(rest);
      case "--version":
      case "version":
        console.log(VERSION);
        return 0;
      case undefined:
      case "help":
      case "--help":
      case "-h":
        console.log(USAGE);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`tierd: ${err.message}\n\n${USAGE}`);
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
  }
}
