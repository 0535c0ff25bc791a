// SIGHUP reloads: topic retention and per-pass tiered_storage keys apply in place (the object
// the worker holds), everything else is refused and keeps its running value, secrets are never
// reported, and a file that does not load changes nothing.
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseConfig } from "../../src/config/load.ts";
import { createLogger } from "../../src/log.ts";
import { applyReload, planReload, reloadConfig } from "../../src/runtime/reload.ts";
import { tempDir } from "../_util.ts";
import { testConfigText } from "../_config.ts";

const topics = (localSize: string, expiry = "unlimited") =>
  `[[topic]]\nstream = 1\ntopic = 1\nlocal_retention_size = "${localSize}"\nmessage_expiry = "${expiry}"\n`;

function config(dir: string, extra: string, o: { partSize?: string } = {}) {
  const text = testConfigText({ dir, topics: [], extra, partSize: o.partSize });
  return parseConfig(text, `${dir}/tierd.toml`, {});
}

Deno.test("a reload applies topic retention and live keys, refuses the rest", () => {
  const running = config("/r", topics("1 GiB"));
  const topic = running.topic[0];
  const ts = running.tiered_storage;
  const next = config(
    "/r",
    topics("2 MiB", "7 d") + `[[topic]]\nstream = 9\ntopic = 9\n`,
    { partSize: "16 MiB" },
  );
  next.tiered_storage.delete_batch_per_pass = 7;
  next.tiered_storage.housekeeping.request_quota = 11;
  next.tiered_storage.segment_upload_timeout = 1234;
  const plan = planReload(running, next);
  assert.deepEqual(plan.applied.map((c) => c.key).sort(), [
    "tiered_storage.delete_batch_per_pass",
    "tiered_storage.housekeeping.request_quota",
    "tiered_storage.segment_upload_timeout",
    "topic[stream=1,topic=1].local_retention_size",
    "topic[stream=1,topic=1].message_expiry",
  ]);
  assert.deepEqual(plan.refused.map((c) => c.key).sort(), [
    "tiered_storage.part_size",
    "topic[stream=9,topic=9]",
  ]);
  const outcome = applyReload(running, next);
  assert.deepEqual(outcome, plan);
  // In place: the objects the worker holds now carry the new values.
  assert.equal(running.topic[0], topic);
  assert.equal(running.tiered_storage, ts);
  assert.equal(topic.local_retention_size, 2 * 1024 * 1024);
  assert.equal(topic.message_expiry, 7 * 86_400_000);
  assert.equal(ts.delete_batch_per_pass, 7);
  assert.equal(ts.housekeeping.request_quota, 11);
  assert.equal(ts.segment_upload_timeout, 1234);
  // Refused: unchanged.
  assert.equal(ts.part_size, 8 * 1024 * 1024);
  assert.equal(running.topic.length, 1);
});

Deno.test("a reload never shows a secret and refuses removing a topic", () => {
  const running = config("/r", topics("1 GiB"));
  running.agent.api_token = "old-token-123456";
  const next = config("/r", "");
  next.agent.api_token = "new-token-654321";
  const plan = planReload(running, next);
  const text = JSON.stringify(plan);
  assert.doesNotMatch(text, /token-/);
  assert.deepEqual(plan.refused.map((c) => c.key).sort(), [
    "agent.api_token",
    "topic[stream=1,topic=1]",
  ]);
  applyReload(running, next);
  assert.equal(running.agent.api_token, "old-token-123456");
  assert.equal(running.topic.length, 1);
});

Deno.test("reloadConfig reads the file; a bad file changes nothing", async () => {
  const tmp = await tempDir("tierd-reload");
  try {
    const path = join(tmp.path, "tierd.toml");
    const lines: string[] = [];
    const logger = createLogger({ level: "debug", write: (l) => void lines.push(l) });
    const running = config(tmp.path, topics("1 GiB"));
    await writeFile(path, testConfigText({ dir: tmp.path, topics: [], extra: topics("3 MiB") }));
    const outcome = await reloadConfig(path, running, logger);
    assert.equal(outcome?.applied.length, 1);
    assert.equal(running.topic[0].local_retention_size, 3 * 1024 * 1024);
    assert.ok(lines.some((l) => l.includes("config reload: applied")), lines.join("\n"));
    await writeFile(path, "[agent\nbroken");
    assert.equal(await reloadConfig(path, running, logger), undefined);
    assert.equal(running.topic[0].local_retention_size, 3 * 1024 * 1024);
    assert.ok(lines.some((l) => l.includes("config reload failed")));
  } finally {
    await tmp.cleanup();
  }
});
