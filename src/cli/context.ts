// Loads what most commands share: the config, a logger that scrubs its secrets (the config's and,
// once the store is open, every credential its sources handed out), the store.
import { loadConfig } from "../config/load.ts";
import { secretValues } from "../config/redact.ts";
import type { Service } from "../config/rules.ts";
import type { Config } from "../config/schema.ts";
import { initHashes } from "../hash.ts";
import { createLogger, type Logger, registerProcessSecrets, scrubSecrets } from "../log.ts";
import { writeAboveProgress } from "./progress.ts";
import { type OpenedStore, openStore } from "../store.ts";
import type { CredentialDeps } from "../store_credentials.ts";

/** The default config path. */
export const DEFAULT_CONFIG = "tierd.toml";

export interface CommandContext {
  configPath: string;
  config: Config;
  logger: Logger;
  /** Scrubs every secret known now (the config's, the store credentials') from a text. */
  scrub(text: string): string;
  /** Adds a source of secrets (the opened store's credentials) to the logger and `scrub`. */
  addSecrets(secrets: () => string[]): void;
}

/**
 * Loads the config at `--config` (or ./tierd.toml) and a logger for it.
 *
 * @param configFlag the `--config` value
 * @param options.uses the services the command talks to: the config is checked for those only
 *   (`tierd ls` needs neither the broker's password nor the store's keys) @default ALL_SERVICES
 * @throws {ConfigError} when the config cannot be read or is invalid
 */
export async function loadContext(
  configFlag: unknown,
  options: { uses?: readonly Service[] } = {},
): Promise<CommandContext> {
  const configPath = typeof configFlag === "string" && configFlag !== ""
    ? configFlag
    : DEFAULT_CONFIG;
  const config = await loadConfig(configPath, undefined, options);
  await initHashes();
  const fixed = secretValues(config);
  const dynamic: (() => string[])[] = [];
  const secrets = () => [...fixed, ...dynamic.flatMap((f) => f())];
  // Log lines go above a terminal progress line, never onto it.
  const logger = createLogger({
    level: config.agent.log_level,
    secrets,
    write: writeAboveProgress,
  });
  registerProcessSecrets(secrets);
  return {
    configPath,
    config,
    logger,
    scrub: (text) => scrubSecrets(text, secrets()),
    addSecrets: (f) => void dynamic.push(f),
  };
}

/** Opens the configured store and adds its credentials' secrets to the context's scrubbing. */
export async function storeFor(
  ctx: CommandContext,
  deps: CredentialDeps = {},
): Promise<OpenedStore> {
  const opened = await openStore(ctx.config, { logger: ctx.logger, ...deps });
  ctx.addSecrets(opened.secrets);
  return opened;
}
