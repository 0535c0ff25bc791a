// `tierd read`: the read path without the server. Raw record bytes go to stdout (binary), with a
// one-line summary on stderr; `--json` prints the decoded messages instead. Journals are read
// read-only, so it is safe beside a running agent.
import { createReadContext } from "../read/context.ts";
import { DirectRangeReader } from "../read/direct_reader.ts";
import { readToJson } from "../read/json.ts";
import { checkMaxBytes, DEFAULT_READ_BYTES, ParamError, parseStart } from "../read/params.ts";
import { readRecords } from "../read/read_records.ts";
import { intFlag, parseFlags, sizeFlag, UsageError } from "./args.ts";
import { loadContext, storeFor } from "./context.ts";

/** Runs `tierd read`; see the usage text in main.ts. Errors of the read exit 1 with the message. */
export async function readCommand(args: string[]): Promise<number> {
  const { values } = parseFlags(args, {
    stream: { type: "string" },
    topic: { type: "string" },
    partition: { type: "string" },
    offset: { type: "string" },
    timestamp: { type: "string" },
    "max-bytes": { type: "string" },
    json: { type: "boolean" },
  });
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
  const ctx = await loadContext(values.config);
  const { store, prefix } = await storeFor(ctx);
  try {
    const read = createReadContext({
      config: ctx.config,
      store,
      prefix,
      reader: new DirectRangeReader(store),
      logger: ctx.logger,
    });
    const r = await readRecords(read, { partition: ids, ...start, maxBytes });
    try {
      await writeStdout(
        values.json
          ? new TextEncoder().encode(JSON.stringify(readToJson(ids, r, start), null, 2) + "\n")
          : r.bytes,
      );
      if (values.json) return 0;
    } catch (err) {
      // The reader went away (`tierd read … | head -c 10`): that is how pipes end, not an error.
      if ((err as NodeJS.ErrnoException).code === "EPIPE") return 0;
      throw err;
    }
    console.error(
      `first_offset=${r.firstOffset} next_offset=${r.nextOffset} records=${r.records} ` +
        `bytes=${r.bytes.length} source=${r.source} format=${r.format}` +
        (r.gap ? ` gap=${r.gap.from}-${r.gap.to}` : ""),
    );
    return 0;
  } finally {
    await store.close?.();
  }
}

function writeStdout(bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(bytes, (err) => (err ? reject(err) : resolve()));
  });
}
