// Opens the object store the config names, with the key prefix that goes with it. Stores that
// speak HTTP send through a fetch with response deadlines (`fetch_timeout` for the first byte
// and for each stall of a body), so a store that stops answering frees its callers in time.
import { AzureStore } from "../providers/azure/store.ts";
import { FsStore } from "../providers/fs/store.ts";
import { tokenSourceFromConfig } from "../providers/gcs/credentials.ts";
import { GcsStore } from "../providers/gcs/store.ts";
import { S3Store } from "../providers/s3/store.ts";
import { SimStore } from "../providers/sim/store.ts";
import type { ObjectStore } from "../providers/types.ts";
import { deadlineFetch } from "../providers/deadline_fetch.ts";
import type { FetchFn } from "../providers/http.ts";
import type { Config } from "./config/schema.ts";

/** The configured store and the prefix of every key tierd writes to it. */
export interface OpenedStore {
  store: ObjectStore;
  prefix: string;
  /** Where the store is, for messages (never includes credentials). */
  describe: string;
}

/** Thrown when the configured backend is not available in this build. */
export class BackendUnavailableError extends Error {
  override readonly name = "BackendUnavailableError";
}

/** Opens the store of `config.tiered_storage.backend` (loading GCS credentials if needed). */
export async function openStore(config: Config): Promise<OpenedStore> {
  const ts = config.tiered_storage;
  const fetch = storeFetch(ts.fetch_timeout);
  switch (ts.backend) {
    case "fs":
      return {
        store: new FsStore({ root: ts.fs.path }),
        prefix: ts.fs.prefix,
        describe: `fs store at ${ts.fs.path}`,
      };
    case "sim":
      return { store: new SimStore(), prefix: "iggy", describe: "in-memory sim store" };
    case "s3": {
      const s3 = ts.s3;
      const store = new S3Store({
        endpoint: s3.endpoint === "" ? undefined : s3.endpoint,
        region: s3.region,
        bucket: s3.bucket,
        credentials: {
          accessKeyId: s3.access_key,
          secretAccessKey: s3.secret_key,
          sessionToken: s3.session_token === "" ? undefined : s3.session_token,
        },
        urlStyle: s3.url_style,
        conditionalComplete: s3.conditional_writes ? "header" : "head",
        fetch,
      });
      return {
        store,
        prefix: s3.prefix,
        describe: `s3 ${store.endpoint} bucket '${s3.bucket}'`,
      };
    }
    case "gcs": {
      const gcs = ts.gcs;
      const store = new GcsStore({
        bucket: gcs.bucket,
        endpoint: gcs.endpoint === "" ? undefined : gcs.endpoint,
        tokens: await tokenSourceFromConfig(gcs),
        fetch,
      });
      const where = gcs.endpoint === "" ? "Google Cloud Storage" : gcs.endpoint;
      return { store, prefix: gcs.prefix, describe: `gcs ${where} bucket '${gcs.bucket}'` };
    }
    case "azure": {
      const az = ts.azure;
      const store = new AzureStore({
        account: az.account,
        container: az.container,
        endpoint: az.endpoint === "" ? undefined : az.endpoint,
        sharedKey: az.shared_key === "" ? undefined : az.shared_key,
        sasToken: az.sas_token === "" ? undefined : az.sas_token,
        fetch,
      });
      return {
        store,
        prefix: az.prefix,
        describe: `azure ${store.endpoint} container '${az.container}'`,
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
 */
export function storeFetch(timeoutMs: number): FetchFn {
  return deadlineFetch((input, init) => globalThis.fetch(input, init), {
    firstByteMs: timeoutMs,
    stallMs: timeoutMs,
  });
}
