// The shape of `tierd.toml`: types that name keys exactly as the file does, and the zod schema
// that reads the file into them. Durations are milliseconds and sizes are bytes (`Infinity` for
// "unlimited"); the schema is a codec, so a parsed config encodes back to the file's text form.
// Rules that relate several keys live in `rules.ts`.
import { z } from "zod";
import {
  AWS_CREDENTIAL_SOURCES,
  type AwsSourceName,
  AZURE_CREDENTIAL_SOURCES,
  type AzureSourceName,
  GCS_CREDENTIAL_SOURCES,
  type GcsSourceName,
  sourcesMessage,
} from "../../providers/credentials/sources.ts";
import { LISTEN_EXPECTED, parseListen } from "./listen.ts";
import {
  AZURE_ACCOUNT_EXPECTED,
  AZURE_CONTAINER_EXPECTED,
  AZURE_KEY_EXPECTED,
  azureAccountProblem,
  azureContainerProblem,
  base64Problem,
  GCS_BUCKET_EXPECTED,
  gcsBucketProblem,
  KEY_SEGMENT_EXPECTED,
  keySegmentProblem,
  PREFIX_EXPECTED,
  prefixProblem,
  S3_BUCKET_EXPECTED,
  s3BucketProblem,
} from "./names.ts";
import { MIN_SCRUBBED_LENGTH } from "./secrets.ts";
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

/**
 * `[agent.broker]`: the broker's HTTP API, used for `evict_via = "broker"`, and by reads to ask
 * when the broker created a partition after its metadata journal changed (a topic deleted and
 * recreated is never answered from the deleted one's copies).
 */
export interface BrokerConfig {
  /** The broker's HTTP API, e.g. `"http://127.0.0.1:3000"`; `""` = none. @default "" */
  http_url: string;
  /** The user tierd logs in as (with `password`). @default "" */
  username: string;
  /** That user's password. @default "" */
  password: string;
  /** A personal access token, instead of `username` and `password`. @default "" */
  personal_access_token: string;
  /**
   * PEM file of the CA that signed the broker's certificate, for an `https://` `http_url`
   * signed by a private CA; the system's CAs when empty. @default ""
   */
  tls_ca: string;
}

/** `[agent.iggy_http]`: a second listener speaking the broker's own HTTP API (src/iggy_http/). */
export interface IggyHttpConfig {
  /** `host:port`, e.g. `"127.0.0.1:3001"`; `""` = off. @default "" */
  listen: string;
  /**
   * How long a client token's broker check is reused per partition; the binary front
   * (`[agent.iggy_tcp]`) reuses a connection's probe and resolved names as long. At most 60 s: a
   * revoked permission reads evicted data until it runs out. @default 1 s
   */
  auth_cache_ttl: number;
}

/**
 * `[agent.iggy_tcp]`: a front for the broker's TCP binary protocol (src/iggy_tcp/): clients
 * connect here as they would to the broker; each gets its own connection to the broker.
 */
export interface IggyTcpConfig {
  /** `host:port`, e.g. `"127.0.0.1:8091"`; `""` = off. @default "" */
  listen: string;
  /** The broker's TCP transport, `host:port` (its `tcp.address`). @default "" */
  broker_address: string;
  /** PEM certificate chain the front presents; with `tls_key`, clients speak TLS. @default "" */
  tls_cert: string;
  /** PEM private key of `tls_cert`. @default "" */
  tls_key: string;
  /** Speak TLS to the broker (its `tcp.tls.enabled`). @default false */
  broker_tls: boolean;
  /** PEM CA bundle that signed the broker's certificate; `""` = the system's. @default "" */
  broker_tls_ca: string;
  /** The name the broker's certificate must carry; `""` = the host of `broker_address`. @default "" */
  broker_tls_domain: string;
  /** The largest frame taken from a client or the broker; a larger one closes that connection. @default 64 MiB */
  max_frame_size: number;
  /** Client connections open at most; more are closed as they arrive. @default 1024 */
  max_connections: number;
}

