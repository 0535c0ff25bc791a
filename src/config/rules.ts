// Rules that relate several config keys (the RFC's validation list): backend
// required fields, cache sizing, eviction route, duplicate topics, tierd's directories kept out of
// the broker's, and kept apart from each other. Single-key checks are in the schema; these run on
// a config that already parsed, with its paths absolute.
import { parseListen } from "./listen.ts";
import { isAbsolute, relative } from "node:path";
import {
  azureAccessTierProblem,
  type Config,
  GCS_STORAGE_CLASSES,
  s3StorageClassProblem,
} from "./schema.ts";
import { formatSize } from "./units.ts";

/**
 * What a command talks to. A rule about one (its address, its credentials) matters only to the
 * commands that use it: `tierd ls` reads the state dir and the data dir, and does not need the
 * broker's password or the store's keys, which an operator's shell often lacks.
 */
export type Service = "broker" | "store" | "listeners";

/** Every service: what `tierd run` and `tierd config check` use. */
export const ALL_SERVICES: readonly Service[] = ["broker", "store", "listeners"];

/** One broken rule: the key path it is reported at and what was expected there. */
export interface RuleViolation {
  /** Key path segments, e.g. `["tiered_storage", "s3", "bucket"]` or `["topic", 1]`. */
  path: (string | number)[];
  /** Completes "expected ...". */
  expected: string;
}

/** True when `path` is `dir` or lies under it (both absolute; no file system access). */
export function within(path: string, dir: string): boolean {
  const r = relative(dir, path);
  return r === "" || (r !== ".." && !r.startsWith("../") && !isAbsolute(r));
}

