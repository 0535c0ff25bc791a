// One pass of the tier worker over every tiered partition: discover, copy, clean dangling,
// advance floors. Partitions run concurrently up to `upload_concurrency`, one pass each.
import type { Config, TopicConfig } from "../config/schema.ts";
import { discoverPartitions } from "../partition/discover.ts";
import type { PartitionId } from "../partition/layout.ts";
import { PartitionAgent, type PartitionPassReport, type TierEnv } from "./partition_agent.ts";

/** What a whole pass did, summed over partitions. */
export interface PassReport {
  partitions: PartitionPassReport[];
  copied: number;
  adopted: number;
  failed: number;
  cleaned: number;
  lost: number;
  pending: number;
  errors: string[];
}

/** The configured topic for a partition, when tiering is on for it. */
export function tieredTopic(config: Config, id: PartitionId): TopicConfig | undefined {
  return config.topic.find((t) =>
    t.stream === id.stream && t.topic === id.topic && t.tiered_storage
  );
}

/** Keeps one {@link PartitionAgent} per partition directory across passes. */
export class TierWorker {
  #env: TierEnv;
  #agents = new Map<string, PartitionAgent>();

  constructor(env: TierEnv) {
    this.#env = env;
  }

  /** Runs one pass over every tiered partition found now. */
  async pass(): Promise<PassReport> {
    const found = await discoverPartitions(
      this.#env.config.agent.data_dir,
      (id) => tieredTopic(this.#env.config, id) !== undefined,
    );
    const seen = new Set<string>();
    const agents: PartitionAgent[] = [];
    for (const part of found) {
      const key = part.dir;
      seen.add(key);
      let agent = this.#agents.get(key);
      if (!agent) {
        agent = await PartitionAgent.open(this.#env, part);
        this.#agents.set(key, agent);
      }
      agents.push(agent);
    }
    for (const [key, agent] of this.#agents) {
      if (!seen.has(key)) {
        this.#env.logger.info("partition directory gone; its work stops", {
          partition: agent.label,
        });
        await agent.close();
        this.#agents.delete(key);
      }
    }
    const reports: PartitionPassReport[] = [];
    const width = Math.max(1, this.#env.config.tiered_storage.upload_concurrency);
    let next = 0;
    const lane = async () => {
      while (next < agents.length && !this.#env.signal?.aborted) {
        const agent = agents[next++];
        reports.push(await agent.pass());
      }
    };
    await Promise.all(Array.from({ length: Math.min(width, agents.length) }, lane));
    reports.sort((a, b) => a.partition.localeCompare(b.partition));
    const sum = (f: (r: PartitionPassReport) => number) => reports.reduce((n, r) => n + f(r), 0);
    return {
      partitions: reports,
      copied: sum((r) => r.copied),
      adopted: sum((r) => r.adopted),
      failed: sum((r) => r.failed),
      cleaned: sum((r) => r.cleaned),
      lost: sum((r) => r.lost),
      pending: sum((r) => r.pending),
      errors: reports.flatMap((r) => r.errors),
    };
  }

  /** Closes every partition's journal. */
  async close(): Promise<void> {
    for (const agent of this.#agents.values()) await agent.close();
    this.#agents.clear();
  }
}