/** `[agent]`: the sidecar process itself. */
export interface AgentConfig {
  /**
   * The broker's data directory (Iggy `local_data`), holding `streams/`; tierd never writes
   * there. Required; `tierd run` refuses to start when it is missing or holds no `streams/`.
   * Absolute after loading.
   */
  data_dir: string;
  /**
   * tierd's own directory: journals, `.remote` markers, index copies and (by default) the cache.
   * Never `data_dir` or inside it, nor the fs store or the cache or inside them. Absolute after
   * loading. Unset under systemd with `StateDirectory=`: `$STATE_DIRECTORY` (and the cache's
   * `path`, unset, `$CACHE_DIRECTORY`). @default "var/state"
   */
  state_dir: string;
  /** Where the HTTP API, metrics and status page listen, `host:port`. @default "127.0.0.1:7070" */
  listen: string;
  /**
   * The key space `{prefix}/{cluster_id}/` this broker's objects go to: the second segment of
   * every object key. A key space has one owner (`owner.json` in it): an agent that finds it
   * owned by another refuses to start, so each broker sharing a bucket and prefix needs its own.
   * The key space is recorded in `{state_dir}/agent.json` at the first start; a config that later
   * names another is refused. @default "local"
   */
  cluster_id: string;
  /** The broker's segment format; `auto` detects it per partition. @default "auto" */
  format: SegmentFormat;
  /** How long a sealed segment's files must be quiet before tierd copies it. @default 5 s */
  seal_quiescence: number;
  /**
   * Bearer token for `POST /v1/admin/*`: at least 8 characters, no whitespace; `""` turns the
   * admin routes off. @default ""
   */
  api_token: string;
  /**
   * Who may read tiered messages through `GET /v1/…/records`: `iggy` (credentials the broker
   * accepts for polling that partition: `Authorization: Bearer <the broker's JWT>` or `Basic`
   * user and password, checked with the broker at `[agent.broker] http_url`), `token` (`Bearer
   * <read_token>`), or `none` (anyone who reaches `listen`: refused on an address other than
   * loopback unless `read_auth_insecure = true`). @default "none"
   */
  read_auth: "iggy" | "token" | "none";
  /**
   * PEM certificate chain the API and the Iggy HTTP listener present: with `tls_key` they serve
   * HTTPS (and the binary front TLS, unless `[agent.iggy_tcp]` has its own). Read again on
   * SIGHUP. The ops listener stays plain HTTP. @default ""
   */
  tls_cert: string;
  /** PEM private key of `tls_cert`. @default "" */
  tls_key: string;
  /** The bearer token of `read_auth = "token"` (env `TIERD_READ_TOKEN`). @default "" */
  read_token: string;
  /**
   * Serve records without access control on an address other than loopback (`read_auth =
   * "none"`): every tiered message to whoever reaches the port. @default false
   */
  read_auth_insecure: boolean;
  /**
   * A second listener for `/healthz`, `/readyz` and `/metrics` only, `host:port`, so that probes
   * and Prometheus need not reach the data API; `""` = none (they stay on `listen` as well).
   * @default ""
   */
  ops_listen: string;
  /**
   * How an evicted segment leaves the broker: `broker` (Iggy's DeleteSegments API, safe beside
   * a running broker), `unlink` (tierd removes the files: only while the broker is stopped), or
   * `auto` (`broker` when `[agent.broker] http_url` is set, else `unlink`). @default "auto"
   */
  evict_via: EvictVia;
  /** The lowest level of log line written. @default "info" */
  log_level: LogLevel;
  /** How long a connection has to send a whole request head. @default 10 s */
  http_header_timeout: number;
  /** How long a kept-alive connection may sit without a request. @default 30 s */
  http_idle_timeout: number;
  /** Open HTTP connections at most; 0 = from the open-file limit (at most 1024). @default 0 */
  http_max_connections: number;
  /**
   * Bytes reads may hold in memory at once, node-wide (a streamed raw read reserves 4 MiB, a
   * JSON read five times its max_bytes, a poll the Iggy fronts answer from the bucket twice its
   * expected peak); over it a read waits briefly, then answers 503. The agent stays resident
   * within its idle size + this + about 200 MiB. 0 = a sixteenth of the cache size, between
   * 64 MiB and 512 MiB. @default 0
   */
  read_memory_budget: number;
  broker: BrokerConfig;
  iggy_http: IggyHttpConfig;
  iggy_tcp: IggyTcpConfig;
}

/** `[tiered_storage.housekeeping]`: background jobs that run when the agent is idle. */
export interface HousekeepingConfig {
  /** A housekeeping run at least this often, busy or not. @default 5 m */
  interval: number;
  /** How long the request rate must stay low before an idle run. @default 10 s */
  idle_timeout: number;
  /** Store requests per second below which the agent counts as idle. @default 10 */
  idle_threshold_rps: number;
  /** Store requests one housekeeping run may spend. @default 5000 */
  request_quota: number;
  /**
   * Time between sweeps of what this agent retired (a recreated topic's old incarnation, a
   * purged partition's old generation); nothing else is ever swept. `"unlimited"` = never.
   * @default 1 h
   */
  orphan_sweep_interval: number;
  /** How long after it was retired an incarnation or generation is swept. @default 1 d */
  orphan_grace: number;
  /** Time between `manifest.json` rewrites per partition. @default 60 s */
  manifest_upload_interval: number;
  /**
   * Time between verify passes (HEAD of every copy below the floor); `"unlimited"` = never.
   * @default 6 h
   */
  verify_interval: number;
}

/** The credential sources of `[tiered_storage.s3]`. */
export type AwsCredentialsSource = AwsSourceName;
/** The credential sources of `[tiered_storage.gcs]`. */
export type GcsCredentialsSource = GcsSourceName;
/** The credential sources of `[tiered_storage.azure]`. */
export type AzureCredentialsSource = AzureSourceName;

