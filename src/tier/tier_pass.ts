// The tier worker's pass over every tiered partition: discover, then per partition copy, clean
// dangling, evict and apply retention. Partitions under local-storage pressure go first; the
// number running at once scales with the backlog, between 1 and `upload_concurrency`.
import { PartBufferPool } from "../../providers/part_pool.ts";
import { resolveEvictVia } from "../config/schema.ts";
import type { Config, TopicConfig } from "../config/schema.ts";
import { discoverPartitions } from "../partition/discover.ts";
import type { PartitionId } from "../partition/layout.ts";
import type { PartitionState } from "../state/segment_state.ts";
import { BrokerClient } from "./broker_client.ts";
import {
  type DeleteBudget,
  emptyPassReport,
  PartitionAgent,
  type PartitionPassReport,
  type TierEnv,
} from "./partition_agent.ts";

/** What a whole pass did, summed over partitions. */
export interface PassReport {
  partitions: PartitionPassReport[];
  copied: number;
  adopted: number;
  failed: number;
  cleaned: number;
  lost: number;
  evicted: number;
  remoteDeleted: number;
  pending: number;
  errors: string[];
  /** Store faults kept work from finishing (uploads are stalled). */
  storeUnreachable: boolean;
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
  #running?: Promise<PassReport>;

  constructor(env: TierEnv) {
    const ts = env.config.tiered_storage;
    // One pool of part buffers for the whole worker: memory stays near
    // part_size × (upload_concurrency + 1) however many partitions upload at once.
    this.#env = {
      partPool: new PartBufferPool(ts.part_size, ts.upload_concurrency + 1),
      ...env,
    };
    if (!env.broker && resolveEvictVia(env.config) === "broker") {
      this.#env.broker = new BrokerClient(env.config.agent.broker);
    }
  }

  /** The agents of the partitions found by the last pass. */
  get agents(): PartitionAgent[] {
    return [...this.#agents.values()];
  }

  /** The live state of a partition this worker tiers (for the read path). */
  state(id: PartitionId): Promise<PartitionState | undefined> {
    const agent = this.agents.find((a) =>
      a.id.stream === id.stream && a.id.topic === id.topic && a.id.partition === id.partition
    );
    return Promise.resolve(agent?.state);
  }

  /** Rewrites every partition's journal as a snapshot (between passes). */
  async compact(): Promise<{ partitions: number }> {
    await this.#running?.catch(() => {});
    for (const agent of this.#agents.values()) await agent.compact();
    return { partitions: this.#agents.size };
  }

  /** Runs one pass; a call while a pass runs joins that pass. */
  pass(): Promise<PassReport> {
    this.#running ??= this.#pass().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #pass(): Promise<PassReport> {
    const { config } = this.#env;
    const found = await discoverPartitions(
      config.agent.data_dir,
      (id) => tieredTopic(config, id) !== undefined,
    );
    const seen = new Set<string>();
    const agents: PartitionAgent[] = [];
    for (const part of found) {
      seen.add(part.dir);
      let agent = this.#agents.get(part.dir);
      if (agent && (agent.state.device !== part.device || agent.state.inode !== part.inode)) {
        await agent.close(); // the directory was recreated: reopen to start a new incarnation
        agent = undefined;
      }
      if (!agent) {
        agent = await PartitionAgent.open(this.#env, part);
        this.#agents.set(part.dir, agent);
      }
      agents.push(agent);
    }
    for (const [dir, agent] of this.#agents) {
      if (!seen.has(dir)) {
        this.#env.logger.info("partition directory gone; its work stops", {
          partition: agent.label,
        });
        await agent.close();
        this.#agents.delete(dir);
      }
    }
    // Pressured partitions first, then those with the most waiting work.
    agents.sort((a, b) =>
      Number(b.lastPass?.pressured ?? false) - Number(a.lastPass?.pressured ?? false) ||
      (b.lastPass?.pending ?? 1) - (a.lastPass?.pending ?? 1)
    );
    const perTopic = new Map<string, number>();
    for (const a of agents) {
      const k = `${a.id.stream}/${a.id.topic}`;
      perTopic.set(k, (perTopic.get(k) ?? 0) + 1);
    }
    const budget: DeleteBudget = { remaining: config.tiered_storage.delete_batch_per_pass };
    const backlog = agents.filter((a) => (a.lastPass?.pending ?? 1) > 0).length;
    const width = Math.max(1, Math.min(config.tiered_storage.upload_concurrency, backlog));
    const reports: PartitionPassReport[] = [];
    let next = 0;
    const lane = async () => {
      while (next < agents.length && !this.#env.signal?.aborted) {
        const agent = agents[next++];
        const topic = tieredTopic(config, agent.id)!;
        try {
          reports.push(
            await agent.pass(topic, {
              partitionsInTopic: perTopic.get(`${agent.id.stream}/${agent.id.topic}`),
              deleteBudget: budget,
            }),
          );
        } catch (err) {
          // A partition that disappeared mid-pass (or a local I/O failure) stops only itself.
          this.#env.logger.error("partition pass failed", { partition: agent.label, err });
          reports.push(failedReport(agent, err));
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(width, agents.length) }, lane));
    reports.sort((a, b) => a.partition.localeCompare(b.partition));
    const sum = (f: (r: PartitionPassReport) => number) => reports.reduce((n, r) => n + f(r), 0);
    const report: PassReport = {
      partitions: reports,
      copied: sum((r) => r.copied),
      adopted: sum((r) => r.adopted),
      failed: sum((r) => r.failed),
      cleaned: sum((r) => r.cleaned),
      lost: sum((r) => r.lost),
      evicted: sum((r) => r.evicted),
      remoteDeleted: sum((r) => r.remoteDeleted),
      pending: sum((r) => r.pending),
      errors: reports.flatMap((r) => r.errors),
      storeUnreachable: reports.some((r) => r.storeUnreachable),
    };
    this.#env.observer?.stalled?.(report.storeUnreachable && report.pending > 0 ? 1 : 0);
    return report;
  }

  /** Waits for a running pass, then closes every partition's journal. */
  async close(): Promise<void> {
    await this.#running?.catch(() => {});
    for (const agent of this.#agents.values()) await agent.close();
    this.#agents.clear();
  }
}

function failedReport(agent: PartitionAgent, err: unknown): PartitionPassReport {
  return {
    ...emptyPassReport(agent.label, agent.state.floor),
    errors: [`partition ${agent.label}: ${(err as Error).message}`],
  };
}
