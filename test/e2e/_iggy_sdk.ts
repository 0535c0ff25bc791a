// The unmodified Iggy SDK client of the e2e suite (test/sdk, the Rust `iggy` crate over HTTP):
// built once by scripts/build-sdk-client.sh into ~/.cache/tierd/sdk/, then run against tierd's
// Iggy-compatible listener, its output parsed.
import { join } from "node:path";
import { ROOT } from "../fixtures/_agent.ts";

/** One message as the SDK client printed it. */
export interface SdkMessage {
  offset: bigint;
  id: bigint;
  checksum: bigint;
  timestamp: bigint;
  originTimestamp: bigint;
  payloadLength: number;
  /** FNV-1a 64 of the payload. */
  payloadHash: bigint;
  headers: number;
}

/** What a consumer-group read printed. */
export interface SdkRead {
  group: number;
  messages: SdkMessage[];
  polls: number;
  /** The group's stored offset as the SDK read it back; undefined for none. */
  stored?: bigint;
}

/** FNV-1a 64, as the SDK client computes it. */
export function fnv1a64(bytes: Uint8Array): bigint {
  let h = 0xcbf29ce484222325n;
  for (const b of bytes) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  return h;
}

let built: Promise<string> | undefined;

/**
 * Builds the client when no build of its sources is cached (`TIERD_SDK_CLIENT` names a binary
 * to use instead).
 * @returns the binary's path
 * @throws {Error} with the build's output when it fails
 */
export function sdkClient(): Promise<string> {
  return built ??= (async () => {
    const given = Deno.env.get("TIERD_SDK_CLIENT");
    if (given) return given;
    const out = await new Deno.Command("bash", {
      args: [join(ROOT, "scripts/build-sdk-client.sh")],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout).trim();
    if (!out.success) {
      throw new Error(`build-sdk-client.sh failed:\n${new TextDecoder().decode(out.stderr)}`);
    }
    return text.split("\n").at(-1)!;
  })();
}

async function run(args: string[]): Promise<string> {
  const out = await new Deno.Command(await sdkClient(), {
    args,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(
      `tierd-sdk-client ${args.join(" ")} exited ${out.code}: ` +
        `${new TextDecoder().decode(out.stderr)}\n${stdout.slice(-2000)}`,
    );
  }
  return stdout;
}

/** Creates consumer group `group` and reads `partition` with it (next + auto-commit) to the end. */
export async function sdkReadWithGroup(o: {
  url: string;
  username: string;
  password: string;
  stream: number;
  topic: number;
  partition: number;
  group: string;
  count: number;
}): Promise<SdkRead> {
  const text = await run([
    o.url,
    o.username,
    o.password,
    String(o.stream),
    String(o.topic),
    String(o.partition),
    o.group,
    String(o.count),
  ]);
  const read: SdkRead = { group: -1, messages: [], polls: 0 };
  for (const line of text.split("\n")) {
    const [what, ...f] = line.split(" ");
    if (what === "group") read.group = Number(f[0]);
    else if (what === "polls") read.polls = Number(f[0]);
    else if (what === "stored") read.stored = f[0] === "none" ? undefined : BigInt(f[0]);
    else if (what === "message") {
      read.messages.push({
        offset: BigInt(f[0]),
        id: BigInt(f[1]),
        checksum: BigInt(f[2]),
        timestamp: BigInt(f[3]),
        originTimestamp: BigInt(f[4]),
        payloadLength: Number(f[5]),
        payloadHash: BigInt(f[6]),
        headers: Number(f[7]),
      });
    }
  }
  return read;
}

/** One poll with a given access token: `error CODE` or `messages N`, as the SDK reports it. */
export async function sdkPollWithToken(o: {
  url: string;
  token: string;
  stream: number;
  topic: number;
  partition: number;
}): Promise<string> {
  const text = await run([
    "--token",
    o.url,
    o.token,
    String(o.stream),
    String(o.topic),
    String(o.partition),
  ]);
  return text.trim();
}