/** `[tiered_storage.s3]`: AWS S3 and S3-compatible stores. */
export interface S3Config {
  /** The bucket (AWS naming rules); required with `backend = "s3"`. @default "" */
  bucket: string;
  /**
   * The bucket's region, signed into every request; `""`: AWS_REGION, AWS_DEFAULT_REGION, the
   * profile's `region`, else us-east-1. @default ""
   */
  region: string;
  /** `""` = AWS; set for MinIO, Ceph RGW, R2 (`http://` or `https://`). @default "" */
  endpoint: string;
  /**
   * `path` (`endpoint/bucket/key`), `virtual` (`bucket.endpoint/key`) or `auto`. @default "auto"
   */
  url_style: "auto" | "path" | "virtual";
  /** The first segment(s) of every object key. @default "iggy" */
  prefix: string;
  /** The access key id, for `credentials_source = "static"`. @default "" */
  access_key: string;
  /** The secret access key, for `credentials_source = "static"`. @default "" */
  secret_key: string;
  /** A session token for temporary credentials. @default "" */
  session_token: string;
  /**
   * Where credentials come from. `auto` walks: the keys above, the environment, the shared
   * files' profile, web identity, container credentials, EC2 IMDSv2 (asked only when the
   * endpoint is AWS or `imds_endpoint` or AWS_EC2_METADATA_SERVICE_ENDPOINT names one).
   * `static`: the keys above; `none`: unsigned requests (no Authorization header). @default "auto"
   */
  credentials_source: AwsCredentialsSource;
  /** Profile of the shared credentials/config files; `""`: AWS_PROFILE, else `default`. @default "" */
  profile: string;
  /** Web identity token file; `""`: AWS_WEB_IDENTITY_TOKEN_FILE. @default "" */
  web_identity_token_file: string;
  /** Role for web identity; `""`: AWS_ROLE_ARN. @default "" */
  web_identity_role_arn: string;
  /** Set: STS AssumeRole this role on top of the credentials the source gives. @default "" */
  assume_role_arn: string;
  /** The AssumeRole session name; `""`: `tierd-` and random digits. @default "" */
  assume_role_session_name: string;
  /** The role's external id, if its trust policy asks for one. @default "" */
  assume_role_external_id: string;
  /** The lifetime asked of STS for temporary credentials; 15 min to 12 h. @default 1 h */
  credentials_duration: number;
  /**
   * STS endpoint; `""`: the S3 endpoint when it is not AWS (MinIO), else STS in the region.
   * @default ""
   */
  sts_endpoint: string;
  /**
   * EC2 instance metadata; `""`: AWS_EC2_METADATA_SERVICE_ENDPOINT, else 169.254.169.254.
   * @default ""
   */
  imds_endpoint: string;
  /** Create objects with `If-None-Match: *`; false falls back to HEAD-then-PUT. @default true */
  conditional_writes: boolean;
  /**
   * The checksum sent with every upload, which the store verifies on ingest: `crc32` (the AWS
   * SDKs' default, and the cheapest to compute), `crc64nvme`, `crc32c`, `sha256`
   * (`x-amz-checksum-*`), `md5` (`Content-MD5`, which every S3 implementation checks), `none`, or
   * `auto`: the boot probe tries each, in that order, on a small object under the prefix and
   * keeps the first the store takes (`tierd probe` says which, and how copies will
   * be proven). Copies are proven before eviction by the store's stored checksum where it keeps
   * one, else by reading them back. Which store needs what: docs/operations.md, "Buckets as
   * companies configure them". @default "auto"
   */
  checksum: "auto" | "crc32" | "crc64nvme" | "crc32c" | "sha256" | "md5" | "none";
  /**
   * The storage class of every object tierd writes (`x-amz-storage-class`): `STANDARD_IA`,
   * `INTELLIGENT_TIERING`, `GLACIER_IR`, `ONEZONE_IA`, `STANDARD`, `REDUCED_REDUNDANCY`,
   * `EXPRESS_ONEZONE`, another the store defines (Ceph RGW), or `""` = the bucket's default.
   * `GLACIER` and `DEEP_ARCHIVE` are refused: their objects cannot be read until restored. The
   * probe writes with it, so a class the store does not take is named at start. @default ""
   */
  storage_class: string;
  /**
   * Server-side encryption asked on every write (`x-amz-server-side-encryption`): `aws:kms`
   * (with `sse_kms_key_id`), `AES256` (S3-managed keys), or `""` = the bucket's default.
   * @default ""
   */
  sse: "" | "AES256" | "aws:kms";
  /** The KMS key of `sse = "aws:kms"` (an id, ARN or alias); `""` = the account's default. @default "" */
  sse_kms_key_id: string;
  /** Use an S3 Bucket Key for SSE-KMS (fewer KMS calls, lower cost). @default false */
  sse_bucket_key: boolean;
  /** The KMS encryption context of SSE-KMS writes, as an inline table of strings. @default {} */
  sse_context: Record<string, string>;
}

