// Unmodified Iggy SDK clients that speak Iggy's TCP binary protocol (or its HTTP API), run from
// Deno: the Rust `iggy` crate (test/sdk), the Python `apache-iggy` package
// (test/clients/python/read.py) and the Java `org.apache.iggy:iggy` SDK (test/clients/java).
// Each reads a partition in one of the same modes and prints one JSON line per message and a
// summary line; this driver builds or installs the client once (scripts/build-sdk-client.sh,
// install-python-clients.sh, build-java-client.sh), runs it against an address, and parses what
// it printed.
import { join } from "node:path";
import { isExecutable, onPath } from "../fixtures/_server.ts";
import { ROOT } from "../fixtures/_agent.ts";
import type { IggyVersion } from "../fixtures/iggy.ts";
import { parseJsonExact } from "./_iggy_http.ts";
import { sdkClient } from "./_iggy_sdk.ts";

/** Which SDK runs. */
export type ClientKind = "rust" | "python" | "java";
/** Every kind, in the order tests run them. */
export const CLIENT_KINDS: readonly ClientKind[] = ["rust", "python", "java"];

/**
 * How a client reads (test/sdk/src/main.rs documents each): `offset`, `first` and `timestamp`
 * start with that strategy and continue by offset without committing; `next` polls as a named
 * consumer with auto-commit; `group` joins a consumer group and lets the server pick partitions;
 * `stored` (Rust and Java) only reads a consumer's or group's stored offset.
 */
export type ReadMode = "offset" | "first" | "next" | "timestamp" | "group" | "stored";

/** One message as a client printed it. */
export interface ClientMessage {
  partition: number;
  offset: bigint;
  id: bigint;
  /** µs since the epoch, as the broker stamped it. */
  timestamp: bigint;
  payloadLength: number;
  /** Hex SHA-256 of the payload (unless `payload: "hex"` was asked for). */
  payloadSha256?: string;
  /** The payload in hex (with `payload: "hex"`). */
  payloadHex?: string;
}

/** A client's last line. */
export interface ClientSummary {
  client: ClientKind;
  /** The SDK and its version, e.g. `iggy 0.10.0`, `apache-iggy 0.9.0`. */
  sdk: string;
  transport: "tcp" | "http";
  mode: ReadMode;
  messages: number;
  /** Polls sent; null where the SDK's high-level consumer polls on its own (Python `group`). */
  polls: number | null;
  /** Partitions read from (or asked about, for `stored`). */
  partitions: number[];
  /**
   * Stored offsets per partition, null for none: read back from the broker by Rust and Java
   * (`next`, `group`, `stored`); Python's high-level consumer reports the offsets it stored
   * itself (`group` only), and apache-iggy has no call that reads them from the broker.
   */
  stored: Map<number, bigint | null>;
}

/** What one client run printed. */
export interface ClientRead {
  messages: ClientMessage[];
  summary: ClientSummary;
  /** The client's stderr (warnings, the SDK's log lines). */
  stderr: string;
}

/** Where and how a client reads. */
export interface ClientReadOptions {
  kind: ClientKind;
  /** The Iggy server version behind `server`: picks the SDK build that speaks its protocol. */
  broker: IggyVersion;
  /** `host:port` for TCP (a test server's `tcpAddress`); the base URL for HTTP. */
  server: string;
  /** @default "tcp" */
  transport?: "tcp" | "http";
  /** @default "iggy" */
  username?: string;
  /** @default "iggy" */
  password?: string;
  /** A number is a numeric id, a string a name (so a name must not be all digits). */
  stream: number | string;
  topic: number | string;
  /** Ignored by `group`. @default 0 */
  partition?: number;
  mode: ReadMode;
  /** `offset`: the first offset to read. */
  offset?: bigint;
  /** `timestamp`: µs since the epoch. */
  timestamp?: bigint;
  /** `next`, `stored`: the consumer's name (apache-iggy 0.8.0 always polls as consumer 0). */
  consumer?: string;
  /** `group`, `stored`: the consumer group's name. */
  group?: string;
  /** Stop once this offset has been read (`next` needs it). */
  end?: bigint;
  /** `group`: stop after this many messages in all. */
  count?: number;
  /** Stop after this long without a message. @default 3000 */
  idleMs?: number;
  /** Messages per poll. @default 10 */
  batch?: number;
  /** Pause after each poll. @default 0 */
  pollIntervalMs?: number;
  /** @default "sha256" */
  payload?: "sha256" | "hex";
  /** The client is killed after this long. @default 60_000 */
  timeoutMs?: number;
  /** Called for each message as it is printed (e.g. to start a second group member mid-read). */
  onMessage?: (m: ClientMessage) => void;
}

