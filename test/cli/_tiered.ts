// A tiered partition for the CLI tests of `verify` and `plan`: segments generated in a broker
// directory, a config file the CLI reads, passes of the tier worker on the fs store, and a
// snapshot of every file under the test's directory (broker, state, store) to show a command
// changed nothing.
import { createHash } from "node:crypto";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { FsStore } from "../../providers/fs/store.ts";
import { loadConfig } from "../../src/config/load.ts";
import type { Config } from "../../src/config/schema.ts";
import { type GeneratedSegment, generatePartition } from "../../src/format/generate.ts";
import { initHashes } from "../../src/hash.ts";
import { silentLogger } from "../../src/log.ts";
import { type PassReport, TierWorker } from "../../src/tier/tier_worker.ts";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";

await initHashes();

/** A generated partition 0/0/0 and the store and config around it. */
export interface TieredFixture {
  root: string;
  configPath: string;
  config: Config;
  store: FsStore;
  segments: GeneratedSegment[];
  /** The store's file of an object's bytes. */
  objectFile(key: string): string;
  /**
   * Writes the config file anew: `topic` holds keys of the `[[topic]]` of 0/0, `edit` changes
   * the whole text (an `[agent]` key); returns it as loaded.
   */
  writeConfig(topic?: string, edit?: (text: string) => string): Promise<Config>;
  /** One pass of the tier worker under the config file as it is now. */
  pass(): Promise<PassReport>;
  /** Every file under the test's directory, by path, as a hash of its bytes. */
  snapshot(): Promise<Map<string, string>>;
  cleanup(): Promise<void>;
}

/** Options of {@link tieredFixture}. */
export interface FixtureOptions {
  /** @default 3000 */
  messages?: number;
  /** @default "iggy-0.8" */
  format?: "iggy-0.8" | "iggy-0.9";
}

/** Generates partition 0/0/0 (64 KiB segments) and writes a config without retention. */
export async function tieredFixture(o: FixtureOptions = {}): Promise<TieredFixture> {
  const tmp = await tempDir("tierd-cli-tiered");
  const root = tmp.path;
  const configPath = join(root, "tierd.toml");
  let config: Config;
  await write("");
  const segments = await generatePartition({
    format: o.format ?? "iggy-0.8",
    dataDir: config!.agent.data_dir,
    stream: 0,
    topic: 0,
    partition: 0,
    messages: o.messages ?? 3000,
    segmentSize: 64 * 1024,
  });
  const store = new FsStore({ root: config!.tiered_storage.fs.path });

  async function write(topic: string, edit: (text: string) => string = (t) => t): Promise<Config> {
    const text = testConfigText({
      dir: root,
      topics: [],
      extra: `[[topic]]\nstream = 0\ntopic = 0\n${topic}\n`,
    });
    await writeFile(configPath, edit(text));
    return config = await loadConfig(configPath, {});
  }

  return {
    root,
    configPath,
    get config() {
      return config;
    },
    store,
    segments,
    objectFile: (key) => join(config.tiered_storage.fs.path, "objects", ...key.split("/")),
    writeConfig: write,
    async pass() {
      const worker = new TierWorker({ config, store, prefix: "iggy", logger: silentLogger });
      try {
        return await worker.pass();
      } finally {
        await worker.close();
      }
    },
    snapshot: () => snapshot(root),
    cleanup: () => tmp.cleanup(),
  };
}

async function snapshot(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (dir: string) => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        out.set(path + "/", "dir");
        await walk(path);
      } else {
        out.set(path, createHash("sha256").update(await readFile(path)).digest("hex"));
      }
    }
  };
  await walk(root);
  return out;
}
