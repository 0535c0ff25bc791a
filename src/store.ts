// Opens the object store the config names, with the key prefix that goes with it and its
// credentials (store_credentials.ts): what `tierd probe` reports about them and the secrets they
// hold, for the logger to scrub. Stores that speak HTTP send through a fetch with response
// deadlines (`fetch_timeout` for the first byte and for each stall of a body), so a store that
// stops answering frees its callers in time; their chunk-sized GETs go to worker threads
// (`fetch_workers`, providers/fetch_workers.ts) with the same deadlines.
import { AzureStore } from "../providers/azure/store.ts";
import { FsStore } from "../providers/fs/store.ts";
import { GcsStore } from "../providers/gcs/store.ts";
import type { CredentialReport } from "../providers/credentials/types.ts";
import { probeDir } from "../providers/probe.ts";
import { probeSpace } from "./layout/probe_space.ts";
import { S3Store } from "../providers/s3/store.ts";
import { SimStore } from "../providers/sim/store.ts";
import type { ObjectStore } from "../providers/types.ts";
import { deadlineFetch } from "../providers/deadline_fetch.ts";
import { autoFetchWorkers, FetchWorkers } from "../providers/fetch_workers.ts";
import type { FetchFn } from "../providers/http.ts";
import { CHUNK_BLOCK_SIZE } from "./cache/chunk_format.ts";
import type { Config } from "./config/schema.ts";
import type { Logger } from "./log.ts";
import {
  azureCredentials,
  type CredentialDeps,
  gcsTokens,
  s3Credentials,
} from "./store_credentials.ts";

/** The configured store and the prefix of every key tierd writes to it. */
export interface OpenedStore {
  store: ObjectStore;
  prefix: string;
  /** Where the store is, for messages (never includes credentials). */
  describe: string;
  /** Which credential source answered and why the others did not (after the first request). */
  credentials?: () => CredentialReport;
  /** Every secret the credentials hold now (key ids, secrets, tokens), for scrubbing. */
  secrets: () => string[];
  /** Where the region came from (S3), for `tierd probe`. */
  regionFrom?: string;
  /** The worker threads that send its chunk-sized GETs (`fetch_workers`), for the metrics. */
  fetchWorkers?: FetchWorkers;
}

/** Thrown when the configured backend is not available in this build. */
export class BackendUnavailableError extends Error {
  override readonly name = "BackendUnavailableError";
}

/**
 * Opens the store of `config.tiered_storage.backend` with its credentials.
 * @param deps what credential sources run on (tests), and the metrics observer
 */
