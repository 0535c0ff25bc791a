// The config module: read `tierd.toml`, check it, and show it without its secrets.
export { ConfigError, type ConfigIssue } from "./error.ts";
export { type ListenAddress, parseListen } from "./listen.ts";
export { type Env, loadConfig, parseConfig } from "./load.ts";
export { redactedConfig, renderConfig, secretValues } from "./redact.ts";
export { ALL_SERVICES, checkRules, type RuleViolation, type Service } from "./rules.ts";
export {
  type AgentConfig,
  type AzureConfig,
  type BackendName,
  type BrokerConfig,
  type CacheConfig,
  type Config,
  configSchema,
  type EvictVia,
  type FsConfig,
  type GcsConfig,
  type HousekeepingConfig,
  type LogLevel,
  resolveEvictVia,
  type S3Config,
  type SegmentFormat,
  type TieredStorageConfig,
  type TopicConfig,
} from "./schema.ts";
export { REDACTED, SECRET_FIELDS, secretAt, type SecretField } from "./secrets.ts";
export { formatDuration, formatSize, parseDuration, parseSize, UnitError } from "./units.ts";