/** True when `listen`'s host is a loopback address (127.0.0.0/8, ::1, localhost). */
export function isLoopback(listen: string): boolean {
  let host: string;
  try {
    host = parseListen(listen).host.toLowerCase();
  } catch {
    return false;
  }
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Checks the cross-key rules.
 *
 * @param config a config the schema accepted, its paths made absolute
 * @param uses the services the command talks to: rules about the others are not checked
 * @default uses {@linkcode ALL_SERVICES}
 * @returns every violation, in file order; empty when the config is sound
 */
export function checkRules(
  config: Config,
  uses: readonly Service[] = ALL_SERVICES,
): RuleViolation[] {
  const out: RuleViolation[] = [];
  const groups: [Service | undefined, RuleGroup][] = [
    ["broker", brokerRules],
    ["listeners", listenerRules],
    ["store", storeRules],
    [undefined, layoutRules],
  ];
  for (const [service, rules] of groups) {
    if (service !== undefined && !uses.includes(service)) continue;
    rules(config, (path, expected) => out.push({ path, expected }));
  }
  return out;
}

/** Reports one broken rule at `path`. */
type Need = (path: (string | number)[], expected: string) => void;
/** A group of rules about one service (or about none). */
type RuleGroup = (config: Config, need: Need) => void;

/** tierd's link to the broker: eviction through its API. */
function brokerRules(config: Config, need: Need): void {
  if (config.agent.evict_via === "broker") {
    const b = config.agent.broker;
    if (b.http_url === "") {
      need(["agent", "broker", "http_url"], 'the broker\'s HTTP API URL when evict_via = "broker"');
    }
    if (b.personal_access_token === "" && (b.username === "" || b.password === "")) {
      need(
        ["agent", "broker", b.username === "" ? "username" : "password"],
        'username and password (env TIERD_BROKER_PASSWORD), or personal_access_token (env TIERD_BROKER_TOKEN), when evict_via = "broker"',
      );
    }
  }
}

/** What tierd serves: who may read, its certificates, the Iggy fronts and their broker. */
function listenerRules(config: Config, need: Need): void {
  const agent = config.agent;
  if (agent.read_auth === "token" && agent.read_token === "") {
    need(["agent", "read_token"], 'a token (env TIERD_READ_TOKEN) when read_auth = "token"');
  }
  if (agent.read_auth === "iggy" && agent.broker.http_url === "") {
    need(
      ["agent", "broker", "http_url"],
      "the broker's HTTP API URL when read_auth = \"iggy\" (it checks the readers' credentials)",
    );
  }
  if (agent.read_auth === "none" && !agent.read_auth_insecure && !isLoopback(agent.listen)) {
    need(
      ["agent", "read_auth"],
      `"iggy" or "token" when agent.listen (${agent.listen}) is not a loopback address: with ` +
        '"none" whoever reaches the port reads every tiered message (read_auth_insecure = true ' +
        "allows it on purpose)",
    );
  }

  if (config.agent.iggy_http.listen !== "" && config.agent.broker.http_url === "") {
    need(
      ["agent", "broker", "http_url"],
      "the broker's HTTP API URL when agent.iggy_http.listen is set (the broker it fronts)",
    );
  }

  const tcp = config.agent.iggy_tcp;
  if (tcp.listen !== "" && tcp.broker_address === "") {
    need(
      ["agent", "iggy_tcp", "broker_address"],
      "the broker's TCP address when agent.iggy_tcp.listen is set (the broker it fronts)",
    );
  }
  if ((agent.tls_cert === "") !== (agent.tls_key === "")) {
    need(
      ["agent", agent.tls_cert === "" ? "tls_cert" : "tls_key"],
      "both tls_cert and tls_key (the API's certificate and its key), or neither",
    );
  }
  if ((tcp.tls_cert === "") !== (tcp.tls_key === "")) {
    need(
      ["agent", "iggy_tcp", tcp.tls_cert === "" ? "tls_cert" : "tls_key"],
      "both tls_cert and tls_key (the front's certificate and its key), or neither",
    );
  }
}

/** The store: its required fields and credentials. */
function storeRules(config: Config, need: Need): void {
  const ts = config.tiered_storage;
  if (ts.enabled) {
    const when = `when enabled = true and backend = "${ts.backend}"`;
    switch (ts.backend) {
      case "s3": {
        const s3 = ts.s3;
        if (s3.bucket === "") need(["tiered_storage", "s3", "bucket"], `a bucket name ${when}`);
        const keysHalfSet = (s3.access_key === "") !== (s3.secret_key === "");
        if (
          s3.credentials_source === "static" ||
          (s3.credentials_source === "auto" && keysHalfSet)
        ) {
          if (s3.access_key === "") {
            need(
              ["tiered_storage", "s3", "access_key"],
              `an access key (or env TIERD_S3_ACCESS_KEY) ${when} and credentials_source = "${s3.credentials_source}"${
                s3.credentials_source === "auto" ? " and secret_key is set" : ""
              }`,
            );
          }
          if (s3.secret_key === "") {
            need(
              ["tiered_storage", "s3", "secret_key"],
              `a secret key (or env TIERD_S3_SECRET_KEY) ${when} and credentials_source = "${s3.credentials_source}"${
                s3.credentials_source === "auto" ? " and access_key is set" : ""
              }`,
            );
          }
        }
        if (s3.sse !== "aws:kms") {
          const kmsOnly = (key: string, set: boolean) => {
            if (set) need(["tiered_storage", "s3", key], `no value unless sse = "aws:kms"`);
          };
          kmsOnly("sse_kms_key_id", s3.sse_kms_key_id !== "");
          kmsOnly("sse_bucket_key", s3.sse_bucket_key);
          kmsOnly("sse_context", Object.keys(s3.sse_context).length > 0);
        }
        break;
      }
      case "gcs": {
        const gcs = ts.gcs;
        if (gcs.bucket === "") need(["tiered_storage", "gcs", "bucket"], `a bucket name ${when}`);
        if (gcs.credentials_source === "service_account" && gcs.service_account_key === "") {
          need(
            ["tiered_storage", "gcs", "service_account_key"],
            `the path of a service account JSON key ${when} and credentials_source = "service_account"`,
          );
        }
        if (gcs.credentials_source === "static" && gcs.token === "") {
          need(
            ["tiered_storage", "gcs", "token"],
            `a bearer token (or env TIERD_GCS_TOKEN) ${when} and credentials_source = "static"`,
          );
        }
        break;
      }
      case "azure": {
        const az = ts.azure;
        if (az.account === "") {
          need(["tiered_storage", "azure", "account"], `a storage account name ${when}`);
        }
        if (az.container === "") {
          need(["tiered_storage", "azure", "container"], `a container name ${when}`);
        }
        if (az.credentials_source === "shared_key" && az.shared_key === "") {
          need(
            ["tiered_storage", "azure", "shared_key"],
            `a shared key (or env TIERD_AZURE_KEY) ${when} and credentials_source = "shared_key"`,
          );
        } else if (az.credentials_source === "sas" && az.sas_token === "") {
          need(
            ["tiered_storage", "azure", "sas_token"],
            `a SAS token (or env TIERD_AZURE_SAS) ${when} and credentials_source = "sas"`,
          );
        } else if (az.shared_key !== "" && az.sas_token !== "") {
          need(
            ["tiered_storage", "azure", "sas_token"],
            "only one of shared_key and sas_token; both are set",
          );
        }
        break;
      }
      case "fs":
        if (ts.fs.path === "") need(["tiered_storage", "fs", "path"], `a directory ${when}`);
        break;
      case "sim":
        break;
    }
  }
}

/** What every command needs kept: the cache's size, directories apart, topics listed once. */
function layoutRules(config: Config, need: Need): void {
  const ts = config.tiered_storage;
  const minCache = 2 * ts.cache.chunk_size * ts.fetch_concurrency;
  if (ts.cache.size < minCache) {
    need(
      ["tiered_storage", "cache", "size"],
      `at least 2 × chunk_size × fetch_concurrency = 2 × ${
        formatSize(ts.cache.chunk_size)
      } × ${ts.fetch_concurrency} = ${formatSize(minCache)}`,
    );
  }

  // The sidecar contract: tierd never writes into the broker's data directory.
  const dataDir = config.agent.data_dir;
  const stateDir = config.agent.state_dir;
  if (stateDir === dataDir) {
    need(
      ["agent", "state_dir"],
      "a directory of tierd's own, not agent.data_dir itself (tierd would write its journals and " +
        ".remote markers into the broker's partition directories)",
    );
  } else if (within(stateDir, dataDir)) {
    need(
      ["agent", "state_dir"],
      `a directory outside agent.data_dir (${dataDir}): tierd never writes into the broker's data`,
    );
  }
  if (within(ts.cache.path, dataDir) && !within(ts.cache.path, stateDir)) {
    need(
      ["tiered_storage", "cache", "path"],
      `a directory outside agent.data_dir (${dataDir}): tierd never writes into the broker's data`,
    );
  }
  if (ts.fs.path !== "" && within(ts.fs.path, dataDir)) {
    need(
      ["tiered_storage", "fs", "path"],
      `a directory outside agent.data_dir (${dataDir}): the store must not live in the broker's data`,
    );
  }

  for (const clash of ownDirClashes(ownDirs(config))) {
    need(
      OWN_DIR_NAMES[clash.inner].split("."),
      clash.same
        ? `a directory of its own, not ${OWN_DIR_NAMES[clash.outer]} itself: ${clash.why}`
        : `a directory outside ${OWN_DIR_NAMES[clash.outer]} (${clash.outerPath}): ${clash.why}`,
    );
  }

  const seen = new Map<string, number>();
  config.topic.forEach((t, i) => {
    const key = `${t.stream}/${t.topic}`;
    const first = seen.get(key);
    if (first === undefined) seen.set(key, i);
    else {
      need(
        ["topic", i],
        `each (stream, topic) listed once; stream ${t.stream} topic ${t.topic} is already topic[${first}]`,
      );
    }
    if (t.storage_class !== "") {
      const problem = topicStorageClassProblem(ts.backend, t.storage_class);
      if (problem) need(["topic", i, "storage_class"], problem);
    }
  });
}

/** Why a `[[topic]] storage_class` cannot be used with `backend`, or undefined when it can. */
function topicStorageClassProblem(backend: string, value: string): string | undefined {
  switch (backend) {
    case "s3":
      return s3StorageClassProblem(value);
    case "gcs":
      return (GCS_STORAGE_CLASSES as readonly string[]).includes(value)
        ? undefined
        : `one of ${GCS_STORAGE_CLASSES.join(", ")} (GCS's classes)`;
    case "azure":
      return azureAccessTierProblem(value);
    default:
      return `no value: the ${backend} store has no storage classes`;
  }
}

// ---- tierd's own directories, kept apart -----------------------------------------------------

/** One of tierd's own directories: the state dir, the chunk cache, an `fs` store. */
export type OwnDir = "state" | "cache" | "fs";

/** Each of tierd's directories' key path. */
export const OWN_DIR_NAMES: Readonly<Record<OwnDir, string>> = {
  state: "agent.state_dir",
  cache: "tiered_storage.cache.path",
  fs: "tiered_storage.fs.path",
};

/**
 * The directories tierd itself uses: the state dir, the cache, and the `fs` store only with
 * `backend = "fs"` (a leftover `fs.path` under another backend is no directory of tierd's).
 *
 * @param config a loaded config (paths absolute)
 * @returns each directory in use, by role
 */
export function ownDirs(config: Config): Partial<Record<OwnDir, string>> {
  const ts = config.tiered_storage;
  return {
    state: config.agent.state_dir,
    cache: ts.cache.path,
    ...(ts.backend === "fs" && ts.fs.path !== "" ? { fs: ts.fs.path } : {}),
  };
}

/** Two of tierd's directories placed where wiping one, as the docs allow, would wipe the other. */
export interface OwnDirClash {
  /** The directory reported: the one inside (or, when `same`, the one that must move). */
  inner: OwnDir;
  /** The directory it lies in or is. */
  outer: OwnDir;
  /** `outer`'s path, as given. */
  outerPath: string;
  /** Both are the same directory (else `inner` lies inside `outer`). */
  same: boolean;
  /** What would be wiped with what, in plain words. */
  why: string;
}

const CACHE_DELETED = "deleting the cache (allowed at any time while tierd is stopped)";
const STATE_WIPED =
  "wiping the state dir (as before a tierd restore, which rebuilds it from the bucket)";

/**
 * The pairs refused: `inner` inside `outer` when `inside`, the same directory when `same`. Each
 * equal pair is refused by one row only, so it is reported once. The cache inside the state dir
 * (the default, `{state_dir}/cache`) is fine: wiping the state also drops a cache, only a cache.
 */
const APART: readonly {
  inner: OwnDir;
  outer: OwnDir;
  inside: boolean;
  same: boolean;
  why: string;
}[] = [
  {
    inner: "fs",
    outer: "state",
    inside: true,
    same: true,
    why: `the fs store must not live where ${STATE_WIPED} would wipe the bucket`,
  },
  {
    inner: "fs",
    outer: "cache",
    inside: true,
    same: true,
    why: `the fs store must not live where ${CACHE_DELETED} would delete the bucket`,
  },
  {
    inner: "state",
    outer: "fs",
    inside: true,
    same: false,
    why: "the state dir must not live in the store's directory, where cleaning the bucket would " +
      "wipe the journals and .remote markers",
  },
  {
    inner: "cache",
    outer: "fs",
    inside: true,
    same: false,
    why: "the cache must not live in the store's directory, which is the bucket's alone: its " +
      "files would lie among the bucket's objects, and cleaning the bucket would wipe it",
  },
  {
    inner: "state",
    outer: "cache",
    inside: true,
    same: false,
    why: `the state dir must not live where ${CACHE_DELETED} would delete the journals and ` +
      ".remote markers",
  },
  {
    inner: "cache",
    outer: "state",
    inside: false,
    same: true,
    why: `${CACHE_DELETED} would delete the journals and .remote markers; leave cache.path ` +
      "unset for {state_dir}/cache",
  },
];

/**
 * Which of tierd's directories lie where wiping one would wipe another. Pure: the paths are
 * compared as given, so the caller decides whether they are as written or with symlinks resolved.
 *
 * @param dirs tierd's directories in use, absolute (see {@link ownDirs})
 * @returns every clash, in a fixed order; empty when they are apart
 */
export function ownDirClashes(dirs: Partial<Record<OwnDir, string>>): OwnDirClash[] {
  const out: OwnDirClash[] = [];
  for (const rule of APART) {
    const inner = dirs[rule.inner];
    const outer = dirs[rule.outer];
    if (inner === undefined || outer === undefined || !within(inner, outer)) continue;
    const same = relative(outer, inner) === "";
    if (same ? rule.same : rule.inside) {
      out.push({ inner: rule.inner, outer: rule.outer, outerPath: outer, same, why: rule.why });
    }
  }
  return out;
}
