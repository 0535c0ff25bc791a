// One client connection on the binary front: its own connection to the broker (so login, session,
// permissions and consumer-group membership are the client's own), every frame forwarded as it
// came and answered with the broker's answer as it came — except `PollMessages`, which poll.ts
// may answer from the bucket. Frames are taken one at a time, in order: the broker answers a
// connection in order, and tierd's own calls for a poll go between the client's frames.
//
// The protocol is told from the client's first bytes: Iggy 0.8's frames start with a length and a
// known command code; 0.9's with a 256-byte consensus (VSR) header whose command byte is Request.
// At 0.9 tierd's own calls for a poll ride the client's session and current request number, as
// the SDK sends reads and partition operations (the broker neither advances nor deduplicates
// those), and tierd's answer carries the header the broker stamped on tierd's own poll.
//
// A broken frame from the client closes this connection only; the broker going away closes it
// the way the broker would (the client sees its connection end). At most one frame is served at
// a time per connection; frames sent ahead wait up to 1 MiB (then the client is not read until
// they are served), no frame may exceed `maxFrameBytes`, and the broker's answers are passed to
// the client as they arrive, the broker's connection unread while the client lags.
import type net from "node:net";
import type { Logger } from "../log.ts";
import type { TierdMetrics } from "../metrics/tierd.ts";
import {
  type BrokerAddress,
  type BrokerFraming,
  BrokerLink,
  BrokerLinkClosed,
  type Passed,
} from "./broker_link.ts";
import {
  answerCheckBytes,
  BrokerStatus,
  type BrokerVersion,
  type Forwarded,
  servePoll,
  type TcpPollDeps,
  type TcpSession,
} from "./poll.ts";
import { statusOf } from "./status.ts";
import {
  COMMAND,
  decodePollMessagesRequest,
  decodeVsrReplyHeader,
  decodeVsrRequestHeader,
  encodeRequest08,
  encodeResponse08,
  encodeVsrReply,
  encodeVsrRequest,
  type FrameOf,
  FrameReader,
  type Framing,
  IGGY_ERROR,
  resultSection,
  VSR_COMMAND,
  VSR_COMMAND_OFFSET,
  VSR_HEADER_SIZE,
  VSR_SIZE_OFFSET,
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

const CODES = new Set<number>(Object.values(COMMAND));

/** The protocol of a connection's first bytes; undefined until enough have come. */
function protocolOf(first: Uint8Array): "0.8" | "0.9" | "unknown" | undefined {
  if (first.length >= 8) {
    const view = new DataView(first.buffer, first.byteOffset, first.byteLength);
    if (view.getUint32(0, true) >= 4 && CODES.has(view.getUint32(4, true))) return "0.8";
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
      const served = protocol === "0.8"
        ? serveFrames(deps, DIALECT_08, client, peer, first)
        : serveFrames(deps, DIALECT_09, client, peer, first);
      served.catch((err) =>
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

/** The parts of a connection that differ between 0.8 and 0.9. */
interface Dialect<C extends Framing, B extends BrokerFraming> {
  version: BrokerVersion;
  clientFraming: C;
  brokerFraming: B;
  /** The command a client frame carries (undefined: none tierd knows, such as a login). */
  codeOf(frame: FrameOf<C>): number | undefined;
  /** The poll being served, as a session its calls go through. */
  session(frame: FrameOf<C>, link: BrokerLink<B>, conn: ConnectionState): TcpSession;
  /** The answer to a poll tierd cannot serve: a failure with `status`. */
  failure(frame: FrameOf<C>, status: number): Uint8Array;
}

/** What a connection keeps between frames. */
interface ConnectionState {
  key: string;
  probes: TcpSession["probes"];
  /** Writes bytes of the broker's answers to the client as they arrive. */
  sink(chunk: Uint8Array): void;
}

const ALWAYS = () => true;

/** Forwards `frame`, its answer passed to the client as it arrives (when `check` accepts it). */
async function passOn<B extends BrokerFraming>(
  link: BrokerLink<B>,
  conn: ConnectionState,
  frame: Uint8Array,
  version: BrokerVersion,
  check?: (head: Uint8Array) => boolean,
): Promise<Forwarded> {
  const answer: Passed<B> = await link.requestPassing(frame, {
    headBytes: check ? answerCheckBytes(version) : 0,
    check: check ?? ALWAYS,
    sink: conn.sink,
  });
  return "passed" in answer ? { sent: answer.passed } : { frame: answer.frame.bytes };
}

const DIALECT_08: Dialect<"request-0.8", "response-0.8"> = {
  version: "iggy-0.8",
  clientFraming: "request-0.8",
  brokerFraming: "response-0.8",
  codeOf: (frame) => frame.code,
  session: (frame, link, conn) => ({
    version: "iggy-0.8",
    key: conn.key,
    probes: conn.probes,
    async call(code, payload, what) {
      const answer = await link.request(encodeRequest08(code, payload));
      if (answer.status !== 0) throw new BrokerStatus(answer.status, answer.bytes, what);
      return answer.payload;
    },
    forward: (check) => passOn(link, conn, frame.bytes, "iggy-0.8", check),
    answer: (payload) => encodeResponse08(0, payload),
  }),
  failure: (_frame, status) => encodeResponse08(status),
};

const DIALECT_09: Dialect<"vsr-0.9", "vsr-0.9"> = {
  version: "iggy-0.9",
  clientFraming: "vsr-0.9",
  brokerFraming: "vsr-0.9",
  codeOf: (frame) =>
    frame.command === VSR_COMMAND.REQUEST ? decodeVsrRequestHeader(frame.header).code : undefined,
  session: (frame, link, conn) => {
    const request = decodeVsrRequestHeader(frame.header);
    // The broker's reply to tierd's own poll on this session and request number: the header
    // tierd's answer to the client's poll carries (the broker stamps the same fields on both).
    let pollReply: Uint8Array | undefined;
    return {
      version: "iggy-0.9",
      key: conn.key,
      probes: conn.probes,
      async call(code, payload, what) {
        // Reads and partition operations ride the client's session and current request number,
        // as its SDK sends them: the broker neither advances nor deduplicates them.
        const answer = await link.request(encodeVsrRequest({
          code,
          client: request.client,
          session: request.session,
          request: request.request,
        }, payload));
        if (answer.command !== VSR_COMMAND.REPLY) {
          throw new BrokerStatus(IGGY_ERROR.DISCONNECTED, answer.bytes, `${what} (evicted)`);
        }
        const reply = decodeVsrReplyHeader(answer.header);
        if (reply.status !== 0) throw new BrokerStatus(reply.status, answer.bytes, what);
        if (code === COMMAND.POLL_MESSAGES) pollReply = answer.header.slice();
        if (code === COMMAND.STORE_CONSUMER_OFFSET) {
          const result = resultSection(answer.payload);
          if (result.code !== 0) throw new BrokerStatus(result.code, answer.bytes, what);
        }
        return answer.payload;
      },
      forward: (check) => passOn(link, conn, frame.bytes, "iggy-0.9", check),
      answer(payload) {
        const header = pollReply ?? encodeVsrReply(request).subarray(0, VSR_HEADER_SIZE);
        const out = new Uint8Array(VSR_HEADER_SIZE + payload.length);
        out.set(header);
        new DataView(out.buffer).setUint32(VSR_SIZE_OFFSET, out.length, true);
        out.set(payload, VSR_HEADER_SIZE);
        return out;
      },
    };
  },
  failure: (frame, status) => encodeVsrReply(decodeVsrRequestHeader(frame.header), { status }),
};

/** A connection frame by frame, polls judged by tierd. */
async function serveFrames<C extends Framing, B extends BrokerFraming>(
  deps: ConnectionDeps,
  dialect: Dialect<C, B>,
  client: net.Socket,
  peer: string,
  first: Uint8Array,
): Promise<void> {
  const link = await brokerFor(
    deps,
    client,
    peer,
    () =>
      BrokerLink.connect(deps.broker, dialect.brokerFraming, {
        maxFrameBytes: deps.maxFrameBytes,
        timeoutMs: deps.connectTimeoutMs,
      }),
  );
  if (!link) return;
  // The broker's answers go to the client as they arrive; when the client falls behind, the
  // broker's connection stops being read until the client has taken what it was given.
  let backedUp = false;
  const sink = (chunk: Uint8Array) => {
    if (client.write(chunk) || backedUp) return;
    backedUp = true;
    link.pause();
    client.once("drain", () => {
      backedUp = false;
      link.resume();
    });
  };
  const conn: ConnectionState = { key: `tcp-${++sequence}`, probes: new Map(), sink };
  const reader = new FrameReader(dialect.clientFraming, { maxFrameSize: deps.maxFrameBytes });
  const queue: FrameOf<C>[] = [];
  let queuedBytes = 0;
  let serving = false;
  let paused = false;
  let readEvicted = false;
  let done!: () => void;
  const ended = new Promise<void>((resolve) => done = resolve);
  const close = () => {
    link.close();
    client.destroy();
    done();
  };
  link.onClose((err) => {
    if (err instanceof BrokerLinkClosed && err.brokenFrame) {
      deps.metrics.iggyErrors.inc({ listener: "tcp", kind: "broker_frame" });
      deps.logger.warn(
        "iggy tcp: the broker sent a broken frame; the client's connection is closed",
        {
          peer,
          err: err.message,
        },
      );
    }
    client.end();
    client.destroy();
    done();
  });
  client.on("close", close);
  client.on("error", close);

  const serveOne = async (frame: FrameOf<C>): Promise<void> => {
    const started = deps.monotonic();
    deps.metrics.iggyBytes.inc({ listener: "tcp", direction: "to_broker" }, frame.bytes.length);
    const code = dialect.codeOf(frame);
    if (code !== COMMAND.POLL_MESSAGES) {
      const answer = await passOn(link, conn, frame.bytes, dialect.version);
      deps.metrics.iggyForwarded.inc({ listener: "tcp", command: commandLabel(code) });
      const bytes = "sent" in answer ? answer.sent : answer.frame.length;
      deps.metrics.iggyBytes.inc({ listener: "tcp", direction: "to_client" }, bytes);
      return;
    }
    const session = dialect.session(frame, link, conn);
    let result;
    try {
      result = await servePoll(deps, session, decodePollMessagesRequest(frame.payload));
    } catch (err) {
      if (err instanceof BrokerLinkClosed) throw err;
      if (err instanceof WireError) {
        // A poll tierd cannot read is the broker's to judge: its own answer, not a guess.
        deps.logger.debug("iggy tcp: a poll tierd cannot read went to the broker", { peer, err });
        await session.forward();
        return;
      }
      if (err instanceof BrokerStatus) {
        // The broker's refusal of a call tierd made for the client (its permissions, a group
        // it left): the client's answer, as the broker gave it.
        deps.logger.debug("iggy tcp: the broker refused a call of a poll", {
          peer,
          status: err.status,
          err: err.message,
        });
        client.write(err.frame);
        return;
      }
      const status = statusOf(err, dialect.version);
      deps.metrics.iggyErrors.inc({ listener: "tcp", kind: "read" });
      deps.logger.warn("iggy tcp: a poll failed", { peer, status, err });
      client.write(dialect.failure(frame, status));
      return;
    }
    const seconds = (deps.monotonic() - started) / 1000;
    const source = result.fromTierd ? "tierd" : "broker";
    deps.metrics.iggyPolls.inc({ listener: "tcp", source });
    deps.metrics.iggyPollDuration.observe({ listener: "tcp", source }, seconds);
    deps.metrics.iggyBytes.inc({ listener: "tcp", direction: "to_client" }, result.bytes);
    if (result.fromTierd && !readEvicted) {
      readEvicted = true;
      deps.logger.info("iggy tcp: a client session reads evicted data through tierd", {
        peer,
        version: dialect.version,
      });
    }
    if (result.frame) client.write(result.frame, () => result.release());
    else result.release();
  };

  const pump = async () => {
    if (serving) return;
    serving = true;
    try {
      while (queue.length > 0) {
        const frame = queue.shift()!;
        queuedBytes -= frame.bytes.length;
        await serveOne(frame);
      }
    } catch (err) {
      if (!(err instanceof BrokerLinkClosed)) {
        deps.logger.warn("iggy tcp: connection closed after an error", { peer, err });
      }
      close();
      return;
    } finally {
      serving = false;
    }
    if (paused) {
      paused = false;
      client.resume();
    }
  };

  const take = (chunk: Uint8Array) => {
    try {
      for (const f of reader.frames(chunk)) {
        queue.push(f);
        queuedBytes += f.bytes.length;
      }
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
    // Frames sent ahead of their answers wait, up to a bound; past it the client is not read
    // until they are served (never while nothing is being served: a large frame's rest must come).
    if (serving && !paused && queuedBytes + reader.buffered > QUEUED_BYTES) {
      paused = true;
      client.pause();
    }
  };
  client.on("data", take);
  take(first);
  if (!paused) client.resume(); // paused while the protocol was told
  await ended;
}

/** Bytes of client frames waiting to be served past which the client is not read. */
const QUEUED_BYTES = 1 << 20;

/** A command's label for metrics: known codes by number, the rest as "other". */
function commandLabel(code: number | undefined): string {
  return code !== undefined && CODES.has(code) ? String(code) : "other";
}
