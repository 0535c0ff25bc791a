// openStore and `tiered_storage.fetch_workers`: "auto" and a number give an HTTP store worker
// threads for its chunk fetches (the auto count, or as many as asked), 0 gives none, and the fs
// store never gets any; a value that is neither "auto" nor a thread count is refused naming the
// key.
import assert from "node:assert/strict";
import { autoFetchWorkers } from "../providers/fetch_workers.ts";
import { ConfigError } from "../src/config/error.ts";
import { parseConfig } from "../src/config/load.ts";
import type { Config } from "../src/config/schema.ts";
import { openStore } from "../src/store.ts";
import { testConfigText } from "./_config.ts";
import { tempDir } from "./_util.ts";

/** A config with `setting` under [tiered_storage], on S3 at an endpoint nobody answers. */
function config(dir: string, setting: string, backend = "s3"): Config {
  const text = testConfigText({ dir }).replace(
    'backend = "fs"',
    `backend = "${backend}"\n${setting}`,
  ) +
    `\n[tiered_storage.s3]\nendpoint = "http://127.0.0.1:9"\nbucket = "tierd-test"\nregion = "us-east-1"\n` +
    `access_key = "a"\nsecret_key = "s"\n`;
  return parseConfig(text, `${dir}/tierd.toml`, {});
}

Deno.test("fetch_workers: auto and a count give an HTTP store worker threads, 0 and the fs store none", async () => {
  const dir = await tempDir("tierd-fetch-workers");
  try {
    // Opening sends nothing; no worker starts before the first chunk-sized GET.
    const threads = async (setting: string, backend?: string) => {
      const opened = await openStore(config(dir.path, setting, backend), { env: () => undefined });
      try {
        return opened.fetchWorkers === undefined ? 0 : opened.fetchWorkers.size;
      } finally {
        opened.fetchWorkers?.close();
        await opened.store.close?.();
      }
    };
    assert.equal(await threads(""), autoFetchWorkers(), "the default is auto");
    assert.equal(await threads('fetch_workers = "auto"'), autoFetchWorkers());
    assert.equal(await threads("fetch_workers = 3"), 3);
    assert.equal(await threads("fetch_workers = 0"), 0);
    assert.equal(await threads("fetch_workers = 3", "fs"), 0, "no HTTP to move");
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fetch_workers: a value that is not auto or a thread count is refused, naming the key", async () => {
  const dir = await tempDir("tierd-fetch-workers");
  try {
    for (const bad of ["-1", "65", "1.5", '"many"', "true"]) {
      assert.throws(() => config(dir.path, `fetch_workers = ${bad}`), (err: unknown) => {
        assert.ok(err instanceof ConfigError, String(err));
        assert.match(err.message, /tiered_storage\.fetch_workers/, bad);
        return true;
      });
    }
  } finally {
    await dir.cleanup();
  }
});
