// How evicted segments leave the broker's directory, chosen once from `evict_via`: through the
// broker's DeleteSegments, by unlink (a stopped broker), or by unlink only while no broker runs
// (`auto` without `[agent.broker]`); and the one line that says so at start.
import type { Clock } from "../base/clock.ts";
import { type Config, resolveEvictVia } from "../config/schema.ts";
import { BrokerClient } from "./broker_client.ts";
import { BrokerPresence, type BrokerWatch, presenceChecks } from "./broker_presence.ts";
import { BrokerEvictor, type Evictor, GuardedUnlinkEvictor, UnlinkEvictor } from "./evictor.ts";

/** What the choice is made from: the config, and the broker client or watch a caller passes. */
export interface EvictionRouteEnv {
  config: Config;
  broker?: BrokerClient;
  brokerWatch?: BrokerWatch;
}

/** The evictor `evict_via` asks for (see `resolveEvictVia`; `auto` unlinks only when safe). */
export function chooseEvictor(
  env: EvictionRouteEnv,
  clock: Clock,
): Evictor {
  const { config } = env;
  if (env.broker || resolveEvictVia(config) === "broker") {
    return new BrokerEvictor(env.broker ?? new BrokerClient(config.agent.broker));
  }
  if (config.agent.evict_via === "unlink") return new UnlinkEvictor();
  return new GuardedUnlinkEvictor(
    env.brokerWatch ?? new BrokerPresence({ dataDir: config.agent.data_dir, clock }),
  );
}

/** The line said once at start about how segments leave the broker (none without eviction). */
export async function describeEviction(
  config: Config,
  evictor: Evictor,
): Promise<{ msg: string; fields: Record<string, unknown> } | undefined> {
  const evicts = config.topic.some((t) =>
    t.tiered_storage && (Number.isFinite(t.local_retention_size) ||
      Number.isFinite(t.local_retention_age))
  );
  if (!evicts) return undefined;
  if (evictor instanceof BrokerEvictor) {
    return {
      msg: "evicted segments leave through the broker's DeleteSegments",
      fields: { evict_via: config.agent.evict_via, broker: evictor.client.where },
    };
  }
  if (evictor instanceof GuardedUnlinkEvictor) {
    return {
      msg: "evict_via = auto without [agent.broker]: tierd unlinks evicted segments itself, " +
        "only while no broker runs beside the data directory (it waits while one does)",
      fields: {
        evict_via: "auto",
        data_dir: config.agent.data_dir,
        checks: await presenceChecks(config.agent.data_dir),
      },
    };
  }
  return {
    msg: "evict_via = unlink: tierd unlinks evicted segments itself, which is only safe while " +
      "the broker is stopped",
    fields: { evict_via: "unlink", data_dir: config.agent.data_dir },
  };
}
