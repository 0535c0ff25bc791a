// Checks of a loaded config against this host's file system, made when the agent starts (`run`,
// `run --once`) and reported by `config check`: the broker's data directory exists and holds
// `streams/`, no directory tierd writes resolves (through symlinks) into it, and none of tierd's
// own directories resolves to where wiping another would wipe it. The file alone cannot tell
// these; `rules.ts` already refused the same mistakes written as plain paths.
import { realpath, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { ConfigError, type ConfigIssue } from "./error.ts";
import { OWN_DIR_NAMES, type OwnDir, ownDirClashes, ownDirs, within } from "./rules.ts";
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
  const written = ownDirs(config);
  const real: Partial<Record<OwnDir, string>> = {};
  for (const [dir, path] of Object.entries(written) as [OwnDir, string][]) {
    real[dir] = await resolved(path);
  }

  const found = await kind(dataDir);
  if (found === "missing") {
    at(
      "agent.data_dir",
      dataDir,
      "expected the broker's data directory (Iggy local_data); it does not exist",
    );
  } else if (found === "other") {
    at("agent.data_dir", dataDir, "expected the broker's data directory; it is not a directory");
  } else {
    if (await kind(join(dataDir, STREAMS)) !== "dir") {
      at(
        "agent.data_dir",
        dataDir,
        `expected the broker's data directory (Iggy local_data); it holds no ${STREAMS}/ ` +
          "directory (not Iggy's data directory, or the broker has not started yet)",
      );
    }
    const realData = await resolved(dataDir);
    for (const [dir, path] of Object.entries(real) as [OwnDir, string][]) {
      if (within(path, realData)) {
        at(
          OWN_DIR_NAMES[dir],
          written[dir] ?? "",
          `expected a directory outside agent.data_dir; through symlinks it is ${path}, ` +
            `inside ${realData}: tierd never writes into the broker's data`,
        );
      }
    }
  }

  // Independent of the data dir: checked even when it is missing.
  for (const { inner, outer, outerPath, same, why } of ownDirClashes(real)) {
    at(
      OWN_DIR_NAMES[inner],
      written[inner] ?? "",
      same
        ? `expected a directory of its own, not ${OWN_DIR_NAMES[outer]} itself; through symlinks ` +
          `both are ${outerPath}: ${why}`
        : `expected a directory outside ${OWN_DIR_NAMES[outer]}; through symlinks it is ` +
          `${real[inner]}, inside ${outerPath}: ${why}`,
    );
  }
  return issues;
}

/**
 * The `[[topic]]` entries naming a stream or topic the broker's data directory does not hold
 * (yet): nothing is tiered for them until the broker creates it, which is fine for a topic about
 * to be created and a typo otherwise — so it is said, not refused.
 *
 * @param config a loaded config
 * @returns each such entry (`topic[i] (stream s, topic t)`) and the directory looked for
 */
export async function absentTopics(config: Config): Promise<{ entry: string; dir: string }[]> {
  const out: { entry: string; dir: string }[] = [];
  for (const [i, t] of config.topic.entries()) {
    if (!t.tiered_storage) continue;
    const dir = join(config.agent.data_dir, STREAMS, String(t.stream), "topics", String(t.topic));
    if (await kind(dir) === "dir") continue;
    out.push({ entry: `topic[${i}] (stream ${t.stream}, topic ${t.topic})`, dir });
  }
  return out;
}

/**
 * Refuses to go on when {@link hostIssues} finds anything (the agent would otherwise idle over
 * an empty or wrong directory, write into the broker's, or keep a directory where wiping another
 * of its own would wipe it).
 *
 * @param config a loaded config
 * @param source the config file, named in the error
 * @throws {ConfigError} listing every problem (exit code 2)
 */
export async function requireHost(config: Config, source: string): Promise<void> {
  const issues = await hostIssues(config);
  if (issues.length > 0) throw new ConfigError(source, issues);
}
