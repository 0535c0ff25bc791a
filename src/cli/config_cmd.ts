// `tierd config check|show`: validate the config; print it with secrets redacted.
import { renderConfig } from "../config/redact.ts";
import { parseFlags, UsageError } from "./args.ts";
import { loadContext } from "./context.ts";

/** Runs `tierd config check|show` and returns the exit code. */
export async function configCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(args, {}, true);
  const [action] = positionals;
  if (action !== "check" && action !== "show") {
    throw new UsageError(`config needs "check" or "show", got ${JSON.stringify(action ?? "")}`);
  }
  const ctx = await loadContext(values.config);
  if (action === "check") {
    const topics = ctx.config.topic.filter((t) => t.tiered_storage).length;
    console.log(
      `${ctx.configPath}: ok (backend ${ctx.config.tiered_storage.backend}, ` +
        `tiering ${ctx.config.tiered_storage.enabled ? "enabled" : "disabled"}, ` +
        `${topics} tiered topic${topics === 1 ? "" : "s"})`,
    );
  } else {
    console.log(renderConfig(ctx.config));
  }
  return 0;
}