/** `[tiered_storage.fs]`: a directory as the object store. */
export interface FsConfig {
  /**
   * The store's root directory (never inside `agent.data_dir`; never `state_dir` or the cache,
   * nor inside or around them); required with `backend = "fs"`. Absolute after loading.
   * @default ""
   */
  path: string;
  /** The first segment(s) of every object key. @default "iggy" */
  prefix: string;
}

/** `[tiered_storage.gcs]`: Google Cloud Storage (JSON API). */
export interface GcsConfig {
  /** The bucket (GCS naming rules); required with `backend = "gcs"`. @default "" */
  bucket: string;
  /** The first segment(s) of every object key. @default "iggy" */
  prefix: string;
  /** `""` = Google's; set for fake-gcs-server. @default "" */
  endpoint: string;
  /**
   * `auto` (application default credentials): `token`, `service_account_key`,
   * `credentials_file` or GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, the metadata server.
   * @default "auto"
   */
  credentials_source: GcsCredentialsSource;
  /** Path to the service account JSON key file; absolute after loading. @default "" */
  service_account_key: string;
  /**
   * A credentials file (service account or external_account); `""`:
   * GOOGLE_APPLICATION_CREDENTIALS. @default ""
   */
  credentials_file: string;
  /** The metadata server; `""`: GCE_METADATA_HOST, else metadata.google.internal. @default "" */
  metadata_endpoint: string;
  /** A static bearer token, for `credentials_source = "static"`. @default "" */
  token: string;
  /**
   * The storage class of the objects tierd writes: `STANDARD`, `NEARLINE`, `COLDLINE`,
   * `ARCHIVE` (all read at once; the colder, the dearer a read and the longer the minimum
   * storage), or `""` = the bucket's default. Staged parts of multipart uploads stay in the
   * default. @default ""
   */
  storage_class: "" | "STANDARD" | "NEARLINE" | "COLDLINE" | "ARCHIVE";
  /**
   * The Cloud KMS key (CMEK) of every object written, staged parts included:
   * `projects/P/locations/L/keyRings/R/cryptoKeys/K`; `""` = the bucket's default. @default ""
   */
  kms_key_name: string;
}

/** `[tiered_storage.azure]`: Azure Blob Storage. */
export interface AzureConfig {
  /** The storage account (3–24 lowercase letters and digits). @default "" */
  account: string;
  /** The blob container (Azure naming rules). @default "" */
  container: string;
  /** The first segment(s) of every object key. @default "iggy" */
  prefix: string;
  /** `""` = `https://{account}.blob.core.windows.net`; set for Azurite. @default "" */
  endpoint: string;
  /** The account key, base64 as the portal shows it; set this or `sas_token`. @default "" */
  shared_key: string;
  /** A SAS token, instead of `shared_key`. @default "" */
  sas_token: string;
  /**
   * `auto`: the SAS or shared key when set, else Entra ID tokens from workload identity, a
   * client secret, then the managed identity. @default "auto"
   */
  credentials_source: AzureCredentialsSource;
  /** The app (client) id for Entra ID tokens; `""`: AZURE_CLIENT_ID. @default "" */
  client_id: string;
  /** The tenant id for Entra ID tokens; `""`: AZURE_TENANT_ID. @default "" */
  tenant_id: string;
  /** The app's client secret; `""`: AZURE_CLIENT_SECRET. @default "" */
  client_secret: string;
  /** The workload identity token file; `""`: AZURE_FEDERATED_TOKEN_FILE. @default "" */
  federated_token_file: string;
  /**
   * Where Entra ID tokens come from; `""`: AZURE_AUTHORITY_HOST, else
   * https://login.microsoftonline.com. @default ""
   */
  authority_host: string;
  /** The managed identity endpoint; `""`: http://169.254.169.254. @default "" */
  imds_endpoint: string;
  /**
   * The access tier of the blobs tierd writes (`x-ms-access-tier`): `Hot`, `Cool`, `Cold`, or
   * `""` = the account's default. `Archive` is refused: its blobs cannot be read until
   * rehydrated. @default ""
   */
  access_tier: string;
  /** The encryption scope of every write (`x-ms-encryption-scope`); `""` = the container's. @default "" */
  encryption_scope: string;
}

/**
 * `[tiered_storage.request_prices]`: what the store charges per request, for the estimate of
 * `tierd_store_request_cost_estimate` and the status page. The defaults are S3 Standard's in
 * us-east-1 (2025); set your store's.
 */
export interface RequestPricesConfig {
  /** The currency the prices are in, as shown. @default "USD" */
  currency: string;
  /** Per 1,000 PUT, POST and LIST requests (uploads, parts, completions, listings). @default 0.005 */
  write_per_1000: number;
  /** Per 1,000 GET and HEAD requests. @default 0.0004 */
  read_per_1000: number;
  /** Per 1,000 DELETE requests (and aborted uploads); S3 charges none. @default 0 */
  delete_per_1000: number;
}

