// `tierd run --once` as an operator sees it fail: exit 1, and one line naming how many problems
// the pass met and the first of them, in the words the pass report has always used.
import assert from "node:assert/strict";
import { truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { generatePartition } from "../../src/format/generate.ts";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";
import { cliProcess } from "./_cli.ts";

Deno.test("run --once exits 1 naming a damaged segment, its file, byte and offset", async () => {
  const tmp = await tempDir("tierd-run-once");
  try {
    const segments = await generatePartition({
      format: "iggy-0.9",
      dataDir: join(tmp.path, "broker"),
      stream: 1,
      topic: 2,
      partition: 0,
      messages: 400,
      segmentSize: 16 * 1024,
      payloadSize: 100,
    });
    assert.ok(segments.length >= 3, `${segments.length} segments`);
    const victim = segments[1];
    await truncate(victim.logPath, victim.size - 7); // cut mid-record
    const config = join(tmp.path, "tierd.toml");
    await writeFile(config, testConfigText({ dir: tmp.path, topics: [{ stream: 1, topic: 2 }] }));

    const once = await cliProcess(["run", "--once", "--config", config]);
    assert.equal(once.code, 1, once.stderr);
    const line = once.stderr.split("\n").find((l) => l.startsWith("tierd: pass incomplete: "));
    assert.ok(line, once.stderr);
    const path = victim.logPath.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
    assert.match(
      line,
      new RegExp(
        `^tierd: pass incomplete: 1 error\\(s\\); first: ${path} @ byte \\d+: .+ ` +
          `\\(segment ${victim.startOffset} is damaged: not copied\\)$`,
      ),
    );
  } finally {
    await tmp.cleanup();
  }
});
