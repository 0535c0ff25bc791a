// The shape of `tierd.toml`: types that name keys exactly as the file does, and the zod schema
// that reads the file into them. Durations are milliseconds and sizes are bytes (`Infinity` for
// "unlimited"); the schema is a codec, so a parsed config encodes back to the file's text form.
// Rules that relate several keys live in `rules.ts`.
import { z } from "zod";
import { LISTEN_EXPECTED, parseListen } from "./listen.ts";
import {
  DURATION_EXPECTED,
  formatDuration,
  formatSize,
  parseDuration,
  parseSize,
  SIZE_EXPECTED,
  UnitError,
} from "./units.ts";

/** Object store backends. `sim` is the in-process simulator. */
export type BackendName = "s3" | "gcs" | "azure" | "fs" | "sim";
/** Segment format of the broker's data directory; `auto` detects it per partition. */
export type SegmentFormat = "auto" | "iggy-0.8" | "iggy-0.9";
/** How an evicted segment leaves the broker (docs/architecture.md, "The broker contract"). */
export type EvictVia = "auto" | "broker" | "unlink";
/** Log verbosity. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** `[agent.broker]`: the broker's HTTP API, used for `evict_via = "broker"`. */
export interface BrokerConfig {
  /** e.g. `"http://127.0.0.1:3000"`; `""` = not configured. */
  http_url: string;
  username: string;
  /** Secret; env `TIERD_BROKER_PASSWORD`. */
  password: string;
  /** Secret; env `TIERD_BROKER_TOKEN`. */
  personal_access_token: string;
}

/** `[agent.iggy_http]`: a second listener speaking the broker's own HTTP API (src/iggy_http/). */
export interface IggyHttpConfig {
  /** `host:port`, e.g. `"127.0.0.1:3001"`; `""` = off. @default "" */
  listen: string;
  /** Milliseconds a client token's broker check is reused per partition. @default 1 s */
  auth_cache_ttl: number;
}

/** `[agent]`: the sidecar process itself. */
export interface AgentConfig {
  /** The broker's data directory (Iggy `local_data`); absolute after loading. */
  data_dir: string;
  /** Markers, journals, index copies and (by default) the cache; absolute after loading. */
  state_dir: string;
  /** HTTP API address, `host:port` (see `parseListen`). @default "127.0.0.1:7070" */
  listen: string;
  /** Second segment of every object key. @default "local" */
  cluster_id: string;
  /** @default "auto" */
  format: SegmentFormat;
  /** Milliseconds a sealed segment's files must be quiet before upload. @default 5 s */
  seal_quiescence: number;
  /** Bearer token for `POST /v1/admin/*`; secret; env `TIERD_API_TOKEN`. */
  api_token: string;
  /** @default "auto" (see `resolveEvictVia`) */
  evict_via: EvictVia;
  /** @default "info" */
  log_level: LogLevel;
  /** Milliseconds a connection has to send a whole request head. @default 10 s */
  http_header_timeout: number;
  /** Milliseconds a kept-alive connection may sit without a request. @default 30 s */
  http_idle_timeout: number;
  /** Open HTTP connections at most; 0 = from the open-file limit (at most 1024). @default 0 */
  http_max_connections: number;
  /**
   * Bytes reads may hold in memory at once, node-wide; over it a read waits briefly, then
   * answers 503. 0 = a sixteenth of the cache size, between 64 MiB and 512 MiB. @default 0
   */
  read_memory_budget: number;
  broker: BrokerConfig;
  iggy_http: IggyHttpConfig;
}

/** `[tiered_storage.housekeeping]`: background jobs that run when the agent is idle. */
export interface HousekeepingConfig {
  /** Milliseconds; a housekeeping run at least this often. @default 5 m */
  interval: number;
  /** Milliseconds of low request rate before an idle run. @default 10 s */
  idle_timeout: number;
  /** Requests per second below which the agent counts as idle. @default 10 */
  idle_threshold_rps: number;
  /** Store requests one run may spend. @default 5000 */
  request_quota: number;
  /** Milliseconds between orphan sweeps; `Infinity` disables them. @default 1 h */
  orphan_sweep_interval: number;
  /** Milliseconds an incarnation must be gone before its objects are swept. @default 1 d */
  orphan_grace: number;
  /** Milliseconds between `manifest.json` rewrites per partition. @default 60 s */
  manifest_upload_interval: number;
  /** Milliseconds between verify passes (HEAD below the floor); `Infinity` disables. @default 6 h */
  verify_interval: number;
}