/** `[tiered_storage.cache]`: the local chunk cache for remote reads. */
export interface CacheConfig {
  /**
   * The cache directory; `""` = `{state_dir}/cache`. Never `state_dir` itself, nor the fs store or
   * inside it. Absolute after loading. @default ""
   */
  path: string;
  /**
   * The cache's size budget (the smaller of this and `size_percent`); at least
   * 2 × `chunk_size` × `fetch_concurrency`. @default 4 GiB
   */
  size: number;
  /** Percent of the cache's disk; the smaller of this and `size` is the budget. @default 20 */
  size_percent: number;
  /** Most chunk files kept. @default 100000 */
  max_objects: number;
  /** Bytes fetched per chunk: a multiple of 4 KiB within 1–64 MiB. @default 8 MiB */
  chunk_size: number;
  /** Readahead cap, in chunks. @default 4 */
  readahead_max: number;
  /** A trim frees space down to this percent of the budget. @default 80 */
  low_watermark_percent: number;
  /** The least time between two trims. @default 5 s */
  trim_min_interval: number;
  /**
   * Chunk files are written around the page cache (direct I/O) where the runtime and the file
   * system allow it; a file system that refuses it gets page-cache writes. @default true
   */
  direct_io: boolean;
}

/**
 * `[tiered_storage]`: tiering itself: the store, uploads, reads from the store, deletion limits
 * and the default local retention (the RFC's keys, plus `part_size`).
 */
export interface TieredStorageConfig {
  /** Tiering on; `tierd run` refuses to start without it. @default false */
  enabled: boolean;
  /**
   * The object store: `s3`, `gcs`, `azure`, `fs` (a directory) or `sim` (in memory). @default "s3"
   */
  backend: BackendName;
  /** Most uploads in flight node-wide (one per partition at a time). @default 2 */
  upload_concurrency: number;
  /**
   * Bytes read, hashed and sent per step. Not supported yet: nothing reads it, and setting it is
   * an error (see {@link NOT_SUPPORTED_YET}). @default 1 MiB
   */
  upload_piece_size: number;
  /**
   * Objects up to this are one PUT; larger ones go multipart in parts this big (5 MiB–5 GiB).
   * @default 8 MiB
   */
  part_size: number;
  /** The ceiling of the idle scan's back-off and of store retries' back-off. @default 10 s */
  upload_loop_backoff_max: number;
  /**
   * The deadline for one segment's store work (its copy, cleanup, re-verify, delete). @default 90 s
   */
  segment_upload_timeout: number;
  /** Most store fetches in flight for reads. @default 4 */
  fetch_concurrency: number;
  /**
   * Worker threads that send the cache's chunk fetches (ranged GETs of 1 MiB or more) and read
   * their bodies off the event loop, so that the main thread only plans and serves: `"auto"` is
   * one fewer than the cores, from 1 to 4; 0 sends them from the event loop. A worker idle for 2 s
   * stops. @default "auto"
   */
  fetch_workers: "auto" | number;
  /** How long a read waits for the store before answering 503 (below 10 s). @default 5 s */
  fetch_timeout: number;
  /** Download rate cap for reads, like `"100 MiB/s"`. @default unlimited */
  fetch_bandwidth: number;
  /**
   * Upload rate cap, node-wide, like `"50 MiB/s"`: every body sent to the store (segments, their
   * parts and retries) waits for its bytes, so a backlog after an outage leaves the broker's
   * network room. Reloaded on SIGHUP. @default unlimited
   */
  upload_bandwidth: number;
  /**
   * Pooled connections idle longer are not reused. Not supported yet: nothing reads it, and
   * setting it is an error (see {@link NOT_SUPPORTED_YET}). @default 5 s
   */
  connection_idle_timeout: number;
  /** Most objects deleted by total retention per pass, all partitions together. @default 300 */
  delete_batch_per_pass: number;
  /** Most retention deletions pending per partition. @default 5000 */
  delete_pending_per_partition: number;
  /** How long an object stays after it became deletable. @default 60 s */
  delete_grace: number;
  /** `local_retention_age` of a `[[topic]]` that omits it. @default unlimited */
  default_local_retention_age: number;
  /** `local_retention_size` of a `[[topic]]` that omits it. @default unlimited */
  default_local_retention_size: number;
  housekeeping: HousekeepingConfig;
  s3: S3Config;
  fs: FsConfig;
  gcs: GcsConfig;
  azure: AzureConfig;
  cache: CacheConfig;
  request_prices: RequestPricesConfig;
}

