// One client's connection to the broker's TCP transport: the client's own session (its login,
// its consumer-group membership), over which tierd forwards the client's frames and makes the
// few calls of its own a poll needs. The broker answers a connection's requests one at a time and
// in order, so answers are matched to requests first in, first out; a request may be written
// before the previous answer arrived.
import net from "node:net";
import tls from "node:tls";
import { type Clock, systemClock } from "../../providers/clock.ts";
import { type FrameOf, FrameReader, WireError } from "./wire.ts";

/** The broker's framing: 0.8 response frames, or 0.9 VSR frames (replies and evictions). */
export type BrokerFraming = "response-0.8" | "vsr-0.9";

/** Where the broker's TCP transport listens. */
export interface BrokerAddress {
  host: string;
  port: number;
  /** Speak TLS to the broker (its `tcp.tls.enabled`). */
  tls?: {
    /** PEM of the CA that signed the broker's certificate; the system's CAs when absent. */
    ca?: string;
    /** The name the certificate must carry; the host when absent. */
    servername?: string;
  };
}

/** The broker went away or answered something that is not a frame. */
export class BrokerLinkClosed extends Error {
  override readonly name = "BrokerLinkClosed";
  /**
   * @param message why
   * @param brokenFrame true when the broker sent something that is not a frame (or an answer
   *   to no request): the connection is closed for the broker's fault
   */
  constructor(message: string, readonly brokenFrame = false) {
    super(message);
  }
}

/** A connection to the broker. */
export class BrokerLink<F extends BrokerFraming = "response-0.8"> {
  readonly #socket: net.Socket;
  readonly #reader: FrameReader<F>;
  readonly #waiting: { resolve(f: FrameOf<F>): void; reject(e: Error): void }[] = [];
  #closed: Error | undefined;
  readonly #onClose: ((err: Error) => void)[] = [];

  private constructor(socket: net.Socket, framing: F, maxFrameBytes: number) {
    this.#socket = socket;
    this.#reader = new FrameReader(framing, { maxFrameSize: maxFrameBytes });
    socket.on("data", (chunk: Uint8Array) => {
      let frames: FrameOf<F>[];
      try {
        frames = [...this.#reader.frames(chunk)];
      } catch (err) {
        this.#fail(
          new BrokerLinkClosed(
            `the broker sent a broken frame: ${err instanceof WireError ? err.message : err}`,
            true,
          ),
        );
        return;
      }
      for (const f of frames) {
        const w = this.#waiting.shift();
        if (!w) {
          this.#fail(new BrokerLinkClosed("the broker answered a request nobody made", true));
          return;
        }
        w.resolve(f);
      }
    });
    socket.on(
      "error",
      (err) => this.#fail(new BrokerLinkClosed(`broker connection: ${err.message}`)),
    );
    socket.on("close", () => this.#fail(new BrokerLinkClosed("the broker closed the connection")));
  }

  /**
   * Connects to the broker.
   * @throws {BrokerLinkClosed} when it cannot be reached within `timeoutMs`
   */
  static async connect<F extends BrokerFraming>(
    address: BrokerAddress,
    framing: F,
    options: { maxFrameBytes: number; timeoutMs: number; clock?: Clock },
  ): Promise<BrokerLink<F>> {
    const socket = await connectBroker(address, options.timeoutMs, options.clock);
    return new BrokerLink(socket, framing, options.maxFrameBytes);
  }

  /** Calls `fn` once when the connection ends (by either side), with why. */
  onClose(fn: (err: Error) => void): void {
    if (this.#closed) fn(this.#closed);
    else this.#onClose.push(fn);
  }

  /** True once the connection has ended. */
  get closed(): boolean {
    return this.#closed !== undefined;
  }

  /**
   * Sends one whole request frame and resolves with the broker's answer to it.
   * @throws {BrokerLinkClosed} when the connection ends first
   */
  request(frame: Uint8Array): Promise<FrameOf<F>> {
    if (this.#closed) return Promise.reject(this.#closed);
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
      this.#socket.write(frame);
    });
  }

  /** Closes the connection; pending requests fail. */
  close(): void {
    this.#fail(new BrokerLinkClosed("closed by tierd"));
  }

  #fail(err: Error): void {
    if (this.#closed) return;
    this.#closed = err;
    this.#socket.destroy();
    for (const w of this.#waiting.splice(0)) w.reject(err);
    for (const fn of this.#onClose.splice(0)) fn(err);
  }
}

/**
 * A socket connected to the broker (TLS when the address says so), no-delay set.
 * @throws {BrokerLinkClosed} when it cannot be reached within `timeoutMs`
 */
function connectBroker(
  address: BrokerAddress,
  timeoutMs: number,
  clock: Clock = systemClock,
): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = address.tls
      ? tls.connect({
        host: address.host,
        port: address.port,
        ca: address.tls.ca,
        servername: address.tls.servername ?? address.host,
      })
      : net.connect({ host: address.host, port: address.port });
    socket.setNoDelay(true);
    const cancel = clock.setTimer(timeoutMs, () => {
      socket.destroy();
      reject(new BrokerLinkClosed(`the broker did not accept a connection in ${timeoutMs} ms`));
    });
    socket.once(address.tls ? "secureConnect" : "connect", () => {
      cancel();
      socket.removeAllListeners("error");
      resolve(socket);
    });
    socket.once("error", (err) => {
      cancel();
      reject(
        new BrokerLinkClosed(
          `cannot reach the broker at ${address.host}:${address.port}: ${err.message}`,
        ),
      );
    });
  });
}
