// tierd as the iggy_tcp benchmark runs it beside a real Iggy 0.8 broker: the compiled binary
// (`tierd run`), copying one topic to an fs store and evicting through the broker's API, with the
// binary front (`[agent.iggy_tcp]`) in front of the broker's TCP transport and the Iggy-compatible
// HTTP listener (`[agent.iggy_http]`) in front of its HTTP API.
import { join } from "node:path";
import { freePort } from "../test/fixtures/_server.ts";
import { IGGY_ROOT, type IggyServer } from "../test/fixtures/iggy.ts";
import { startTierdRun } from "./_proc.ts";

/** What the agent is started over. */
export interface IggyAgentOptions {
  /** Root of tierd's own files: state, fs store, caches. Kept across restarts. */
  dir: string;
  broker: IggyServer;
  /** The one topic tierd copies and evicts. */
  stream: number;
  topic: number;
  /** `local_retention_size` of that topic, e.g. `"56 MiB"`. */
  localRetention: string;
  /** Names the config and the cache directory (`{dir}/cache-{name}`, emptied first). */
  name: string;
}

/** A running `tierd run`. */
export interface IggyAgent {
  /** `http://127.0.0.1:PORT`: the HTTP API. */
  url: string;
  /** `127.0.0.1:PORT`: the binary front. */
  frontAddress: string;
  /** `http://127.0.0.1:PORT`: the Iggy-compatible HTTP listener (the broker's HTTP API). */
  iggyHttpUrl: string;
  pid: number;
  /** Its config file. */
  config: string;
  /** Its chunk cache directory (empty at start). */
  cacheDir: string;
  /** The last lines tierd logged. */
  logTail(): string;
  /** SIGTERM and wait (SIGKILL after 20 s). */
  stop(): Promise<void>;
}

function configText(
  o: IggyAgentOptions,
  listen: string,
  front: string,
  iggyHttp: string,
  cache: string,
): string {
  return `
[agent]
data_dir = ${JSON.stringify(o.broker.dataDir)}
state_dir = ${JSON.stringify(join(o.dir, "state"))}
listen = "${listen}"
cluster_id = "bench"
seal_quiescence = "1 s"
log_level = "warn"
evict_via = "broker"

[agent.broker]
http_url = "${o.broker.httpUrl}"
username = "${IGGY_ROOT.username}"

[agent.iggy_tcp]
listen = "${front}"
broker_address = "${o.broker.tcpAddress}"

[agent.iggy_http]
listen = "${iggyHttp}"

[tiered_storage]
enabled = true
backend = "fs"

[tiered_storage.fs]
path = ${JSON.stringify(join(o.dir, "store"))}
prefix = "iggy"

[tiered_storage.cache]
path = ${JSON.stringify(cache)}

[[topic]]
stream = ${o.stream}
topic = ${o.topic}
local_retention_size = "${o.localRetention}"
`;
}

/**
 * Starts the compiled tierd with an empty cache and waits until its API is ready and its front and
 * Iggy HTTP listener accept connections.
 * @throws {Error} with its log when it exits or is not ready within 60 s
 */
export async function startIggyAgent(o: IggyAgentOptions): Promise<IggyAgent> {
  const listen = `127.0.0.1:${freePort()}`;
  const front = `127.0.0.1:${freePort()}`;
  const iggyHttp = `127.0.0.1:${freePort()}`;
  const cache = join(o.dir, `cache-${o.name}`);
  await Deno.remove(cache, { recursive: true }).catch(() => {});
  const config = join(o.dir, `tierd-${o.name}.toml`);
  await Deno.writeTextFile(config, configText(o, listen, front, iggyHttp, cache));
  const url = `http://${listen}`;
  const run = await startTierdRun({
    config,
    name: o.name,
    env: { TIERD_BROKER_PASSWORD: IGGY_ROOT.password },
    ready: () => ready(url, [front, iggyHttp]),
    timeoutMs: 60_000,
  });
  return {
    url,
    frontAddress: front,
    iggyHttpUrl: `http://${iggyHttp}`,
    config,
    cacheDir: cache,
    ...run,
  };
}

/** True once `/readyz` answers 200 and each of `listeners` (`host:port`) accepts a connection. */
async function ready(url: string, listeners: string[]): Promise<boolean> {
  try {
    const res = await fetch(`${url}/readyz`);
    await res.body?.cancel();
    if (!res.ok) return false;
    for (const address of listeners) {
      const [hostname, port] = address.split(":");
      (await Deno.connect({ hostname, port: Number(port) })).close();
    }
    return true;
  } catch {
    return false;
  }
}

/** One partition in tierd's `GET /v1/partitions`. */
export interface AgentPartition {
  stream: number;
  topic: number;
  partition: number;
  segments: { local: number; uploaded: number; remote: number; dangling: number };
}

/** tierd's view of its partitions. */
export async function agentPartitions(agent: IggyAgent): Promise<AgentPartition[]> {
  const res = await fetch(`${agent.url}/v1/partitions`);
  if (!res.ok) throw new Error(`GET /v1/partitions answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as AgentPartition[];
}

/** The pid of a process whose command line holds every one of `args` (a child's, by its flags). */
export async function pidWithArgs(args: string[]): Promise<number | undefined> {
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const argv = (await Deno.readTextFile(`/proc/${e.name}/cmdline`)).split("\0");
      if (args.every((a) => argv.includes(a))) return Number(e.name);
    } catch {
      // gone, or not ours to read
    }
  }
  return undefined;
}

/** The pid of the process whose working directory is `dir` (the broker of a test server). */
export async function pidInDir(dir: string): Promise<number | undefined> {
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      if ((await Deno.realPath(`/proc/${e.name}/cwd`)) === (await Deno.realPath(dir))) {
        return Number(e.name);
      }
    } catch {
      // gone, or not ours to read
    }
  }
  return undefined;
}