/** One `[[topic]]`: a topic tierd looks after. Topics not listed are not tiered. */
export interface TopicConfig {
  /** The numeric stream id. */
  stream: number;
  /** The numeric topic id. */
  topic: number;
  /** Tier this topic; false lists it without tiering it. @default true */
  tiered_storage: boolean;
  /**
   * Evict a copied segment locally once its newest message is older than this (eviction is
   * opt-in). @default tiered_storage.default_local_retention_age
   */
  local_retention_age: number;
  /**
   * Evict copied segments, oldest first, while the partition's local segments exceed this.
   * @default tiered_storage.default_local_retention_size
   */
  local_retention_size: number;
  /**
   * Total retention: remote copies whose newest message is older than this are deleted. @default
   * unlimited
   */
  message_expiry: number;
  /**
   * Total retention: the topic's bytes above which the oldest evicted copies are deleted. @default
   * unlimited
   */
  max_topic_size: number;
  /**
   * The storage class (S3, GCS) or access tier (Azure) of this topic's segment copies, in place
   * of the backend's `storage_class` / `access_tier`, with the same rules: a cold topic in
   * `GLACIER_IR` or `Cold`, a hot one in the default. `""` = the backend's. @default ""
   */
  storage_class: string;
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

/**
 * Keys the file may not set yet: the schema keeps them, with their defaults, for the code that
 * will read them, but nothing in tierd does so far. Setting one is a config error ("not
 * supported yet"), so a value that would do nothing is never silently accepted; `config show`
 * and `docs/configuration.md` leave them out of the effective config.
 */
export const NOT_SUPPORTED_YET: readonly (readonly string[])[] = [
  ["tiered_storage", "upload_piece_size"],
  ["tiered_storage", "connection_idle_timeout"],
];

// ---- field builders -------------------------------------------------------------------------

/** A check on a parsed number; `expected` completes "expected ...". */
interface Bound {
  ok(n: number): boolean;
  expected: string;
}

const MiB = 1024 * 1024;

/**
 * A parsed duration or size: a non-negative number, `Infinity` included (z.number() refuses it).
 */
function bounded(bound?: Bound) {
  const n = z.custom<number>((v) => typeof v === "number" && v >= 0);
  return bound ? n.refine((v) => bound.ok(v), { message: bound.expected }) : n;
}

function unitIssue(e: unknown, text: string, ctx: z.core.ParsePayload<unknown>): never {
  if (!(e instanceof UnitError)) throw e;
  ctx.issues.push({ code: "custom", message: e.expected, input: text });
  return z.NEVER;
}

/** A duration written as text, parsed to milliseconds; `meta().unit` names it for the docs. */
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
  }).meta({ unit: "duration" });
}

/**
 * A size written as text (or a bare byte count), parsed to bytes. `/s` allowed for rates.
 * `meta().unit` names it for the docs.
 */
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
  }).meta({ unit: rate ? "size per second" : "size" });
}

function int(min: number, max = Number.MAX_SAFE_INTEGER) {
  return z.number().int().min(min).max(max);
}

function httpUrl(what: string) {
  return z.string().refine((s) => s === "" || /^https?:\/\/[^\s/]+/i.test(s) && URL.canParse(s), {
    message: `an http:// or https:// URL, or "" for ${what}`,
  });
}

/**
 * A string checked by `problem` (from `names.ts`): the issue reads "expected {expected} ({why})".
 * An empty string passes when `emptyOk` (the cross-key rules say when it is required).
 */
function named(expected: string, problem: (s: string) => string | undefined, emptyOk = true) {
  return z.string().superRefine((s, ctx) => {
    if (emptyOk && s === "") return;
    const why = problem(s);
    if (why) ctx.addIssue({ code: "custom", message: `${expected} (${why})`, input: s });
  });
}

const PREFIX = named(PREFIX_EXPECTED, prefixProblem, false);

/** `agent.api_token`: sent in an Authorization header and scrubbed from every log line. */
function tokenProblem(token: string): string | undefined {
  if (/\s/.test(token)) return "it contains whitespace, which no Authorization header carries";
  if (token.length < MIN_SCRUBBED_LENGTH) {
    return `it is shorter than ${MIN_SCRUBBED_LENGTH} characters, which the log would not scrub`;
  }
  return undefined;
}

const positive: Bound = { ok: (n) => n > 0, expected: "more than 0" };
const finite: Bound = { ok: Number.isFinite, expected: 'a finite duration (not "unlimited")' };
/**
 * How long a broker's answer about a client's access may be reused: a revoked permission keeps
 * reading evicted data that long, so never more than a minute.
 */
const atMostAMinute: Bound = {
  ok: (n) => Number.isFinite(n) && n <= 60_000,
  expected: "a duration of at most 60 s (a revoked permission is honoured within it)",
};
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
  tls_ca: z.string().prefault(""),
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
  auth_cache_ttl: duration(atMostAMinute).prefault("1 s"),
});

const listenOrOff = z.string().refine((s) => {
  if (s === "") return true;
  try {
    parseListen(s);
    return true;
  } catch {
    return false;
  }
}, { message: `${LISTEN_EXPECTED}, or "" for off` });

