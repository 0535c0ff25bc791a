// Builds agent configs for tests: a broker dir, a state dir and an fs (or sim) store.
import { parseConfig } from "../src/config/load.ts";
import type { Config } from "../src/config/schema.ts";

export interface TestConfigOptions {
  dir: string;
  backend?: "fs" | "sim";
  topics?: { stream: number; topic: number }[];
  extra?: string;
  partSize?: string;
  format?: string;
  uploadTimeout?: string;
}

/** The TOML text of a test config rooted at `dir` (var-like layout beneath it). */
export function testConfigText(o: TestConfigOptions): string {
  const topics = o.topics ?? [{ stream: 0, topic: 0 }];
  return `
[agent]
data_dir = "${o.dir}/broker"
state_dir = "${o.dir}/state"
seal_quiescence = "0 s"
format = "${o.format ?? "auto"}"
# No broker runs beside a test's generated directory: unlink as beside a stopped one ("auto"
# would look for a running broker first; the tests of that set it themselves).
evict_via = "unlink"
log_level = "error"

[tiered_storage]
enabled = true
backend = "${o.backend ?? "fs"}"
part_size = "${o.partSize ?? "8 MiB"}"
segment_upload_timeout = "${o.uploadTimeout ?? "3 s"}"
upload_loop_backoff_max = "500 ms"
# Tests of total retention want a deletable copy gone in the pass that finds it.
delete_grace = "0 s"

[tiered_storage.fs]
path = "${o.dir}/store"

[tiered_storage.cache]
path = "${o.dir}/cache"

${topics.map((t) => `[[topic]]\nstream = ${t.stream}\ntopic = ${t.topic}\n`).join("\n")}
${o.extra ?? ""}
`;
}

/** A parsed test config (see {@link testConfigText}). */
export function testConfig(o: TestConfigOptions): Config {
  return parseConfig(testConfigText(o), `${o.dir}/tierd.toml`, {});
}
