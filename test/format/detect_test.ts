// detectFormat tells Iggy 0.8 from 0.9 by the first record and the index, including the case
// where a 0.9 batch header also parses as a 0.8 message header.
import assert from "node:assert/strict";
import { copyFile, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { detectFormat } from "../../src/format/detect.ts";
import { generatePartition } from "../../src/format/generate.ts";
import { initHashes } from "../../src/hash.ts";
import { tempDir } from "../_util.ts";
import { assertRejectsFormat, testdataPath } from "./_fixtures.ts";

await initHashes();

for (const format of ["iggy-0.8", "iggy-0.9"] as const) {
  Deno.test(`${format}: every segment of a generated partition is detected`, async () => {
    const dir = await tempDir("tierd-detect");
    try {
      for (const [i, messagesPerBatch] of [1, 2, 8].entries()) {
        const segments = await generatePartition({
          format,
          dataDir: join(dir.path, String(i)),
          stream: 0,
          topic: 0,
          partition: 0,
          messages: 200,
          segmentSize: 4096,
          payloadSize: i * 7,
          messagesPerBatch,
        });
        for (const s of segments) {
          const expected = s.size === 0 ? undefined : format;
          assert.equal(await detectFormat(s.logPath, s.indexPath), expected, s.logPath);
        }
      }
    } finally {
      await dir.cleanup();
    }
  });
}

Deno.test("the golden vectors are detected", async () => {
  assert.equal(
    await detectFormat(
      testdataPath("iggy-0.8-two-messages.log"),
      testdataPath("iggy-0.8-two-messages.index"),
    ),
    "iggy-0.8",
  );
  assert.equal(
    await detectFormat(testdataPath("iggy-0.9-batch-golden.bin"), testdataPath("none.index")),
    "iggy-0.9",
  );
});

Deno.test("0.9 with a corrupt first batch is still told apart by its index", async () => {
  const dir = await tempDir("tierd-detect");
  try {
    const [s] = await generatePartition({
      format: "iggy-0.9",
      dataDir: dir.path,
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 4,
      segmentSize: 1 << 20,
      payloadSize: 10,
      messagesPerBatch: 2,
    });
    const log = new Uint8Array(await readFile(s.logPath));
    log[256 + 48 + 2] ^= 0xff; // a payload byte of the first frame: checksums no longer verify
    await writeFile(s.logPath, log);
    assert.equal(await detectFormat(s.logPath, s.indexPath), "iggy-0.9");
    // Without the index, the file name's offset still rules out 0.8's reading of the header…
    await rm(s.indexPath);
    assert.equal(await detectFormat(s.logPath, s.indexPath), "iggy-0.9");
    // …and without either, the header fits both formats and neither checksum verifies.
    const unnamed = join(dir.path, "copy.log");
    await copyFile(s.logPath, unnamed);
    await assertRejectsFormat(detectFormat(unnamed, s.indexPath), {
      code: "unknown_format",
      file: unnamed,
      position: 0,
      message: /fits both/,
    });
  } finally {
    await dir.cleanup();
  }
});

Deno.test("garbage and empty logs", async () => {
  const dir = await tempDir("tierd-detect");
  try {
    const log = join(dir.path, "00000000000000000000.log");
    const index = join(dir.path, "00000000000000000000.index");
    await writeFile(log, new Uint8Array(0));
    assert.equal(await detectFormat(log, index), undefined);
    const garbage = new Uint8Array(4096).map((_, i) => (i * 131 + 7) & 0xff);
    await writeFile(log, garbage);
    await assertRejectsFormat(detectFormat(log, index), {
      code: "unknown_format",
      file: log,
      position: 0,
      message: /not iggy-0\.8: .*; not iggy-0\.9: /,
    });
    await writeFile(log, new TextEncoder().encode("hello, world"));
    await assertRejectsFormat(detectFormat(log, index), {
      code: "unknown_format",
      file: log,
      position: 0,
    });
    // A valid 0.8 log under another segment's name: its first offset is not the name's.
    const renamed = join(dir.path, "00000000000000000005.log");
    await copyFile(testdataPath("iggy-0.8-two-messages.log"), renamed);
    await assertRejectsFormat(detectFormat(renamed, index), {
      code: "unknown_format",
      file: renamed,
      position: 0,
    });
  } finally {
    await dir.cleanup();
  }
});
