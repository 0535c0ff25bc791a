// tierd as the e2e suite runs it beside a real Iggy server: its config (`evict_via = "broker"`,
// fs store or MinIO), the child process, and the two HTTP routes the checks read through.
import { join } from "node:path";
import { FsStore } from "../../providers/fs/store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { type AgentProcess, freePort, minioStore, s3Env, spawnTierd } from "../fixtures/_agent.ts";
import { IGGY_ROOT } from "../fixtures/iggy.ts";
import type { MinioServer } from "../fixtures/minio.ts";

/** Where tierd copies segments. */
export type StoreUnderTest = { kind: "fs"; path: string } | { kind: "s3"; minio: MinioServer };

/** Options of {@link startTierd}. */
export interface TierdOptions {
  /** Root of tierd's own files (state, cache, fs store). */
  dir: string;
  /** The broker's data dir. */
  dataDir: string;
  /** The broker's HTTP API. */
  brokerUrl: string;
  store: StoreUnderTest;
  stream: number;
  topic: number;
  /** `local_retention_size` of the topic, e.g. `"3 MiB"`. */
  localRetention: string;
  /** TOML appended to the config (whole tables, such as `[agent.iggy_http]`). */
  extraConfig?: string;
  /** Lines added to the `[agent]` table, such as `read_auth = "iggy"`. */
  agentConfig?: string;
}

/** One partition in `GET /v1/partitions`. */
export interface TierdPartition {
  stream: number;
  topic: number;
  partition: number;
  format: string | null;
  incarnation: string | null;
  generation: string;
  tiered_up_to_offset: string | null;
  segments: { local: number; uploaded: number; remote: number; dangling: number };
  local_bytes: string;
  remote_bytes: string;
}

/** A raw read's answer. */
export interface RawRead {
  bytes: Uint8Array;
  firstOffset: bigint;
  nextOffset: bigint;
  source: string;
  format: string;
  records: number;
  /** `x-tierd-gap`, when the read skipped missing offsets. */
  gap: string | null;
}

/** One message of a `format=json` read. */
export interface TierdJsonMessage {
  offset: string;
  timestamp: string;
  origin_timestamp: string;
  id: string;
  headers: { key: unknown; key_kind: string; value: unknown; value_kind: string }[] | null;
  headers_raw?: string;
  payload: string;
}

/** A `format=json` read's answer. */
export interface JsonRead {
  first_offset: string;
  next_offset: string;
  source: string;
  gap: unknown;
  messages: TierdJsonMessage[];
}

/** A running tierd and the store it writes to. */
export interface Tierd {
  readonly agent: AgentProcess;
  readonly baseUrl: string;
  /** tierd's own client of the store, for checking what it wrote. */
  readonly store: ObjectStore;
  /** The store prefix of a partition's objects. */
  keyPrefix(partition: number): string;
  partitions(): Promise<TierdPartition[]>;
  /** `GET …/records?offset=N&max_bytes=M` (raw). */
  readRaw(partition: number, offset: bigint, maxBytes: number): Promise<RawRead>;
  /** `GET …/records?offset=N&max_bytes=M&format=json`. */
  readJson(partition: number, offset: bigint, maxBytes: number): Promise<JsonRead>;
  /** SIGTERM (once); resolves with the exit code. */
  stop(): Promise<number>;
}

/** A tierd request answered other than 200. */
export class TierdReadError extends Error {
  override readonly name = "TierdReadError";
  constructor(message: string, readonly status: number) {
    super(message);
  }
}

