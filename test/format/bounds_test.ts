// readSegmentBounds derives what the broker derives at boot, from the index plus header reads,
// and names the file and byte of whatever disagrees.
import assert from "node:assert/strict";
import { appendFile, copyFile, open, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { emptyBounds, readSegmentBounds } from "../../src/format/bounds.ts";
import { codecFor } from "../../src/format/codecs.ts";
import { scanRecordHeaders } from "../../src/format/scan.ts";
import { type GeneratedSegment, generatePartition } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { tempDir } from "../_util.ts";
import { all, assertRejectsFormat, testdataPath } from "./_fixtures.ts";

await initHashes();

async function oneSegment(dir: string, format: FormatName, messages = 50) {
  const segments = await generatePartition({
    format,
    dataDir: dir,
    stream: 0,
    topic: 0,
    partition: 0,
    messages,
    segmentSize: 1 << 20,
    payloadSize: 30,
    messagesPerBatch: 4,
    startOffset: 1000n,
  });
  assert.equal(segments.length, 1);
  return segments[0];
}

function boundsOf(s: GeneratedSegment) {
  const { logPath: _l, indexPath: _i, ...b } = s;
  return b;
}

Deno.test("the 0.8 vector's bounds come from its index", async () => {
  const b = await readSegmentBounds(
    testdataPath("iggy-0.8-two-messages.log"),
    testdataPath("iggy-0.8-two-messages.index"),
    "iggy-0.8",
    0n,
  );
  assert.deepEqual(b, {
    startOffset: 0n,
    endOffset: 1n,
    startTimestamp: 5000n,
    endTimestamp: 5000n,
    maxTimestamp: 5000n,
    size: 172,
    indexSize: 32,
    messageCount: 2n,
  });
});

Deno.test("the 0.9 golden batch without an index: walked from byte 0", async () => {
  const b = await readSegmentBounds(
    testdataPath("iggy-0.9-batch-golden.bin"),
    testdataPath("no-such.index"),
    "iggy-0.9",
    100n,
  );
  assert.deepEqual(b, {
    startOffset: 100n,
    endOffset: 101n,
    startTimestamp: 5000n,
    endTimestamp: 5000n,
    maxTimestamp: 5000n,
    size: 396,
    indexSize: 0,
    messageCount: 2n,
  });
});

for (const format of ["iggy-0.8", "iggy-0.9"] as const) {
  Deno.test(`${format}: an empty log has empty bounds`, async () => {
    const dir = await tempDir("tierd-bounds");
    try {
      const log = join(dir.path, "00000000000000000007.log");
      await writeFile(log, new Uint8Array(0));
      await writeFile(log.replace(".log", ".index"), new Uint8Array(0));
      const b = await readSegmentBounds(log, log.replace(".log", ".index"), format, 7n);
      assert.deepEqual(b, emptyBounds(7n));
      assert.equal(b.endOffset, 6n);
    } finally {
      await dir.cleanup();
    }
  });

  Deno.test(`${format}: a last record straddling EOF is named by log and position`, async () => {
    const dir = await tempDir("tierd-bounds");
    try {
      const s = await oneSegment(dir.path, format);
      const log = new Uint8Array(await readFile(s.logPath));
      const records = all(codecFor(format).walk(log, { file: "x", startOffset: 1000n }));
      const last = records.at(-1)!;
      await truncate(s.logPath, last.position + last.size - 3);
      if (format === "iggy-0.8") {
        // The dense index still covers the cut message: its END is past the log's end.
        await assertRejectsFormat(
          readSegmentBounds(s.logPath, s.indexPath, format, 1000n),
          { code: "index_past_eof", file: s.indexPath, position: (records.length - 1) * 16 },
        );
        // Without that entry, the unindexed tail is walked and found torn.
        await truncate(s.indexPath, (records.length - 1) * 16);
      } else {
        // The sparse index's entry for the last batch still lies inside the log.
      }
      await assertRejectsFormat(
        readSegmentBounds(s.logPath, s.indexPath, format, 1000n),
        { code: "straddles_eof", file: s.logPath, position: last.position },
      );
    } finally {
      await dir.cleanup();
    }
  });

  Deno.test(`${format}: non-zero reserved bytes in a walked header`, async () => {
    const dir = await tempDir("tierd-bounds");
    try {
      const s = await oneSegment(dir.path, format);
      const log = new Uint8Array(await readFile(s.logPath));
      const codec = codecFor(format);
      const records = all(codec.walk(log, { file: "x", startOffset: 1000n }));
      const last = records.at(-1)!;
      log[last.position + (format === "iggy-0.8" ? 60 : 52)] = 1;
      await writeFile(s.logPath, log);
      await assertRejectsFormat(readSegmentBounds(s.logPath, s.indexPath, format, 1000n), {
        code: "reserved_nonzero",
        file: s.logPath,
        position: last.position,
        message: /0\.10/,
      });
    } finally {
      await dir.cleanup();
    }
  });
}

Deno.test("iggy-0.8: an index longer than the log is index_past_eof naming the index", async () => {
  const dir = await tempDir("tierd-bounds");
  try {
    const log = join(dir.path, "00000000000000000000.log");
    const index = join(dir.path, "00000000000000000000.index");
    await copyFile(testdataPath("iggy-0.8-two-messages.log"), log);
    await copyFile(testdataPath("iggy-0.8-two-messages.index"), index);
    await truncate(log, 77);
    await assertRejectsFormat(readSegmentBounds(log, index, "iggy-0.8", 0n), {
      code: "index_past_eof",
      file: index,
      position: 16,
    });
  } finally {
    await dir.cleanup();
  }
});

Deno.test("iggy-0.8: a missing index is an error naming it", async () => {
  const dir = await tempDir("tierd-bounds");
  try {
    const s = await oneSegment(dir.path, "iggy-0.8");
    await rm(s.indexPath);
    await assertRejectsFormat(readSegmentBounds(s.logPath, s.indexPath, "iggy-0.8", 1000n), {
      code: "truncated",
      file: s.indexPath,
      position: 0,
      message: /missing/,
    });
  } finally {
    await dir.cleanup();
  }
});

Deno.test("iggy-0.8: messages past the last index entry are walked into the bounds", async () => {
  const dir = await tempDir("tierd-bounds");
  try {
    const s = await oneSegment(dir.path, "iggy-0.8");
    const index = new Uint8Array(await readFile(s.indexPath));
    await writeFile(s.indexPath, index.subarray(0, 16 * 45)); // the last 5 entries never made it
    const b = await readSegmentBounds(s.logPath, s.indexPath, "iggy-0.8", 1000n);
    assert.deepEqual(b, { ...boundsOf(s), indexSize: 16 * 45 });
  } finally {
    await dir.cleanup();
  }
});

Deno.test("iggy-0.8: an index that disagrees with the log", async () => {
  const dir = await tempDir("tierd-bounds");
  try {
    const s = await oneSegment(dir.path, "iggy-0.8");
    // The segment's start offset is not what the first message says.
    await assertRejectsFormat(readSegmentBounds(s.logPath, s.indexPath, "iggy-0.8", 999n), {
      code: "offset_gap",
      file: s.logPath,
      position: 0,
    });
  } finally {
    await dir.cleanup();
  }
});

Deno.test("iggy-0.9: a sparse index (or none) gives the same bounds as a full one", async () => {
  const dir = await tempDir("tierd-bounds");
  try {
    const s = await oneSegment(dir.path, "iggy-0.9");
    const full = new Uint8Array(await readFile(s.indexPath));
    assert.equal(full.length, 13 * 24); // 50 messages in batches of 4
    for (const keep of [full.subarray(0, 24), full.subarray(0, 24 * 5), new Uint8Array(0)]) {
      await writeFile(s.indexPath, keep);
      const b = await readSegmentBounds(s.logPath, s.indexPath, "iggy-0.9", 1000n);
      assert.deepEqual(b, { ...boundsOf(s), indexSize: keep.length });
    }
    await rm(s.indexPath);
    const b = await readSegmentBounds(s.logPath, s.indexPath, "iggy-0.9", 1000n);
    assert.deepEqual(b, { ...boundsOf(s), indexSize: 0 });
  } finally {
    await dir.cleanup();
  }
});

Deno.test("iggy-0.9: an index entry past EOF, and an index/log offset disagreement", async () => {
  const dir = await tempDir("tierd-bounds");
  try {
    const s = await oneSegment(dir.path, "iggy-0.9");
    const codec = codecFor("iggy-0.9");
    const past = codec.encodeIndex([
      { offset: 1000n, position: 0, timestamp: 1n },
      { offset: 1100n, position: s.size, timestamp: 2n },
    ], { startOffset: 1000n, logSize: s.size });
    await writeFile(s.indexPath, past);
    await assertRejectsFormat(readSegmentBounds(s.logPath, s.indexPath, "iggy-0.9", 1000n), {
      code: "index_past_eof",
      file: s.indexPath,
      position: 24,
    });
    const log = new Uint8Array(await readFile(s.logPath));
    const second = all(codec.walk(log, { file: "x", startOffset: 1000n }))[1];
    const wrong = codec.encodeIndex([{ offset: 1005n, position: second.position, timestamp: 1n }], {
      startOffset: 1000n,
      logSize: s.size,
    });
    await writeFile(s.indexPath, wrong);
    await assertRejectsFormat(readSegmentBounds(s.logPath, s.indexPath, "iggy-0.9", 1000n), {
      code: "offset_gap",
      file: s.logPath,
      position: second.position,
    });
    // A trailing partial entry.
    await appendFile(s.indexPath, new Uint8Array(7));
    await assertRejectsFormat(readSegmentBounds(s.logPath, s.indexPath, "iggy-0.9", 1000n), {
      code: "truncated",
      file: s.indexPath,
      position: 24,
    });
  } finally {
    await dir.cleanup();
  }
});

Deno.test("a missing .log is the runtime's ENOENT, for callers that race the broker", async () => {
  await assert.rejects(
    readSegmentBounds("/nonexistent/0.log", "/nonexistent/0.index", "iggy-0.9", 0n),
    (err: unknown) => (err as { code?: string }).code === "ENOENT",
  );
});

Deno.test("scanRecordHeaders from a sparse index entry matches a full walk", async () => {
  const dir = await tempDir("tierd-bounds");
  try {
    const s = await oneSegment(dir.path, "iggy-0.9", 200);
    const codec = codecFor("iggy-0.9");
    const log = new Uint8Array(await readFile(s.logPath));
    const walked = all(codec.walk(log, { file: s.logPath, startOffset: 1000n }));
    const from = walked[7];
    const fh = await open(s.logPath, "r");
    try {
      const scanned = [];
      for await (
        const r of scanRecordHeaders(fh, codec, {
          file: s.logPath,
          size: s.size,
          from: from.position,
          startOffset: 1000n,
          expectedOffset: from.firstOffset,
        })
      ) scanned.push(r);
      assert.deepEqual(scanned, walked.slice(7));
    } finally {
      await fh.close();
    }
  } finally {
    await dir.cleanup();
  }
});
