// Checks of a loaded config against this host's file system, made when the agent starts (`run`,
// `run --once`) and reported by `config check`: the broker's data directory exists and holds
// `streams/`, and no directory tierd writes resolves (through symlinks) into it. The file alone
// cannot tell these; `rules.ts` already refused the same mistakes written as plain paths.
import { realpath, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { ConfigError, type ConfigIssue } from "./error.ts";
import { within } from "./rules.ts";
import type { Config } from "./schema.ts";

/** The directory an Iggy data directory holds its streams in. */
const STREAMS = "streams";

async function kind(path: string): Promise<"dir" | "other" | "missing"> {
  try {
    return (await stat(path)).isDirectory() ? "dir" : "other";
  } catch {
    return "missing";
  }
}

/** The path with symlinks resolved, as far up as it exists (the rest appended as written). */
async function resolved(path: string): Promise<string> {
  const rest: string[] = [];
  let head = path;
  for (;;) {
    try {
      return join(await realpath(head), ...rest);
    } catch {
      const parent = dirname(head);
      if (parent === head) return path;
      rest.unshift(basename(head));
      head = parent;
    }
  }
}

/**
 * What is wrong with the config's directories on this host.
 *
 * @param config a loaded config (paths absolute)
 * @returns the problems, each naming its key and the absolute path; empty when the agent may start
 */
export async function hostIssues(config: Config): Promise<ConfigIssue[]> {
  const issues: ConfigIssue[] = [];
  const dataDir = config.agent.data_dir;
  const at = (path: string, value: string, message: string) =>
    issues.push({ path, value: JSON.stringify(value), message });
  const found = await kind(dataDir);
  if (found === "missing") {
    at(
      "agent.data_dir",
      dataDir,
      "expected the broker's data directory (Iggy local_data); it does not exist",
    );
    return issues;
  }
  if (found === "other") {
    at("agent.data_dir", dataDir, "expected the broker's data directory; it is not a directory");
    return issues;
  }
  if (await kind(join(dataDir, STREAMS)) !== "dir") {
    at(
      "agent.data_dir",
      dataDir,
      `expected the broker's data directory (Iggy local_data); it holds no ${STREAMS}/ ` +
        "directory (not Iggy's data directory, or the broker has not started yet)",
    );
  }
  const realData = await resolved(dataDir);
  const mine: [string, string][] = [
    ["agent.state_dir", config.agent.state_dir],
    ["tiered_storage.cache.path", config.tiered_storage.cache.path],
  ];
  if (config.tiered_storage.backend === "fs" && config.tiered_storage.fs.path !== "") {
    mine.push(["tiered_storage.fs.path", config.tiered_storage.fs.path]);
  }
  for (const [key, path] of mine) {
    const real = await resolved(path);
    if (within(real, realData)) {
      at(
        key,
        path,
        `expected a directory outside agent.data_dir; through symlinks it is ${real}, inside ` +
          `${realData}: tierd never writes into the broker's data`,
      );
    }
  }
  return issues;
}

/**
 * Refuses to go on when {@link hostIssues} finds anything (the agent would otherwise idle over
 * an empty or wrong directory, or write into the broker's).
 *
 * @param config a loaded config
 * @param source the config file, named in the error
 * @throws {ConfigError} listing every problem (exit code 2)
 */
export async function requireHost(config: Config, source: string): Promise<void> {
  const issues = await hostIssues(config);
  if (issues.length > 0) throw new ConfigError(source, issues);
}
