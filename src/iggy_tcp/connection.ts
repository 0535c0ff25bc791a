// One client connection on the binary front: its own connection to the broker (so login, session,
// permissions and consumer-group membership are the client's own), every frame forwarded as it
// came and answered with the broker's answer as it came — except `PollMessages`, which poll.ts
// may answer from the bucket. Frames are taken one at a time, in order: the broker answers a
// connection in order, and tierd's own calls for a poll go between the client's frames.
//
// The protocol is told from the client's first bytes: Iggy 0.8's frames start with a length and a
// known command code; 0.9's with a 256-byte consensus (VSR) header whose command byte is Request.
// A 0.9 connection is relayed byte for byte both ways (its requests carry a session's request
// numbers, which a call of tierd's own between them would break): its polls are the broker's.
//
// A broken frame from the client closes this connection only; the broker going away closes it
// the way the broker would (the client sees its connection end). At most one frame is served at
// a time per connection (reading pauses meanwhile), and no frame may exceed `maxFrameBytes`.
import type net from "node:net";
import type { Logger } from "../log.ts";
import type { TierdMetrics } from "../metrics/tierd.ts";
import { type BrokerAddress, BrokerLink, BrokerLinkClosed, connectBroker } from "./broker_link.ts";
import { BrokerStatus, servePoll, type TcpPollDeps, type TcpPollSession } from "./poll.ts";
import { statusOf } from "./status.ts";
import {
  COMMAND,
  decodePollMessagesRequest,
  encodeResponse08,
  FrameReader,
  type RequestFrame08,
  VSR_COMMAND,
  VSR_COMMAND_OFFSET,
  VSR_HEADER_SIZE,
  WireError,
} from "./wire.ts";

/** What every connection of a front shares. */
export interface ConnectionDeps extends TcpPollDeps {
  broker: BrokerAddress;
  maxFrameBytes: number;
  connectTimeoutMs: number;
  metrics: TierdMetrics;
  logger: Logger;
}

const CODES_08 = new Set<number>(Object.values(COMMAND));

/** The protocol of a connection's first bytes; undefined until enough have come. */
export function protocolOf(first: Uint8Array): "0.8" | "0.9" | "unknown" | undefined {
  if (first.length >= 8) {
    const view = new DataView(first.buffer, first.byteOffset, first.byteLength);
    if (view.getUint32(0, true) >= 4 && CODES_08.has(view.getUint32(4, true))) return "0.8";
  }
  if (first.length < VSR_HEADER_SIZE) return undefined;
  return first[VSR_COMMAND_OFFSET] === VSR_COMMAND.REQUEST ? "0.9" : "unknown";
}

let sequence = 0;

/**
 * Serves one accepted client socket until either side closes it.
 * @returns once the connection has ended
 */
export function serveConnection(deps: ConnectionDeps, client: net.Socket): Promise<void> {
  const peer = `${client.remoteAddress}:${client.remotePort}`;
  client.setNoDelay(true);
  return new Promise<void>((resolve) => {
    let first = new Uint8Array(0);
    const onData = (chunk: Uint8Array) => {
      const joined = new Uint8Array(first.length + chunk.length);
      joined.set(first);
      joined.set(chunk, first.length);
      first = joined;
      const protocol = protocolOf(first);
      if (protocol === undefined) return;
      client.off("data", onData);
      client.pause();
      if (protocol === "unknown") {
        deps.metrics.iggyErrors.inc({ listener: "tcp", kind: "client_frame" });
        deps.logger.warn("iggy tcp: a client spoke neither Iggy 0.8 nor 0.9; closed", { peer });
        client.destroy();
        resolve();
        return;
      }
      const serve = protocol === "0.8" ? serve08 : relay09;
      serve(deps, client, peer, first).catch((err) =>
        deps.logger.warn("iggy tcp: connection ended with an error", { peer, err })
      ).finally(resolve);
    };
    client.on("data", onData);
    client.once("close", () => resolve());
    client.on("error", () => client.destroy());
  });
}

/** Connects to the broker for `client`; undefined (and `client` closed) when it cannot. */
async function brokerFor<T>(
  deps: ConnectionDeps,
  client: net.Socket,
  peer: string,
  connect: () => Promise<T>,
): Promise<T | undefined> {
  try {
    return await connect();
  } catch (err) {
    deps.metrics.iggyErrors.inc({ listener: "tcp", kind: "broker_unreachable" });
    deps.logger.warn("iggy tcp: the broker cannot be reached; client connection closed", {
      peer,
      err,
    });
    client.destroy();
    return undefined;
  }
}

