// Rules that relate several config keys (the RFC's validation list): backend
// required fields, cache sizing, eviction route, duplicate topics, and tierd's directories kept
// out of the broker's. Single-key checks are in the schema; these run on a config that already
// parsed, with its paths absolute.
import { isAbsolute, relative } from "node:path";
import type { Config } from "./schema.ts";
import { formatSize } from "./units.ts";

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

/**
 * Checks the cross-key rules.
 *
 * @param config a config the schema accepted, its paths made absolute
 * @returns every violation, in file order; empty when the config is sound
 */
export function checkRules(config: Config): RuleViolation[] {
  const out: RuleViolation[] = [];
  const ts = config.tiered_storage;
  const need = (path: (string | number)[], expected: string) => out.push({ path, expected });

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

  if (config.agent.iggy_http.listen !== "" && config.agent.broker.http_url === "") {
    need(
      ["agent", "broker", "http_url"],
      "the broker's HTTP API URL when agent.iggy_http.listen is set (the broker it fronts)",
    );
  }

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
  });

  return out;
}