/** The config text of {@link startTierd}. */
export function tierdConfigText(o: TierdOptions, listen: string): string {
  const store = o.store.kind === "fs"
    ? `backend = "fs"\n\n[tiered_storage.fs]\npath = "${o.store.path}"\nprefix = "iggy"\n`
    : `backend = "s3"\n\n[tiered_storage.s3]\nbucket = "${o.store.minio.bucket}"\n` +
      `region = "${o.store.minio.region}"\nendpoint = "${o.store.minio.endpoint}"\n` +
      `url_style = "path"\nprefix = "iggy"\n`;
  return `
[agent]
data_dir = "${o.dataDir}"
state_dir = "${o.dir}/state"
listen = "${listen}"
cluster_id = "local"
seal_quiescence = "1 s"
log_level = "info"
evict_via = "broker"
${o.agentConfig ?? ""}
[agent.broker]
http_url = "${o.brokerUrl}"
username = "${IGGY_ROOT.username}"

[tiered_storage]
enabled = true
part_size = "5 MiB"
upload_loop_backoff_max = "500 ms"
${store}
[tiered_storage.cache]
path = "${o.dir}/cache"

[[topic]]
stream = ${o.stream}
topic = ${o.topic}
local_retention_size = "${o.localRetention}"
`;
}

/**
 * Writes the config and spawns `deno run -A main.ts run`; the broker password and store keys go
 * through the environment. Resolves once its HTTP API answers.
 * @throws {Error} with the agent's output when it exits or does not answer within 60 s
 */
export async function startTierd(o: TierdOptions): Promise<Tierd> {
  const listen = `127.0.0.1:${freePort()}`;
  const configPath = join(o.dir, "tierd.toml");
  await Deno.writeTextFile(configPath, tierdConfigText(o, listen) + (o.extraConfig ?? ""));
  const env: Record<string, string> = {
    TIERD_BROKER_PASSWORD: IGGY_ROOT.password,
    ...(o.store.kind === "s3" ? s3Env(o.store.minio) : {}),
  };
  const agent = spawnTierd(["run", "--config", configPath], env);
  const baseUrl = `http://${listen}`;
  const store = o.store.kind === "fs"
    ? new FsStore({ root: o.store.path })
    : minioStore(o.store.minio);
  const recordsUrl = (partition: number, offset: bigint, maxBytes: number) =>
    `${baseUrl}/v1/streams/${o.stream}/topics/${o.topic}/partitions/${partition}/records` +
    `?offset=${offset}&max_bytes=${maxBytes}`;
  const get = async (url: string) => {
    // A kept-alive connection the agent closes as idle just as it is reused is reset; like any
    // HTTP client, retry the (idempotent) GET once on a fresh connection.
    const res = await fetch(url).catch((err: unknown) => {
      const cause = (err as { cause?: { message?: string } }).cause?.message ?? "";
      if (!/reset by peer|ECONNRESET/i.test(cause)) throw err;
      return fetch(url);
    });
    if (res.status !== 200) {
      const text = await res.text();
      throw new TierdReadError(`GET ${url}: HTTP ${res.status}: ${text.slice(0, 500)}`, res.status);
    }
    return res;
  };
  let stopped: Promise<number> | undefined;
  let exited = false;
  agent.status.then(() => (exited = true));
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const res = await fetch(`${baseUrl}/healthz`);
      await res.body?.cancel();
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (exited || Date.now() > deadline) {
      throw new Error(
        `tierd did not come up at ${baseUrl}; output:\n${agent.output().slice(-3000)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    agent,
    baseUrl,
    store,
    keyPrefix: (partition) => `iggy/local/${o.stream}/${o.topic}/${partition}/`,
    partitions: async () =>
      (await (await get(`${baseUrl}/v1/partitions`)).json()) as TierdPartition[],
    async readRaw(partition, offset, maxBytes) {
      const res = await get(recordsUrl(partition, offset, maxBytes));
      const header = (name: string) => res.headers.get(name) ?? "";
      return {
        bytes: new Uint8Array(await res.arrayBuffer()),
        firstOffset: BigInt(header("x-tierd-first-offset")),
        nextOffset: BigInt(header("x-tierd-next-offset")),
        source: header("x-tierd-source"),
        format: header("x-tierd-format"),
        records: Number(header("x-tierd-records")),
        gap: res.headers.get("x-tierd-gap"),
      };
    },
    async readJson(partition, offset, maxBytes) {
      const res = await get(`${recordsUrl(partition, offset, maxBytes)}&format=json`);
      return (await res.json()) as JsonRead;
    },
    stop() {
      return stopped ??= (async () => {
        agent.kill("SIGTERM");
        const status = await agent.status;
        await store.close?.();
        return status.code;
      })();
    },
  };
}
