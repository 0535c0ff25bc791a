// `tierd gen`: writes byte-exact Iggy segments for demos, tests and benchmarks.
import { systemClock } from "../../providers/clock.ts";
import { generatePartition } from "../format/generate.ts";
import type { FormatName } from "../format/types.ts";
import { initHashes } from "../hash.ts";
import { intFlag, parseFlags, required, sizeFlag, UsageError } from "./args.ts";

/** Runs `tierd gen`: writes the requested segments and returns the exit code. */
export async function genCommand(args: string[]): Promise<number> {
  const { values } = parseFlags(args, {
    format: { type: "string" },
    "data-dir": { type: "string" },
    stream: { type: "string" },
    topic: { type: "string" },
    partition: { type: "string" },
    messages: { type: "string" },
    "segment-size": { type: "string" },
    "payload-size": { type: "string" },
    seed: { type: "string" },
    quiet: { type: "boolean", short: "q" },
  });
  const format = required(values, "format");
  if (format !== "iggy-0.8" && format !== "iggy-0.9") {
    throw new UsageError(`--format must be iggy-0.8 or iggy-0.9, got ${JSON.stringify(format)}`);
  }
  await initHashes();
  const started = systemClock.monotonic();
  let bytes = 0;
  const segments = await generatePartition({
    format: format as FormatName,
    dataDir: required(values, "data-dir"),
    stream: intFlag(values, "stream"),
    topic: intFlag(values, "topic"),
    partition: intFlag(values, "partition"),
    messages: intFlag(values, "messages"),
    segmentSize: sizeFlag(values, "segment-size"),
    payloadSize: intFlag(values, "payload-size", 256),
    seed: intFlag(values, "seed", 1),
    onSegment: (s) => {
      bytes += s.size;
      if (!values.quiet) {
        console.error(
          `gen: wrote ${s.logPath} offsets ${s.startOffset}..${s.endOffset} (${s.size} bytes)`,
        );
      }
    },
  });
  const secs = (systemClock.monotonic() - started) / 1000;
  console.error(
    `gen: ${segments.length} segments, ${bytes} bytes in ${secs.toFixed(2)} s ` +
      `(the last segment is the active one)`,
  );
  return 0;
}
