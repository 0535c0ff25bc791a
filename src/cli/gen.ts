// `tierd gen`: writes byte-exact Iggy segments for demos, tests and benchmarks, with progress on
// stderr (messages written of all, bytes, rate, ETA).
import { systemClock } from "../base/clock.ts";
import { humanSize } from "../config/units.ts";
import { generatePartition } from "../format/generate.ts";
import type { FormatName } from "../format/types.ts";
import { initHashes } from "../hash.ts";
import { type Command, intFlag, type ParsedArgs, required, sizeFlag, UsageError } from "./args.ts";
import { Progress } from "./progress.ts";

/** `tierd gen --format … --data-dir D --stream S --topic T --partition P --messages N …`. */
export const genCommand: Command = {
  spec: {
    name: "gen",
    summary: "write byte-exact Iggy segments (demos, tests, benchmarks)",
    description:
      "Writes a new partition of N generated messages into the data directory, in the\n" +
      "broker's own layout (streams/S/topics/T/partitions/P), starting a new segment at each\n" +
      "--segment-size; the last segment is the active one. Progress goes to stderr: one\n" +
      "rewritten line on a terminal, else one line per segment.",
    flags: {
      format: {
        type: "string",
        value: "iggy-0.8|iggy-0.9",
        help: "segment format",
        required: true,
      },
      "data-dir": { type: "string", value: "D", help: "the data directory", required: true },
      stream: { type: "string", value: "S", help: "stream id", required: true },
      topic: { type: "string", value: "T", help: "topic id", required: true },
      partition: { type: "string", value: "P", help: "partition id", required: true },
      messages: { type: "string", value: "N", help: "messages to write", required: true },
      "segment-size": {
        type: "string",
        value: "SIZE",
        help: 'bytes per segment, like "1 MiB"',
        required: true,
      },
      "payload-size": { type: "string", value: "B", help: "payload bytes per message (256)" },
      seed: { type: "string", value: "N", help: "random seed: the same seed, the same bytes (1)" },
      quiet: { type: "boolean", short: "q", help: "no progress, only the summary line" },
    },
  },
  run: gen,
};

async function gen({ values }: ParsedArgs): Promise<number> {
  const format = required(values, "format");
  if (format !== "iggy-0.8" && format !== "iggy-0.9") {
    throw new UsageError(`--format must be iggy-0.8 or iggy-0.9, got ${JSON.stringify(format)}`);
  }
  const ids = {
    stream: intFlag(values, "stream"),
    topic: intFlag(values, "topic"),
    partition: intFlag(values, "partition"),
  };
  const messages = intFlag(values, "messages");
  const options = {
    format: format as FormatName,
    dataDir: required(values, "data-dir"),
    ...ids,
    messages,
    segmentSize: sizeFlag(values, "segment-size"),
    payloadSize: intFlag(values, "payload-size", 256),
    seed: intFlag(values, "seed", 1),
  };
  await initHashes();
  const started = systemClock.monotonic();
  const progress = new Progress(`gen ${ids.stream}/${ids.topic}/${ids.partition}`, {
    unit: "messages",
  });
  let bytes = 0;
  let written = 0;
  const segments = await generatePartition({
    ...options,
    onSegment: (s) => {
      bytes += s.size;
      written += Number(s.messageCount);
      if (values.quiet) return;
      progress.update(
        { done: written, total: messages, bytesDone: bytes },
        `wrote ${s.logPath} offsets ${s.startOffset}..${s.endOffset} (${humanSize(s.size)})`,
      );
    },
  });
  progress.end();
  const secs = (systemClock.monotonic() - started) / 1000;
  console.error(
    `gen: ${segments.length} segments, ${humanSize(bytes)} (${bytes} bytes) in ` +
      `${secs.toFixed(2)} s (the last segment is the active one)`,
  );
  return 0;
}
