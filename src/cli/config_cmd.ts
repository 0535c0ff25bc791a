// `tierd config check|show`: validate the config; print it with secrets redacted. `check` also
// looks at this host's directories (the data dir exists and holds streams/, nothing tierd
// writes resolves into it) and warns about what `tierd run` would refuse, without failing: the
// file may be checked on another machine than the broker's.
import { absentTopics, hostIssues } from "../config/host.ts";
import { formatIssue } from "../config/error.ts";
import { renderConfig } from "../config/redact.ts";
import { type Command, CONFIG_FLAG, type ParsedArgs, UsageError } from "./args.ts";
import { loadContext } from "./context.ts";

/** `tierd config check|show [--config F]`. */
export const configCommand: Command = {
  spec: {
    name: "config",
    summary: "validate the config (check) or print it with defaults, secrets redacted (show)",
    synopsis: ["check|show", "[--config F]"],
    description: "check: loads the config as `tierd run` does and prints one ok line, or every\n" +
      "problem (exit 2), each naming its key path and value. It also warns, on stderr, about\n" +
      "directories of this host that `tierd run` would refuse (agent.data_dir missing or\n" +
      "without streams/), still exiting 0: the file itself is fine.\n\n" +
      'show: prints the effective config as TOML, every default filled in, secrets as "***".',
    flags: { config: CONFIG_FLAG },
    positionals: true,
  },
  run: config,
};

async function config({ values, positionals }: ParsedArgs): Promise<number> {
  const [action, ...extra] = positionals;
  if (action !== "check" && action !== "show") {
    throw new UsageError(`config needs "check" or "show", got ${JSON.stringify(action ?? "")}`);
  }
  if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
  const ctx = await loadContext(values.config);
  if (action === "show") {
    console.log(renderConfig(ctx.config));
    return 0;
  }
  const topics = ctx.config.topic.filter((t) => t.tiered_storage).length;
  console.log(
    `${ctx.configPath}: ok (backend ${ctx.config.tiered_storage.backend}, ` +
      `tiering ${ctx.config.tiered_storage.enabled ? "enabled" : "disabled"}, ` +
      `${topics} tiered topic${topics === 1 ? "" : "s"})`,
  );
  if (!ctx.config.tiered_storage.enabled) {
    console.error(
      `tierd: warning: ${ctx.configPath}: tiered_storage.enabled is false (tierd run refuses to ` +
        "start; set it to true)",
    );
  }
  for (const { entry, dir } of await absentTopics(ctx.config)) {
    console.error(
      `tierd: warning: ${entry}: the broker has no such topic (no ${dir}); nothing is tiered ` +
        "for it until it does — check the ids if it should exist",
    );
  }
  for (const issue of await hostIssues(ctx.config)) {
    console.error(
      `tierd: warning: ${formatIssue(ctx.configPath, issue)} (tierd run refuses to start)`,
    );
  }
  return 0;
}
