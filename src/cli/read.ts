// `tierd read`: the read path without the server. Raw record bytes go to stdout (binary), with a
// one-line summary on stderr; `--json` prints the decoded messages instead. Journals are read
// read-only, so it is safe beside a running agent.
import { createReadContext } from "../read/context.ts";
import { DirectRangeReader } from "../read/direct_reader.ts";
import { readToJson } from "../read/json.ts";
import { checkMaxBytes, DEFAULT_READ_BYTES, ParamError, parseStart } from "../read/params.ts";
import { openRead, readRecords } from "../read/read_records.ts";
import {
  type Command,
  CONFIG_FLAG,
  intFlag,
  type ParsedArgs,
  sizeFlag,
  UsageError,
} from "./args.ts";
import { loadContext, storeFor } from "./context.ts";

/** `tierd read`: errors of the read exit 1 with the message. */
export const readCommand: Command = {
  spec: {
    name: "read",
    summary: "read records through tierd's read path (raw bytes to stdout, or decoded JSON)",
    synopsis: [
      "[--config F]",
      "--stream S --topic T --partition P",
      "(--offset N | --timestamp T)",
      "[--max-bytes M]",
      "[--json]",
    ],
    description:
      "Reads whole records from the first one at or after --offset (or with a timestamp\n" +
      "at or after --timestamp), local or remote, straight from the store (no cache). Raw bytes\n" +
      "go to stdout with a summary line on stderr; --json prints the decoded messages.",
    flags: {
      config: CONFIG_FLAG,
      stream: { type: "string", value: "S", help: "stream id", required: true },
      topic: { type: "string", value: "T", help: "topic id", required: true },
      partition: { type: "string", value: "P", help: "partition id", required: true },
      offset: { type: "string", value: "N", help: "start at this offset (or --timestamp)" },
      timestamp: { type: "string", value: "T", help: "start at this timestamp, µs (or --offset)" },
      "max-bytes": {
        type: "string",
        value: "M",
        help: 'at most this many bytes, like "64 KiB" (1 MiB; at least one record)',
      },
      json: { type: "boolean", help: "decoded messages as JSON instead of raw bytes" },
    },
  },
  run: read,
};

async function read({ values }: ParsedArgs): Promise<number> {
  const ids = {
    stream: intFlag(values, "stream"),
    topic: intFlag(values, "topic"),
    partition: intFlag(values, "partition"),
  };
  let start;
  let maxBytes;
  try {
    start = parseStart(
      values.offset as string | undefined,
      values.timestamp as string | undefined,
      { offset: "--offset", timestamp: "--timestamp" },
    );
    maxBytes = values["max-bytes"] === undefined
      ? DEFAULT_READ_BYTES
      : checkMaxBytes(sizeFlag(values, "max-bytes"), "--max-bytes");
  } catch (err) {
    if (err instanceof ParamError) throw new UsageError(err.message);
    throw err;
  }
  const ctx = await loadContext(values.config, { uses: ["store"] });
  const { store, prefix } = await storeFor(ctx);
  try {
    const read = createReadContext({
      config: ctx.config,
      store,
      prefix,
      reader: new DirectRangeReader(store),
      logger: ctx.logger,
    });
    const req = { partition: ids, ...start, maxBytes };
    if (values.json) {
      const r = await readRecords(read, req);
      const text = JSON.stringify(readToJson(ids, r, start), null, 2) + "\n";
      await writeStdout(new TextEncoder().encode(text)).catch(quietOnEpipe);
      return 0;
    }
    // Raw bytes are streamed to stdout window by window, as the HTTP API sends them.
    const r = await openRead(read, req);
    try {
      for await (const w of r.windows()) await writeStdout(w);
    } catch (err) {
      quietOnEpipe(err);
      return 0;
    } finally {
      await r.close();
    }
    console.error(
      `first_offset=${r.firstOffset} next_offset=${r.nextOffset} records=${r.records} ` +
        `bytes=${r.byteLength} source=${r.sourceSoFar()} format=${r.format}` +
        (r.gap ? ` gap=${r.gap.from}-${r.gap.to}` : ""),
    );
    return 0;
  } finally {
    await store.close?.();
  }
}

/** The reader went away (`tierd read … | head -c 10`): that is how pipes end, not an error. */
function quietOnEpipe(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== "EPIPE") throw err;
}

function writeStdout(bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(bytes, (err) => (err ? reject(err) : resolve()));
  });
}
