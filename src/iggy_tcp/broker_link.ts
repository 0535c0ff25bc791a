// One client's connection to the broker's TCP transport: the client's own session (its login,
// its consumer-group membership), over which tierd forwards the client's frames and makes the
// few calls of its own a poll needs. The broker answers a connection's requests one at a time and
// in order, so answers are matched to requests first in, first out; a request may be written
// before the previous answer arrived.
import net from "node:net";
import tls from "node:tls";
import { type Clock, systemClock } from "../base/clock.ts";
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

/**
 * How an answer may be passed to the client as it arrives, instead of whole: once its first
 * `headBytes` bytes (or all of it, when shorter) are in, `check` decides; passed bytes go to
 * `sink` in the order they came, each chunk as the socket gave it.
 */
export interface PassOn {
  headBytes: number;
  check(head: Uint8Array): boolean;
  sink(chunk: Uint8Array): void;
}

/** An answer passed on ({@link PassOn}): its size; or, refused by the check, the whole frame. */
export type Passed<F extends BrokerFraming> = { passed: number } | { frame: FrameOf<F> };

interface Waiter<F extends BrokerFraming> {
  resolve(answer: FrameOf<F> | Passed<F>): void;
  reject(err: Error): void;
  /** Set for a pass-on request until its check refuses it. */
  pass?: PassOn;
}

/** A connection to the broker. */
export class BrokerLink<F extends BrokerFraming = "response-0.8"> {
  readonly #socket: net.Socket;
  readonly #reader: FrameReader<F>;
  readonly #waiting: Waiter<F>[] = [];
  /** The answer being passed on: bytes still to come, and where they go. */
  #passing:
    | { left: number; sink(chunk: Uint8Array): void; done(): void; reject(err: Error): void }
    | undefined;
  #closed: Error | undefined;
  readonly #onClose: ((err: Error) => void)[] = [];

  private constructor(socket: net.Socket, framing: F, maxFrameBytes: number) {
    this.#socket = socket;
    this.#reader = new FrameReader(framing, { maxFrameSize: maxFrameBytes });
    socket.on("data", (chunk: Uint8Array) => {
      try {
        this.#receive(chunk);
      } catch (err) {
        this.#fail(
          new BrokerLinkClosed(
            `the broker sent a broken frame: ${err instanceof WireError ? err.message : err}`,
            true,
          ),
        );
      }
    });
    socket.on(
      "error",
      (err) => this.#fail(new BrokerLinkClosed(`broker connection: ${err.message}`)),
    );
    socket.on("close", () => this.#fail(new BrokerLinkClosed("the broker closed the connection")));
  }

  /** Takes one socket read: the rest of an answer being passed on, then whole frames. */
  #receive(chunk: Uint8Array): void {
    const passing = this.#passing;
    if (passing) {
      const n = Math.min(passing.left, chunk.length);
      passing.sink(n === chunk.length ? chunk : chunk.subarray(0, n));
      passing.left -= n;
      if (passing.left > 0) return;
      this.#passing = undefined;
      passing.done();
      chunk = chunk.subarray(n);
    }
    this.#reader.push(chunk);
    while (!this.#closed) {
      const w = this.#waiting[0];
      if (w?.pass) {
        const head = this.#reader.head(w.pass.headBytes);
        if (!head) return;
        if (w.pass.check(head.bytes)) {
          this.#waiting.shift();
          const { sink } = w.pass;
          let left = head.size;
          for (const part of this.#reader.drain(left)) {
            sink(part);
            left -= part.length;
          }
          const done = () => w.resolve({ passed: head.size });
          if (left > 0) {
            this.#passing = { left, sink, done, reject: w.reject };
            return;
          }
          done();
          continue;
        }
        w.pass = undefined; // refused: the whole frame is its answer
      }
      const frame = this.#reader.next();
      if (!frame) return;
      if (!w) {
        this.#fail(new BrokerLinkClosed("the broker answered a request nobody made", true));
        return;
      }
      this.#waiting.shift();
      w.resolve(frame);
    }
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
      this.#waiting.push({ resolve: resolve as Waiter<F>["resolve"], reject });
      this.#socket.write(frame);
    });
  }

  /**
   * Sends one whole request frame and passes the broker's answer on as it arrives, when `pass`
   * accepts its head; otherwise resolves with the whole answer, nothing passed.
   * @throws {BrokerLinkClosed} when the connection ends first (part may have been passed)
   */
  requestPassing(frame: Uint8Array, pass: PassOn): Promise<Passed<F>> {
    if (this.#closed) return Promise.reject(this.#closed);
    return new Promise((resolve, reject) => {
      this.#waiting.push({
        resolve: (answer) =>
          resolve("passed" in answer || "frame" in answer ? answer : { frame: answer }),
        reject,
        pass,
      });
      this.#socket.write(frame);
    });
  }

  /** Stops reading the broker's answers (the client is not taking them fast enough). */
  pause(): void {
    this.#socket.pause();
  }

  /** Reads the broker's answers again after {@link pause}. */
  resume(): void {
    this.#socket.resume();
  }

  /** Closes the connection; pending requests fail. */
  close(): void {
    this.#fail(new BrokerLinkClosed("closed by tierd"));
  }

  #fail(err: Error): void {
    if (this.#closed) return;
    this.#closed = err;
    this.#socket.destroy();
    this.#passing?.reject(err);
    this.#passing = undefined;
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