/** `[tiered_storage.s3]`: AWS S3 and S3-compatible stores. */
export interface S3Config {
  bucket: string;
  /** @default "us-east-1" */
  region: string;
  /** `""` = AWS; set for MinIO, Ceph RGW, R2. */
  endpoint: string;
  /** @default "auto" */
  url_style: "auto" | "path" | "virtual";
  /** First segment of every object key. @default "iggy" */
  prefix: string;
  /** Secret; env `TIERD_S3_ACCESS_KEY`. */
  access_key: string;
  /** Secret; env `TIERD_S3_SECRET_KEY`. */
  secret_key: string;
  /** Secret; env `TIERD_S3_SESSION_TOKEN`. */
  session_token: string;
  /** `static`: the keys above; `none`: unsigned requests. @default "static" */
  credentials_source: "static" | "none";
  /** Use `If-None-Match: *` on PUT; false falls back to HEAD-then-PUT. @default true */
  conditional_writes: boolean;
}

/** `[tiered_storage.fs]`: a directory as the object store. */
export interface FsConfig {
  /** Root directory; absolute after loading, `""` if unset. */
  path: string;
  /** @default "iggy" */
  prefix: string;
}

/** `[tiered_storage.gcs]`: Google Cloud Storage (JSON API). */
export interface GcsConfig {
  bucket: string;
  /** @default "iggy" */
  prefix: string;
  /** `""` = Google's; set for fake-gcs-server. */
  endpoint: string;
  /** @default "service_account" */
  credentials_source: "service_account" | "metadata" | "static" | "none";
  /** Path to the service account JSON key file; absolute after loading, `""` if unset. */
  service_account_key: string;
  /** Static bearer token; secret; env `TIERD_GCS_TOKEN`. */
  token: string;
}

/** `[tiered_storage.azure]`: Azure Blob Storage. */
export interface AzureConfig {
  account: string;
  container: string;
  /** @default "iggy" */
  prefix: string;
  /** `""` = `https://{account}.blob.core.windows.net`; set for Azurite. */
  endpoint: string;
  /** Secret; env `TIERD_AZURE_KEY`. */
  shared_key: string;
  /** Secret; env `TIERD_AZURE_SAS`. */
  sas_token: string;
}

/** `[tiered_storage.cache]`: the local chunk cache for remote reads. */
export interface CacheConfig {
  /** Cache directory; absolute after loading (`""` in the file = `{state_dir}/cache`). */
  path: string;
  /** Bytes; `Infinity` leaves only `size_percent`. @default 4 GiB */
  size: number;
  /** Percent of the cache disk; the smaller of this and `size` is the budget. @default 20 */
  size_percent: number;
  /** @default 100000 */
  max_objects: number;
  /** Bytes; a multiple of 4096 within 1–64 MiB. @default 8 MiB */
  chunk_size: number;
  /** Readahead cap, in chunks. @default 4 */
  readahead_max: number;
  /** Trim down to this percent of the budget. @default 80 */
  low_watermark_percent: number;
  /** Milliseconds between trims, at least. @default 5 s */
  trim_min_interval: number;
}

/** `[tiered_storage]`: the RFC's keys, plus `part_size`. */
export interface TieredStorageConfig {
  /** @default false */
  enabled: boolean;
  /** @default "s3" */
  backend: BackendName;
  /** Most uploads in flight node-wide. @default 2 */
  upload_concurrency: number;
  /** Bytes read, hashed and sent per step. @default 1 MiB */
  upload_piece_size: number;
  /** Bytes; objects up to this are one PUT, larger ones multipart in parts this big. @default 8 MiB */
  part_size: number;
  /** Milliseconds; ceiling of the idle scan backoff. @default 10 s */
  upload_loop_backoff_max: number;
  /** Milliseconds; deadline for one segment's upload. @default 90 s */
  segment_upload_timeout: number;
  /** Most store fetches in flight. @default 4 */
  fetch_concurrency: number;
  /** Milliseconds a read waits for the store; below 10 s. @default 5 s */
  fetch_timeout: number;
  /** Bytes per second for downloads; `Infinity` = no limit. @default unlimited */
  fetch_bandwidth: number;
  /** Milliseconds; pooled connections idle longer are not reused. @default 5 s */
  connection_idle_timeout: number;
  /** Most objects deleted per retention pass. @default 300 */
  delete_batch_per_pass: number;
  /** Most deletions pending per partition. @default 5000 */
  delete_pending_per_partition: number;
  /** Milliseconds an object stays after it became deletable. @default 60 s */
  delete_grace: number;
  /** Milliseconds; `local_retention_age` of a `[[topic]]` that omits it. @default unlimited */
  default_local_retention_age: number;
  /** Bytes; `local_retention_size` of a `[[topic]]` that omits it. @default unlimited */
  default_local_retention_size: number;
  housekeeping: HousekeepingConfig;
  s3: S3Config;
  fs: FsConfig;
  gcs: GcsConfig;
  azure: AzureConfig;
  cache: CacheConfig;
}