/** A client could not be prepared, failed, timed out or printed something unexpected. */
export class IggyClientError extends Error {
  override readonly name = "IggyClientError";
  constructor(message: string, readonly stderr = "", readonly stdout = "") {
    super(message);
  }
}

/** The SDK each kind runs against each server version, or why none can. */
const SDKS: Record<ClientKind, Record<IggyVersion, string | { none: string }>> = {
  rust: { "0.8.0": "iggy 0.10.0", "0.9.0-edge.5": "iggy 0.11.0-edge.4" },
  python: { "0.8.0": "apache-iggy 0.8.0", "0.9.0-edge.5": "apache-iggy 0.9.0" },
  java: {
    "0.8.0": "org.apache.iggy:iggy 0.8.0",
    "0.9.0-edge.5": {
      none: "org.apache.iggy:iggy 0.8.0 speaks only Iggy 0.8's TCP framing (against 0.9's " +
        "VSR-framed protocol its login waits forever) and Maven Central has no 0.9 Java SDK",
    },
  },
};

/**
 * Whether a kind of client can read from a server version here: its SDK speaks that version's
 * protocol and its toolchain is on PATH (nothing is built or installed by this check).
 * @returns the SDK that will run, or why none can
 */
export async function clientSupport(
  kind: ClientKind,
  broker: IggyVersion,
): Promise<{ ok: true; sdk: string } | { ok: false; reason: string }> {
  const sdk = SDKS[kind][broker];
  if (typeof sdk !== "string") return { ok: false, reason: sdk.none };
  const tools = { rust: ["cargo"], python: ["python3"], java: ["java", "mvn"] }[kind];
  for (const tool of tools) {
    if (await onPath(tool)) continue;
    // rustup's default place, which build-sdk-client.sh looks in too.
    const home = Deno.env.get("HOME") ?? "/root";
    if (tool === "cargo" && await isExecutable(join(home, ".cargo/bin/cargo"))) {
      continue;
    }
    return { ok: false, reason: `no ${tool} on PATH for the ${kind} client (${sdk})` };
  }
  return { ok: true, sdk };
}

const prepared = new Map<string, Promise<string[]>>();
let pythonVenvs: Promise<string> | undefined;

/**
 * Builds or installs the client of `kind` for `broker` once per process (each script is a quick
 * check when its cache is warm; a cold Rust build takes minutes).
 * @returns the command that runs it, before its options
 * @throws {IggyClientError} with the script's output when it fails
 */
export function prepareClient(kind: ClientKind, broker: IggyVersion): Promise<string[]> {
  const key = `${kind}@${broker}`;
  let ready = prepared.get(key);
  if (!ready) {
    ready = prepare(kind, broker);
    prepared.set(key, ready);
  }
  return ready;
}

async function prepare(kind: ClientKind, broker: IggyVersion): Promise<string[]> {
  const sdk = SDKS[kind][broker];
  if (typeof sdk !== "string") {
    throw new IggyClientError(`${kind} client for ${broker}: ${sdk.none}`);
  }
  const old = broker === "0.8.0";
  switch (kind) {
    case "rust":
      return [
        old ? await sdkClient() : await scriptOutput("build-sdk-client.sh", ["iggy-0.11"]),
        "read",
      ];
    case "python": {
      // One install makes both venvs.
      pythonVenvs ??= scriptOutput("install-python-clients.sh", [], 2);
      const pythons = (await pythonVenvs).split("\n");
      const python = pythons.find((p) => p.includes(old ? "py-iggy-0.8.0" : "py-iggy-0.9.0"));
      if (!python) throw new IggyClientError(`install-python-clients.sh named no venv for ${sdk}`);
      return [python, join(ROOT, "test/clients/python/read.py")];
    }
    case "java":
      return ["java", "-jar", await scriptOutput("build-java-client.sh", [])];
  }
}