/** A 0.9 connection: relayed both ways unchanged. */
async function relay09(
  deps: ConnectionDeps,
  client: net.Socket,
  peer: string,
  first: Uint8Array,
): Promise<void> {
  const broker = await brokerFor(
    deps,
    client,
    peer,
    () => connectBroker(deps.broker, deps.connectTimeoutMs),
  );
  if (!broker) return;
  const count = (direction: "to_broker" | "to_client") => (chunk: Uint8Array) =>
    deps.metrics.iggyBytes.inc({ listener: "tcp", direction }, chunk.length);
  client.on("data", count("to_broker"));
  broker.on("data", count("to_client"));
  count("to_broker")(first);
  broker.write(first);
  client.pipe(broker);
  broker.pipe(client);
  client.resume();
  await new Promise<void>((resolve) => {
    const end = () => {
      client.destroy();
      broker.destroy();
      resolve();
    };
    client.once("close", end);
    broker.once("close", end);
    client.once("error", end);
    broker.once("error", end);
  });
}

/** A 0.8 connection: frame by frame, polls judged by tierd. */
async function serve08(
  deps: ConnectionDeps,
  client: net.Socket,
  peer: string,
  first: Uint8Array,
): Promise<void> {
  const link = await brokerFor(deps, client, peer, () =>
    BrokerLink.connect(deps.broker, {
      maxFrameBytes: deps.maxFrameBytes,
      timeoutMs: deps.connectTimeoutMs,
    }));
  if (!link) return;
  const session: TcpPollSession = { link, key: `tcp-${++sequence}`, probes: new Map() };
  const reader = new FrameReader("request-0.8", { maxFrameSize: deps.maxFrameBytes });
  const queue: RequestFrame08[] = [];
  let serving = false;
  let readEvicted = false;
  let done!: () => void;
  const ended = new Promise<void>((resolve) => done = resolve);
  const close = () => {
    link.close();
    client.destroy();
    done();
  };
  link.onClose(() => {
    client.end();
    client.destroy();
    done();
  });
  client.on("close", close);
  client.on("error", close);

  const serveOne = async (frame: RequestFrame08): Promise<void> => {
    const started = deps.monotonic();
    deps.metrics.iggyBytes.inc({ listener: "tcp", direction: "to_broker" }, frame.bytes.length);
    if (frame.code !== COMMAND.POLL_MESSAGES) {
      const answer = await link.request(frame.bytes);
      deps.metrics.iggyForwarded.inc({ listener: "tcp", command: commandLabel(frame.code) });
      deps.metrics.iggyBytes.inc({ listener: "tcp", direction: "to_client" }, answer.bytes.length);
      client.write(answer.bytes);
      return;
    }
    let result;
    try {
      const req = decodePollMessagesRequest(frame.payload);
      result = await servePoll(deps, session, frame, req);
    } catch (err) {
      if (err instanceof BrokerLinkClosed) throw err;
      if (err instanceof WireError) {
        // A poll tierd cannot read is the broker's to judge: its own error, not a guess.
        const answer = await link.request(frame.bytes);
        client.write(answer.bytes);
        return;
      }
      if (err instanceof BrokerStatus) {
        client.write(encodeResponse08(err.status));
        return;
      }
      const status = statusOf(err);
      deps.metrics.iggyErrors.inc({ listener: "tcp", kind: "read" });
      deps.logger.warn("iggy tcp: a poll failed", { peer, status, err });
      client.write(encodeResponse08(status));
      return;
    }
    const seconds = (deps.monotonic() - started) / 1000;
    const source = result.fromTierd ? "tierd" : "broker";
    deps.metrics.iggyPolls.inc({ listener: "tcp", source });
    deps.metrics.iggyPollDuration.observe({ listener: "tcp", source }, seconds);
    deps.metrics.iggyBytes.inc({ listener: "tcp", direction: "to_client" }, result.frame.length);
    if (result.fromTierd && !readEvicted) {
      readEvicted = true;
      deps.logger.info("iggy tcp: a client session reads evicted data through tierd", { peer });
    }
    client.write(result.frame, () => result.release());
  };

  const pump = async () => {
    if (serving) return;
    serving = true;
    client.pause();
    try {
      while (queue.length > 0) await serveOne(queue.shift()!);
    } catch (err) {
      if (!(err instanceof BrokerLinkClosed)) {
        deps.logger.warn("iggy tcp: connection closed after an error", { peer, err });
      }
      close();
      return;
    } finally {
      serving = false;
    }
    client.resume();
  };

  const take = (chunk: Uint8Array) => {
    try {
      for (const f of reader.frames(chunk)) queue.push(f);
    } catch (err) {
      deps.metrics.iggyErrors.inc({ listener: "tcp", kind: "client_frame" });
      deps.logger.warn("iggy tcp: a client sent a broken frame; its connection is closed", {
        peer,
        err: err instanceof Error ? err.message : String(err),
      });
      close();
      return;
    }
    void pump();
  };
  client.on("data", take);
  take(first);
  await ended;
}

/** A command's label for metrics: known codes by number, the rest as "other". */
function commandLabel(code: number): string {
  return CODES_08.has(code) ? String(code) : "other";
}