/** One `[[topic]]`: a topic tierd looks after. Topics not listed are not tiered. */
export interface TopicConfig {
  /** Numeric stream id. */
  stream: number;
  /** Numeric topic id. */
  topic: number;
  /** @default true */
  tiered_storage: boolean;
  /** Milliseconds by max timestamp before an uploaded segment may be evicted locally. */
  local_retention_age: number;
  /** Bytes of local segments above which uploaded segments may be evicted. */
  local_retention_size: number;
  /** Milliseconds; total retention applied to remote copies. @default unlimited */
  message_expiry: number;
  /** Bytes; total retention applied to remote copies. @default unlimited */
  max_topic_size: number;
}

/** The whole `tierd.toml`, after defaults. Durations in ms, sizes in bytes. */
export interface Config {
  agent: AgentConfig;
  tiered_storage: TieredStorageConfig;
  topic: TopicConfig[];
}

/**
 * Which eviction route `evict_via` means for this config: `auto` is `broker` when
 * `[agent.broker]` has an `http_url`, else `unlink`.
 *
 * @param config a loaded config
 * @returns the route the tier worker takes
 */
export function resolveEvictVia(config: Config): "broker" | "unlink" {
  const { evict_via, broker } = config.agent;
  if (evict_via !== "auto") return evict_via;
  return broker.http_url === "" ? "unlink" : "broker";
}

// ---- field builders -------------------------------------------------------------------------

/** A check on a parsed number; `expected` completes "expected ...". */
interface Bound {
  ok(n: number): boolean;
  expected: string;
}

const MiB = 1024 * 1024;

/** A parsed duration or size: a non-negative number, `Infinity` included (z.number() refuses it). */
function bounded(bound?: Bound) {
  const n = z.custom<number>((v) => typeof v === "number" && v >= 0);
  return bound ? n.refine((v) => bound.ok(v), { message: bound.expected }) : n;
}

function unitIssue(e: unknown, text: string, ctx: z.core.ParsePayload<unknown>): never {
  if (!(e instanceof UnitError)) throw e;
  ctx.issues.push({ code: "custom", message: e.expected, input: text });
  return z.NEVER;
}

/** A duration written as text, parsed to milliseconds. */
function duration(bound?: Bound) {
  return z.codec(z.string({ error: DURATION_EXPECTED }), bounded(bound), {
    decode: (text, ctx) => {
      try {
        return parseDuration(text);
      } catch (e) {
        return unitIssue(e, text, ctx);
      }
    },
    encode: formatDuration,
  });
}

/** A size written as text (or a bare byte count), parsed to bytes. `/s` allowed for rates. */
function size(bound?: Bound, rate = false) {
  const expected = rate ? `${SIZE_EXPECTED}, optionally per second ("50 MiB/s")` : SIZE_EXPECTED;
  return z.codec(z.union([z.string(), z.number()], { error: expected }), bounded(bound), {
    decode: (written, ctx) => {
      if (typeof written === "number") {
        if (Number.isSafeInteger(written) && written >= 0) return written;
        ctx.issues.push({
          code: "custom",
          message: "a whole, non-negative byte count",
          input: written,
        });
        return z.NEVER;
      }
      const text = rate ? written.replace(/\s*\/\s*s$/i, "") : written;
      try {
        return parseSize(text);
      } catch (e) {
        return unitIssue(e, written, ctx);
      }
    },
    encode: (bytes) => rate && bytes !== Infinity ? `${formatSize(bytes)}/s` : formatSize(bytes),
  });
}

function int(min: number, max = Number.MAX_SAFE_INTEGER) {
  return z.number().int().min(min).max(max);
}

function httpUrl(what: string) {
  return z.string().refine((s) => s === "" || /^https?:\/\/[^\s/]+/i.test(s) && URL.canParse(s), {
    message: `an http:// or https:// URL, or "" for ${what}`,
  });
}