/** Runs `scripts/{script}` and returns its last `lines` lines. */
async function scriptOutput(script: string, args: string[], lines = 1): Promise<string> {
  const out = await new Deno.Command("bash", {
    args: [join(ROOT, "scripts", script), ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout).trim();
  const stderr = new TextDecoder().decode(out.stderr);
  if (!out.success) {
    throw new IggyClientError(`${script} ${args.join(" ")} failed:\n${stderr}`, stderr, stdout);
  }
  return stdout.split("\n").slice(-lines).join("\n");
}

/** The client's options, as every client takes them. */
export function clientArgs(o: ClientReadOptions): string[] {
  const args: Record<string, string | number | bigint | undefined> = {
    transport: o.transport ?? "tcp",
    server: o.server,
    username: o.username ?? "iggy",
    password: o.password ?? "iggy",
    stream: o.stream,
    topic: o.topic,
    partition: o.partition ?? 0,
    mode: o.mode,
    offset: o.offset,
    timestamp: o.timestamp,
    consumer: o.consumer,
    group: o.group,
    end: o.end,
    count: o.count,
    "idle-ms": o.idleMs,
    batch: o.batch,
    "poll-interval-ms": o.pollIntervalMs,
    payload: o.payload,
  };
  return Object.entries(args).flatMap(([k, v]) => v === undefined ? [] : [`--${k}`, String(v)]);
}

/**
 * Runs one client to the end of its read.
 * @returns the messages and the summary it printed
 * @throws {IggyClientError} when it cannot be prepared, exits non-zero, is killed at
 * `timeoutMs`, or prints no summary; the message holds its command, stderr and last output
 */
export async function readWithClient(o: ClientReadOptions): Promise<ClientRead> {
  const [command, ...prefix] = await prepareClient(o.kind, o.broker);
  const argv = [...prefix, ...clientArgs(o)];
  const shown = `${o.kind} client (${SDKS[o.kind][o.broker]}) ${o.mode}: ${command} ${
    argv.join(" ")
  }`;
  const child = new Deno.Command(command, {
    args: argv,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timeoutMs = o.timeoutMs ?? 60_000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }, timeoutMs);
  const stderrText = new Response(child.stderr).text();
  const messages: ClientMessage[] = [];
  let summary: ClientSummary | undefined;
  const lines: string[] = [];
  let failure: Error | undefined;
  try {
    for await (const line of textLines(child.stdout)) {
      lines.push(line);
      if (lines.length > 20) lines.shift();
      if (failure || line.trim() === "") continue;
      try {
        const parsed = parseLine(line);
        if ("summary" in parsed) summary = parsed.summary;
        else {
          messages.push(parsed.message);
          o.onMessage?.(parsed.message);
        }
      } catch (err) {
        failure = err as Error;
      }
    }
  } finally {
    clearTimeout(timer);
  }
  const status = await child.status;
  const stderr = await stderrText;
  const context = () =>
    `\n--- stderr ---\n${stderr.slice(-4000)}\n--- last stdout lines ---\n${lines.join("\n")}`;
  if (timedOut) {
    throw new IggyClientError(
      `${shown}: killed after ${timeoutMs} ms (${messages.length} messages read)${context()}`,
      stderr,
      lines.join("\n"),
    );
  }
  if (!status.success) {
    throw new IggyClientError(
      `${shown}: exited with code ${status.code}${context()}`,
      stderr,
      lines.join("\n"),
    );
  }
  if (failure) {
    throw new IggyClientError(
      `${shown}: unexpected output: ${failure.message}${context()}`,
      stderr,
      lines.join("\n"),
    );
  }
  if (!summary) {
    throw new IggyClientError(`${shown}: printed no summary${context()}`, stderr, lines.join("\n"));
  }
  return { messages, summary, stderr };
}

/** Splits a byte stream into lines. */
async function* textLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let rest = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    rest += chunk;
    const parts = rest.split("\n");
    rest = parts.pop()!;
    yield* parts;
  }
  if (rest !== "") yield rest;
}

type Raw = Record<string, unknown>;
const big = (v: unknown, what: string): bigint => {
  if (typeof v === "bigint") return v;
  if (typeof v === "number" || (typeof v === "string" && /^\d+$/.test(v))) return BigInt(v);
  throw new Error(`${what} is ${JSON.stringify(String(v))}, not an integer`);
};

/** One printed line: a message or the summary. */
export function parseLine(
  line: string,
): { message: ClientMessage } | { summary: ClientSummary } {
  const raw = parseJsonExact(line) as Raw;
  if (raw?.type === "message") {
    return {
      message: {
        partition: Number(raw.partition),
        offset: big(raw.offset, "offset"),
        id: big(raw.id, "id"),
        timestamp: big(raw.timestamp, "timestamp"),
        payloadLength: Number(raw.payload_len),
        ...(typeof raw.payload_sha256 === "string" && { payloadSha256: raw.payload_sha256 }),
        ...(typeof raw.payload_hex === "string" && { payloadHex: raw.payload_hex }),
      },
    };
  }
  if (raw?.type === "summary") {
    const stored = new Map<number, bigint | null>();
    for (const [p, v] of Object.entries((raw.stored ?? {}) as Raw)) {
      stored.set(Number(p), v === null ? null : big(v, `stored offset of partition ${p}`));
    }
    return {
      summary: {
        client: raw.client as ClientKind,
        sdk: String(raw.sdk),
        transport: raw.transport as "tcp" | "http",
        mode: raw.mode as ReadMode,
        messages: Number(raw.messages),
        polls: raw.polls === null ? null : Number(raw.polls),
        partitions: (raw.partitions as (number | bigint)[]).map(Number),
        stored,
      },
    };
  }
  throw new Error(`neither a message nor a summary: ${line.slice(0, 300)}`);
}
