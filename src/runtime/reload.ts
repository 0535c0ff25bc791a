// SIGHUP: re-read the config file and apply, to the running agent, the settings that are safe to
// change live — each `[[topic]]`'s retention (`local_retention_age`, `local_retention_size`,
// `message_expiry`, `max_topic_size`) and the `tiered_storage` keys read afresh on every pass or
// housekeeping run — and refuse (log, keep the old value) every other change: those are baked
// into the store, the cache, the worker's buffers or the set of tiered partitions, and need a
// restart. A refused change never stops the accepted ones. No partition's state is touched:
// the worker reads the live config object on its next pass, which is changed in place.
import { loadConfig } from "../config/load.ts";
import type { Config, TopicConfig } from "../config/schema.ts";
import type { Logger } from "../log.ts";

/** `[[topic]]` keys a reload applies. */
export const LIVE_TOPIC_KEYS = [
  "local_retention_age",
  "local_retention_size",
  "message_expiry",
  "max_topic_size",
] as const;

/**
 * `tiered_storage` keys a reload applies: read on every pass or segment (deadlines, delete
 * budgets), the topic defaults (which reach the topics above), and `housekeeping.*`, read on
 * every housekeeping run.
 */
export const LIVE_TIERED_STORAGE_KEYS = [
  "segment_upload_timeout",
  "upload_bandwidth",
  "delete_batch_per_pass",
  "delete_pending_per_partition",
  "delete_grace",
  "default_local_retention_age",
  "default_local_retention_size",
] as const;

/** One setting that differs between the running config and the file. */
export interface ConfigChange {
  /** Its key path, such as `topic[stream=1,topic=2].local_retention_size`. */
  key: string;
  from: unknown;
  to: unknown;
}

/** What a reload did. */
export interface ReloadOutcome {
  applied: ConfigChange[];
  /** Changes that need a restart: not applied, the running value stays. */
  refused: (ConfigChange & { why: string })[];
}

function topicKey(t: TopicConfig): string {
  return `topic[stream=${t.stream},topic=${t.topic}]`;
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Every leaf of `a` and `b` that differs, as `prefix.key` paths. */
function leafChanges(prefix: string, a: unknown, b: unknown, out: ConfigChange[]): void {
  const objects = typeof a === "object" && a !== null && typeof b === "object" && b !== null &&
    !Array.isArray(a) && !Array.isArray(b);
  if (!objects) {
    if (!same(a, b)) out.push({ key: prefix, from: a, to: b });
    return;
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  for (const k of new Set([...Object.keys(ao), ...Object.keys(bo)])) {
    leafChanges(`${prefix}.${k}`, ao[k], bo[k], out);
  }
}

/**
 * Compares the running config with a freshly loaded one: what a reload may apply and what it
 * must refuse. Secrets are compared but their values are never reported (`"(secret)"`).
 */
export function planReload(running: Config, next: Config): ReloadOutcome {
  const out: ReloadOutcome = { applied: [], refused: [] };
  const live = new Set<string>(LIVE_TIERED_STORAGE_KEYS.map((k) => `tiered_storage.${k}`));
  const changes: ConfigChange[] = [];
  leafChanges("agent", running.agent, next.agent, changes);
  leafChanges("tiered_storage", running.tiered_storage, next.tiered_storage, changes);
  for (const c of changes) {
    if (live.has(c.key) || c.key.startsWith("tiered_storage.housekeeping.")) out.applied.push(c);
    else out.refused.push({ ...redacted(c), why: "needs a restart" });
  }
  const nextTopics = new Map(next.topic.map((t) => [topicKey(t), t]));
  const runningTopics = new Map(running.topic.map((t) => [topicKey(t), t]));
  for (const [key, t] of runningTopics) {
    const n = nextTopics.get(key);
    if (!n) {
      out.refused.push({
        key,
        from: "listed",
        to: "removed",
        why: "removing a topic needs a restart (its partitions' state is kept)",
      });
      continue;
    }
    if (n.tiered_storage !== t.tiered_storage) {
      out.refused.push({
        key: `${key}.tiered_storage`,
        from: t.tiered_storage,
        to: n.tiered_storage,
        why: "turning tiering on or off for a topic needs a restart",
      });
    }
    for (const k of LIVE_TOPIC_KEYS) {
      if (n[k] !== t[k]) out.applied.push({ key: `${key}.${k}`, from: t[k], to: n[k] });
    }
  }
  for (const key of nextTopics.keys()) {
    if (!runningTopics.has(key)) {
      out.refused.push({
        key,
        from: "absent",
        to: "listed",
        why: "adding a topic needs a restart",
      });
    }
  }
  return out;
}

const SECRET_LEAVES = new Set([
  "access_key",
  "secret_key",
  "session_token",
  "shared_key",
  "sas_token",
  "token",
  "api_token",
  "read_token",
  "password",
  "personal_access_token",
  "service_account_key",
]);

function redacted(c: ConfigChange): ConfigChange {
  const leaf = c.key.slice(c.key.lastIndexOf(".") + 1);
  return SECRET_LEAVES.has(leaf) ? { key: c.key, from: "(secret)", to: "(secret)" } : c;
}

/**
 * Applies a reload to `running` in place — only the changes {@link planReload} accepts — and
 * returns the plan. The worker, housekeeper and phases hold this very object, so their next
 * pass or run sees the new values.
 */
export function applyReload(running: Config, next: Config): ReloadOutcome {
  const plan = planReload(running, next);
  const ts = running.tiered_storage as unknown as Record<string, unknown>;
  const nextTs = next.tiered_storage as unknown as Record<string, unknown>;
  for (const k of LIVE_TIERED_STORAGE_KEYS) ts[k] = nextTs[k];
  Object.assign(running.tiered_storage.housekeeping, next.tiered_storage.housekeeping);
  const nextTopics = new Map(next.topic.map((t) => [topicKey(t), t]));
  for (const t of running.topic) {
    const n = nextTopics.get(topicKey(t));
    if (!n) continue;
    for (const k of LIVE_TOPIC_KEYS) t[k] = n[k];
  }
  return plan;
}

/**
 * Re-reads `path` and applies what may change live to `running` ({@link applyReload}), logging
 * each applied and each refused change. A file that does not load (bad TOML, a bad value)
 * changes nothing.
 *
 * @returns the outcome, or undefined when the file did not load
 */
export async function reloadConfig(
  path: string,
  running: Config,
  logger: Logger,
): Promise<ReloadOutcome | undefined> {
  let next: Config;
  try {
    next = await loadConfig(path);
  } catch (err) {
    logger.error("config reload failed: nothing changed", { path, err });
    return undefined;
  }
  const outcome = applyReload(running, next);
  for (const c of outcome.applied) {
    logger.info("config reload: applied", { key: c.key, from: c.from, to: c.to });
  }
  for (const c of outcome.refused) {
    logger.warn("config reload: refused, the running value stays", {
      key: c.key,
      from: c.from,
      to: c.to,
      why: c.why,
    });
  }
  logger.info("config reloaded", {
    path,
    applied: outcome.applied.length,
    refused: outcome.refused.length,
  });
  return outcome;
}