const PREFIX = z.string().regex(/^[A-Za-z0-9._-]+(?:\/[A-Za-z0-9._-]+)*$/, {
  message: 'a key prefix of letters, digits, ".", "_", "-", with inner "/" only, like "iggy"',
});

const positive: Bound = { ok: (n) => n > 0, expected: "more than 0" };
const finite: Bound = { ok: Number.isFinite, expected: 'a finite duration (not "unlimited")' };
const finitePositive: Bound = {
  ok: (n) => Number.isFinite(n) && n > 0,
  expected: 'a finite duration above 0 (not "unlimited")',
};

// ---- the schema -----------------------------------------------------------------------------

const brokerSchema = z.strictObject({
  http_url: httpUrl("no broker API").prefault(""),
  username: z.string().prefault(""),
  password: z.string().prefault(""),
  personal_access_token: z.string().prefault(""),
});

const iggyHttpSchema = z.strictObject({
  listen: z.string().refine((s) => {
    if (s === "") return true;
    try {
      parseListen(s);
      return true;
    } catch {
      return false;
    }
  }, { message: `${LISTEN_EXPECTED}, or "" for off` }).prefault(""),
  auth_cache_ttl: duration(finite).prefault("1 s"),
});

const agentSchema = z.strictObject({
  data_dir: z.string({
    error: (iss) =>
      `the broker's data directory (Iggy local_data), as a string${
        iss.input === undefined ? " (required)" : ""
      }`,
  })
    .min(1, { message: "the broker's data directory (Iggy local_data), not empty" }),
  state_dir: z.string().min(1, { message: "a directory, not empty" }).prefault("var/state"),
  listen: z.string().refine((s) => {
    try {
      parseListen(s);
      return true;
    } catch {
      return false;
    }
  }, { message: LISTEN_EXPECTED }).prefault("127.0.0.1:7070"),
  cluster_id: z.string().regex(/^[A-Za-z0-9._-]+$/, {
    message: 'an object key segment of letters, digits, ".", "_", "-", like "local"',
  }).prefault("local"),
  format: z.enum(["auto", "iggy-0.8", "iggy-0.9"]).prefault("auto"),
  seal_quiescence: duration(finite).prefault("5 s"),
  api_token: z.string().prefault(""),
  evict_via: z.enum(["auto", "broker", "unlink"]).prefault("auto"),
  log_level: z.enum(["debug", "info", "warn", "error"]).prefault("info"),
  http_header_timeout: duration(finitePositive).prefault("10 s"),
  http_idle_timeout: duration(finitePositive).prefault("30 s"),
  http_max_connections: int(0).prefault(0),
  read_memory_budget: size().prefault("0"),
  broker: brokerSchema.prefault({}),
  iggy_http: iggyHttpSchema.prefault({}),
}, {
  error: (iss) =>
    iss.code === "invalid_type" && iss.input === undefined
      ? "an [agent] table with at least data_dir, the broker's data directory (required)"
      : undefined,
});

const housekeepingSchema = z.strictObject({
  interval: duration(positive).prefault("5 m"),
  idle_timeout: duration(finite).prefault("10 s"),
  idle_threshold_rps: z.number().min(0).prefault(10),
  request_quota: int(1).prefault(5000),
  orphan_sweep_interval: duration(positive).prefault("1 h"),
  orphan_grace: duration().prefault("1 d"),
  manifest_upload_interval: duration(positive).prefault("60 s"),
  verify_interval: duration(positive).prefault("6 h"),
});

const s3Schema = z.strictObject({
  bucket: z.string().prefault(""),
  region: z.string().prefault("us-east-1"),
  endpoint: httpUrl("AWS").prefault(""),
  url_style: z.enum(["auto", "path", "virtual"]).prefault("auto"),
  prefix: PREFIX.prefault("iggy"),
  access_key: z.string().prefault(""),
  secret_key: z.string().prefault(""),
  session_token: z.string().prefault(""),
  credentials_source: z.enum(["static", "none"]).prefault("static"),
  conditional_writes: z.boolean().prefault(true),
});

const fsSchema = z.strictObject({
  path: z.string().prefault(""),
  prefix: PREFIX.prefault("iggy"),
});

const gcsSchema = z.strictObject({
  bucket: z.string().prefault(""),
  prefix: PREFIX.prefault("iggy"),
  endpoint: httpUrl("Google's endpoint").prefault(""),
  credentials_source: z.enum(["service_account", "metadata", "static", "none"])
    .prefault("service_account"),
  service_account_key: z.string().prefault(""),
  token: z.string().prefault(""),
});