const iggyTcpSchema = z.strictObject({
  listen: listenOrOff.prefault(""),
  broker_address: listenOrOff.prefault(""),
  tls_cert: z.string().prefault(""),
  tls_key: z.string().prefault(""),
  broker_tls: z.boolean().prefault(false),
  broker_tls_ca: z.string().prefault(""),
  broker_tls_domain: z.string().prefault(""),
  max_frame_size: size({
    ok: (n) => n >= 1024 && n <= 4 * 1024 * MiB,
    expected: "between 1 KiB and 4 GiB",
  })
    .prefault("64 MiB"),
  max_connections: int(1, 1_000_000).prefault(1024),
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
  cluster_id: named(KEY_SEGMENT_EXPECTED, keySegmentProblem, false).prefault("local"),
  format: z.enum(["auto", "iggy-0.8", "iggy-0.9"]).prefault("auto"),
  seal_quiescence: duration(finite).prefault("5 s"),
  api_token: named(
    `"" (admin routes off), or a token of ${MIN_SCRUBBED_LENGTH} or more characters ` +
      "without whitespace",
    tokenProblem,
  ).prefault(""),
  read_auth: z.enum(["iggy", "token", "none"]).prefault("none"),
  tls_cert: z.string().prefault(""),
  tls_key: z.string().prefault(""),
  read_token: named(
    `"", or a token of ${MIN_SCRUBBED_LENGTH} or more characters without whitespace`,
    tokenProblem,
  ).prefault(""),
  read_auth_insecure: z.boolean().prefault(false),
  ops_listen: listenOrOff.prefault(""),
  evict_via: z.enum(["auto", "broker", "unlink"]).prefault("auto"),
  log_level: z.enum(["debug", "info", "warn", "error"]).prefault("info"),
  http_header_timeout: duration(finitePositive).prefault("10 s"),
  http_idle_timeout: duration(finitePositive).prefault("30 s"),
  http_max_connections: int(0).prefault(0),
  read_memory_budget: size().prefault("0"),
  broker: brokerSchema.prefault({}),
  iggy_http: iggyHttpSchema.prefault({}),
  iggy_tcp: iggyTcpSchema.prefault({}),
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

/** S3 storage classes whose objects can be read at once. */
export const S3_STORAGE_CLASSES = [
  "STANDARD",
  "STANDARD_IA",
  "ONEZONE_IA",
  "INTELLIGENT_TIERING",
  "GLACIER_IR",
  "REDUCED_REDUNDANCY",
  "EXPRESS_ONEZONE",
] as const;

/**
 * Why `storage_class` cannot be used, or undefined when it can: AWS's classes that read at once,
 * and any other name in S3's spelling (Ceph RGW's placement classes, MinIO's tiers); the probe
 * then finds out whether the store takes it.
 */
export function s3StorageClassProblem(s: string): string | undefined {
  if (s === "" || (S3_STORAGE_CLASSES as readonly string[]).includes(s)) return undefined;
  if (s === "GLACIER" || s === "DEEP_ARCHIVE") {
    return `${s} objects cannot be read until restored (hours): evicted data would be ` +
      `unreadable; use GLACIER_IR (instant retrieval) or a lifecycle rule on older objects`;
  }
  if (/^[A-Z][A-Z0-9_]{0,63}$/.test(s)) return undefined;
  return `one of ${S3_STORAGE_CLASSES.join(", ")}, another class the store defines in ` +
    `S3's spelling (capitals, digits, "_"), or "" for the bucket's default`;
}

/** GCS's storage classes (all read at once). */
export const GCS_STORAGE_CLASSES = ["STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE"] as const;

/** Why an Azure access tier cannot be used, or undefined when it can. */
export function azureAccessTierProblem(s: string): string | undefined {
  if (s === "Hot" || s === "Cool" || s === "Cold") return undefined;
  return s === "Archive"
    ? "Archive blobs cannot be read until rehydrated (hours): evicted data would be " +
      "unreadable; use Cold, or a lifecycle rule on older blobs"
    : 'one of "Hot", "Cool", "Cold", or "" for the account\'s default';
}

const ARN = z.string().refine((s) => s === "" || /^arn:[a-z-]+:[a-z0-9-]*:/.test(s), {
  message: 'an ARN like "arn:aws:iam::123456789012:role/tierd", or ""',
});

const s3Schema = z.strictObject({
  bucket: named(S3_BUCKET_EXPECTED, s3BucketProblem).prefault(""),
  region: z.string().prefault(""),
  endpoint: httpUrl("AWS").prefault(""),
  url_style: z.enum(["auto", "path", "virtual"]).prefault("auto"),
  prefix: PREFIX.prefault("iggy"),
  access_key: z.string().prefault(""),
  secret_key: z.string().prefault(""),
  session_token: z.string().prefault(""),
  credentials_source: z.enum(
    AWS_CREDENTIAL_SOURCES,
    { message: sourcesMessage(AWS_CREDENTIAL_SOURCES) },
  ).prefault("auto"),
  profile: z.string().prefault(""),
  web_identity_token_file: z.string().prefault(""),
  web_identity_role_arn: ARN.prefault(""),
  assume_role_arn: ARN.prefault(""),
  assume_role_session_name: z.string().regex(/^[\w+=,.@-]{0,64}$/, {
    message: "at most 64 of letters, digits and +=,.@_-",
  }).prefault(""),
  assume_role_external_id: z.string().prefault(""),
  credentials_duration: duration({
    ok: (n) => n >= 900_000 && n <= 12 * 3_600_000,
    expected: "between 15 min and 12 h (what STS accepts)",
  }).prefault("1 h"),
  sts_endpoint: httpUrl("STS in the region, or the S3 endpoint when it is not AWS").prefault(""),
  imds_endpoint: httpUrl("http://169.254.169.254").prefault(""),
  conditional_writes: z.boolean().prefault(true),
  checksum: z.enum(["auto", "crc32", "crc64nvme", "crc32c", "sha256", "md5", "none"]).prefault(
    "auto",
  ),
  storage_class: z.string().superRefine((s, ctx) => {
    const problem = s3StorageClassProblem(s);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  }).prefault(""),
  sse: z.enum(["", "AES256", "aws:kms"]).prefault(""),
  sse_kms_key_id: z.string().prefault(""),
  sse_bucket_key: z.boolean().prefault(false),
  sse_context: z.record(z.string(), z.string()).prefault({}),
});

const fsSchema = z.strictObject({
  path: z.string().prefault(""),
  prefix: PREFIX.prefault("iggy"),
});

const gcsSchema = z.strictObject({
  bucket: named(GCS_BUCKET_EXPECTED, gcsBucketProblem).prefault(""),
  prefix: PREFIX.prefault("iggy"),
  endpoint: httpUrl("Google's endpoint").prefault(""),
  credentials_source: z.enum(
    GCS_CREDENTIAL_SOURCES,
    { message: sourcesMessage(GCS_CREDENTIAL_SOURCES) },
  ).prefault("auto"),
  service_account_key: z.string().prefault(""),
  credentials_file: z.string().prefault(""),
  metadata_endpoint: httpUrl("GCE_METADATA_HOST or metadata.google.internal").prefault(""),
  token: z.string().prefault(""),
  storage_class: z.enum(["", ...GCS_STORAGE_CLASSES]).prefault(""),
  kms_key_name: z.string().refine(
    (s) =>
      s === "" || /^projects\/[^/]+\/locations\/[^/]+\/keyRings\/[^/]+\/cryptoKeys\/[^/]+$/.test(s),
    { message: 'a key like "projects/P/locations/L/keyRings/R/cryptoKeys/K", or ""' },
  ).prefault(""),
});

const azureSchema = z.strictObject({
  account: named(AZURE_ACCOUNT_EXPECTED, azureAccountProblem).prefault(""),
  container: named(AZURE_CONTAINER_EXPECTED, azureContainerProblem).prefault(""),
  prefix: PREFIX.prefault("iggy"),
  endpoint: httpUrl("https://{account}.blob.core.windows.net").prefault(""),
  shared_key: named(AZURE_KEY_EXPECTED, base64Problem).prefault(""),
  sas_token: z.string().prefault(""),
  credentials_source: z.enum(
    AZURE_CREDENTIAL_SOURCES,
    { message: sourcesMessage(AZURE_CREDENTIAL_SOURCES) },
  ).prefault("auto"),
  client_id: z.string().prefault(""),
  tenant_id: z.string().prefault(""),
  client_secret: z.string().prefault(""),
  federated_token_file: z.string().prefault(""),
  authority_host: httpUrl("AZURE_AUTHORITY_HOST or login.microsoftonline.com").prefault(""),
  imds_endpoint: httpUrl("http://169.254.169.254").prefault(""),
  access_tier: z.string().superRefine((s, ctx) => {
    const problem = s === "" ? undefined : azureAccessTierProblem(s);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  }).prefault(""),
  encryption_scope: z.string().prefault(""),
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
  direct_io: z.boolean().prefault(true),
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
  fetch_workers: z.union([z.literal("auto"), int(0, 64)], {
    error: 'expected "auto" or a whole number of worker threads from 0 to 64',
  }).meta({ unit: '`"auto"` \\| integer' }).prefault("auto"),
  fetch_timeout: duration({
    ok: (n) => n > 0 && n < 10_000,
    expected: "above 0 and below 10 s",
  }).prefault("5 s"),
  fetch_bandwidth: size(positive, true).prefault("unlimited"),
  upload_bandwidth: size(positive, true).prefault("unlimited"),
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
  request_prices: z.strictObject({
    currency: z.string().regex(/^[A-Za-z$€£¥]{1,8}$/, {
      message: 'a short currency name like "USD" or "EUR"',
    }).prefault("USD"),
    write_per_1000: z.number().min(0).prefault(0.005),
    read_per_1000: z.number().min(0).prefault(0.0004),
    delete_per_1000: z.number().min(0).prefault(0),
  }).prefault({}),
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
  storage_class: z.string().prefault(""),
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
