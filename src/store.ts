// Opens the object store the config names, with the key prefix that goes with it.
import { FsStore } from "../providers/fs/store.ts";
import { SimStore } from "../providers/sim/store.ts";
import type { ObjectStore } from "../providers/types.ts";
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

/** Opens the store of `config.tiered_storage.backend`. */
export function openStore(config: Config): OpenedStore {
  const ts = config.tiered_storage;
  switch (ts.backend) {
    case "fs":
      return {
        store: new FsStore({ root: ts.fs.path }),
        prefix: ts.fs.prefix,
        describe: `fs store at ${ts.fs.path}`,
      };
    case "sim":
      return { store: new SimStore(), prefix: "iggy", describe: "in-memory sim store" };
    default:
      throw new BackendUnavailableError(
        `backend "${ts.backend}" is not available in this build of tierd`,
      );
  }
}