const azureSchema = z.strictObject({
  account: z.string().prefault(""),
  container: z.string().prefault(""),
  prefix: PREFIX.prefault("iggy"),
  endpoint: httpUrl("https://{account}.blob.core.windows.net").prefault(""),
  shared_key: z.string().prefault(""),
  sas_token: z.string().prefault(""),
});

const cacheSchema = z.strictObject({
  path: z.string().prefault(""),
  size: size(positive).prefault("4 GiB"),
  size_percent: z.number().gt(0).max(100).prefault(20),
  max_objects: int(1).prefault(100_000),
  chunk_size: size({
    ok: (n) => n % 4096 === 0 && n >= 1 * MiB && n <= 64 * MiB,
    expected: "a multiple of 4096 bytes between 1 MiB and 64 MiB",
  }).prefault("8 MiB"),
  readahead_max: int(1, 1024).prefault(4),
  low_watermark_percent: z.number().gt(0).lt(100).prefault(80),
  trim_min_interval: duration(finite).prefault("5 s"),
});

const tieredStorageSchema = z.strictObject({
  enabled: z.boolean().prefault(false),
  backend: z.enum(["s3", "gcs", "azure", "fs", "sim"]).prefault("s3"),
  upload_concurrency: int(1, 1024).prefault(2),
  upload_piece_size: size({
    ok: (n) => n >= 4096 && n <= 64 * MiB,
    expected: "between 4 KiB and 64 MiB",
  }).prefault("1 MiB"),
  part_size: size({
    ok: (n) => n >= 5 * MiB && n <= 5 * 1024 * MiB,
    expected: "between 5 MiB and 5 GiB (S3's part size limits)",
  }).prefault("8 MiB"),
  upload_loop_backoff_max: duration({
    ok: (n) => Number.isFinite(n) && n >= 100,
    expected: "a finite duration of at least 100 ms (the backoff starts there)",
  }).prefault("10 s"),
  segment_upload_timeout: duration(finitePositive).prefault("90 s"),
  fetch_concurrency: int(1, 1024).prefault(4),
  fetch_timeout: duration({
    ok: (n) => n > 0 && n < 10_000,
    expected: "above 0 and below 10 s",
  }).prefault("5 s"),
  fetch_bandwidth: size(positive, true).prefault("unlimited"),
  connection_idle_timeout: duration(finite).prefault("5 s"),
  delete_batch_per_pass: int(1, 1000).prefault(300),
  delete_pending_per_partition: int(1).prefault(5000),
  delete_grace: duration(finite).prefault("60 s"),
  default_local_retention_age: duration().prefault("unlimited"),
  default_local_retention_size: size().prefault("unlimited"),
  housekeeping: housekeepingSchema.prefault({}),
  s3: s3Schema.prefault({}),
  fs: fsSchema.prefault({}),
  gcs: gcsSchema.prefault({}),
  azure: azureSchema.prefault({}),
  cache: cacheSchema.prefault({}),
});

const U32_MAX = 4_294_967_295;

const topicSchema = z.strictObject({
  stream: int(0, U32_MAX),
  topic: int(0, U32_MAX),
  tiered_storage: z.boolean().prefault(true),
  local_retention_age: duration().optional(),
  local_retention_size: size().optional(),
  message_expiry: duration().prefault("unlimited"),
  max_topic_size: size().prefault("unlimited"),
});

const fileSchema = z.strictObject({
  agent: agentSchema,
  tiered_storage: tieredStorageSchema.prefault({}),
  topic: z.array(topicSchema).prefault([]),
});

type FileConfig = z.output<typeof fileSchema>;

/**
 * The schema of `tierd.toml` as a zod codec: `parse` turns the TOML document (after env
 * overrides) into a {@link Config}, filling each `[[topic]]`'s omitted local retention from
 * `default_local_retention_*`; `z.encode` turns a `Config` back into a TOML-ready object with
 * durations and sizes as text. Cross-key rules are in `rules.ts`; paths are resolved by `load.ts`.
 */
export const configSchema = z.codec(fileSchema, z.custom<Config>(), {
  decode: (file: FileConfig): Config => ({
    ...file,
    topic: file.topic.map((t) => ({
      ...t,
      local_retention_age: t.local_retention_age ??
        file.tiered_storage.default_local_retention_age,
      local_retention_size: t.local_retention_size ??
        file.tiered_storage.default_local_retention_size,
    })),
  }),
  encode: (config: Config): FileConfig => config,
});
