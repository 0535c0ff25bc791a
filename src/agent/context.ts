// What the agent is started with: its config (and where it came from, for SIGHUP), a logger
// that scrubs secrets, and the scrubbing itself for lines printed outside the logger.
import type { Config } from "../config/schema.ts";
import type { Logger } from "../log.ts";

/** The agent's config, logger and secret scrubbing (the CLI's command context is one). */
export interface AgentContext {
  /** The config file, read again on SIGHUP. */
  readonly configPath: string;
  /** The config in force (SIGHUP changes the parts that apply live, in place). */
  readonly config: Config;
  readonly logger: Logger;
  /** Scrubs every secret known now from a text printed outside the logger. */
  scrub(text: string): string;
}
