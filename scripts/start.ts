// `deno task start`: runs the agent on the embedded filesystem store. Uses ./tierd.toml when
// present, else tierd.example.toml; generates a sample partition when the broker dir is empty.
import { existsSync } from "node:fs";
import { main } from "../src/cli/main.ts";
import { loadConfig } from "../src/config/load.ts";
import { discoverPartitions } from "../src/partition/discover.ts";

const configPath = existsSync("tierd.toml") ? "tierd.toml" : "tierd.example.toml";
console.error(`start: using ${configPath}`);
const config = await loadConfig(configPath);
const dataDir = config.agent.data_dir;
if ((await discoverPartitions(dataDir)).length === 0) {
  const topic = config.topic.find((t) => t.tiered_storage) ?? { stream: 0, topic: 0 };
  console.error(
    `start: no partition under ${dataDir}; generating a sample Iggy 0.9 partition ` +
      `(stream ${topic.stream}, topic ${topic.topic}, partition 0: 20000 messages, 1 MiB segments)`,
  );
  const code = await main([
    "gen",
    "--format=iggy-0.9",
    `--data-dir=${dataDir}`,
    `--stream=${topic.stream}`,
    `--topic=${topic.topic}`,
    "--partition=0",
    "--messages=20000",
    "--segment-size=1MiB",
    "--quiet",
  ]);
  if (code !== 0) process.exit(code);
}
console.error(
  `start: the HTTP API will listen on http://${config.agent.listen}/ — try /v1/partitions, ` +
    `/metrics, or /v1/streams/0/topics/0/partitions/0/records?offset=0&format=json; Ctrl-C stops`,
);
process.exitCode = await main(["run", "--config", configPath, ...process.argv.slice(2)]);
