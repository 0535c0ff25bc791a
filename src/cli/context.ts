// Loads what most commands share: the config, a logger that scrubs its secrets, the store.
import { loadConfig } from "../config/load.ts";
import { secretValues } from "../config/redact.ts";
import type { Config } from "../config/schema.ts";
import { initHashes } from "../hash.ts";
import { createLogger, type Logger } from "../log.ts";
import { type OpenedStore, openStore } from "../store.ts";

/** The default config path. */
export const DEFAULT_CONFIG = "tierd.toml";

export interface CommandContext {
  configPath: string;
  config: Config;
  logger: Logger;
}

/** Loads the config at `--config` (or ./tierd.toml) and a logger for it. */
export async function loadContext(configFlag: unknown): Promise<CommandContext> {
  const configPath = typeof configFlag === "string" && configFlag !== ""
    ? configFlag
    : DEFAULT_CONFIG;
  const config = await loadConfig(configPath);
  await initHashes();
  const logger = createLogger({ level: config.agent.log_level, secrets: secretValues(config) });
  return { configPath, config, logger };
}

/** Opens the configured store; a config with tiering disabled is a usage problem. */
export function storeFor(ctx: CommandContext): Promise<OpenedStore> {
  return openStore(ctx.config);
}