export async function openStore(
  config: Config,
  deps: CredentialDeps & { logger?: Logger } = {},
): Promise<OpenedStore> {
  const none = () => [];
  const ts = config.tiered_storage;
  const inThread = storeFetch(ts.fetch_timeout, deps.fetch);
  // Tests that bring their own transport keep it for every request.
  const threads = ts.fetch_workers === "auto" ? autoFetchWorkers() : ts.fetch_workers;
  const workers = deps.fetch === undefined && threads > 0 && ts.backend !== "fs" &&
      ts.backend !== "sim"
    ? new FetchWorkers({
      firstByteMs: ts.fetch_timeout,
      stallMs: ts.fetch_timeout,
      inThread,
      workers: threads,
      blockSize: CHUNK_BLOCK_SIZE,
      onBroken: (why, forGood) =>
        deps.logger?.error(
          forGood
            ? "a store fetch worker thread cannot start; chunk fetches go through the event loop"
            : "a store fetch worker thread failed; its fetches failed and a new one takes the next",
          { why },
        ),
    })
    : undefined;
  const fetch = workers?.fetch ?? inThread;
  switch (ts.backend) {
    case "fs":
      return {
        store: new FsStore({ root: ts.fs.path }),
        prefix: ts.fs.prefix,
        describe: `fs store at ${ts.fs.path}`,
        secrets: none,
      };
    case "sim":
      return {
        store: new SimStore(),
        prefix: "iggy",
        describe: "in-memory sim store",
        secrets: none,
      };
    case "s3": {
      const s3 = ts.s3;
      const { credentials, region, regionFrom } = await s3Credentials(s3, deps);
      const store = new S3Store({
        endpoint: s3.endpoint === "" ? undefined : s3.endpoint,
        region,
        bucket: s3.bucket,
        credentials,
        urlStyle: s3.url_style,
        conditionalComplete: s3.conditional_writes ? "header" : "head",
        checksum: s3.checksum,
        probeDir: probeDir(s3.prefix, probeSpace(config.agent.state_dir)),
        write: {
          storageClass: s3.storage_class || undefined,
          sse: s3.sse || undefined,
          kmsKeyId: s3.sse_kms_key_id || undefined,
          bucketKey: s3.sse_bucket_key,
          context: s3.sse_context,
        },
        fetch,
        clock: deps.clock,
      });
      const supplier = credentials === "none" ? undefined : credentials;
      return {
        store,
        prefix: s3.prefix,
        fetchWorkers: workers,
        describe: `s3 ${store.endpoint} bucket '${s3.bucket}'`,
        credentials: () =>
          supplier?.report() ??
            { source: "none", steps: [{ source: "none", outcome: "used", reason: "unsigned" }] },
        secrets: () => supplier?.secrets() ?? [],
        regionFrom,
      };
    }
    case "gcs": {
      const gcs = ts.gcs;
      const tokens = await gcsTokens(gcs, deps);
      const store = new GcsStore({
        bucket: gcs.bucket,
        endpoint: gcs.endpoint === "" ? undefined : gcs.endpoint,
        tokens,
        fetch,
        write: {
          storageClass: gcs.storage_class || undefined,
          kmsKeyName: gcs.kms_key_name || undefined,
        },
      });
      const where = gcs.endpoint === "" ? "Google Cloud Storage" : gcs.endpoint;
      return {
        store,
        prefix: gcs.prefix,
        fetchWorkers: workers,
        describe: `gcs ${where} bucket '${gcs.bucket}'`,
        credentials: () =>
          tokens.report?.() ??
            {
              source: tokens.describe,
              steps: [{ source: tokens.describe, outcome: "used", reason: "" }],
            },
        secrets: () => tokens.secrets(),
      };
    }
    case "azure": {
      const az = ts.azure;
      const auth = azureCredentials(az, deps);
      const store = new AzureStore({
        account: az.account,
        container: az.container,
        endpoint: az.endpoint === "" ? undefined : az.endpoint,
        sharedKey: auth.kind === "shared-key" ? auth.sharedKey : undefined,
        sasToken: auth.kind === "sas" ? auth.sasToken : undefined,
        tokens: auth.kind === "bearer" ? auth.tokens : undefined,
        fetch,
        clock: deps.clock,
        write: {
          accessTier: az.access_tier || undefined,
          encryptionScope: az.encryption_scope || undefined,
        },
      });
      const fixed = auth.kind === "bearer" ? undefined : auth.kind === "sas" ? "sas" : "shared_key";
      return {
        store,
        prefix: az.prefix,
        fetchWorkers: workers,
        describe: `azure ${store.endpoint} container '${az.container}'`,
        credentials: () =>
          auth.kind === "bearer" ? auth.tokens.report?.() ?? { steps: [] } : {
            source: fixed,
            steps: [{ source: fixed!, outcome: "used", reason: "in the config" }],
          },
        secrets: () =>
          auth.kind === "bearer"
            ? auth.tokens.secrets()
            : [auth.kind === "sas" ? auth.sasToken : auth.sharedKey],
      };
    }
    default:
      throw new BackendUnavailableError(
        `backend "${ts.backend}" is not available in this build of tierd`,
      );
  }
}

/**
 * The fetch the HTTP stores send with: an answer must start, and its body keep flowing, within
 * `timeoutMs` (`fetch_timeout`, below 10 s) — far longer than a healthy store is ever silent.
 * @param base the transport underneath @default globalThis.fetch
 */
export function storeFetch(timeoutMs: number, base?: FetchFn): FetchFn {
  return deadlineFetch(base ?? ((input, init) => globalThis.fetch(input, init)), {
    firstByteMs: timeoutMs,
    stallMs: timeoutMs,
  });
}
