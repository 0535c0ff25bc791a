// A bare Iggy 0.8 binary-protocol client for the e2e suite: logs in and sends frames, returning
// the answer frames byte for byte, so that a test can compare tierd's front with the broker
// exactly. The SDK clients (test/sdk, test/clients) are the unmodified ones; this is the ruler.
import net from "node:net";
import tls from "node:tls";
import {
  COMMAND,
  encodePollMessagesRequest,
  encodeRequest08,
  FrameReader,
  type PollMessagesRequest,
  type ResponseFrame08,
} from "../../src/iggy_tcp/wire.ts";

/** A connection that sends one request at a time. */
export class RawIggyTcp {
  readonly #socket: net.Socket;
  readonly #reader = new FrameReader("response-0.8");
  readonly #waiting: ((f: ResponseFrame08 | undefined) => void)[] = [];
  #closed = false;

  private constructor(socket: net.Socket) {
    this.#socket = socket;
    socket.on("data", (chunk: Uint8Array) => {
      for (const f of this.#reader.frames(chunk)) this.#waiting.shift()?.(f);
    });
    const end = () => {
      this.#closed = true;
      for (const w of this.#waiting.splice(0)) w(undefined);
    };
    socket.on("close", end);
    socket.on("error", end);
  }

  /**
   * Connects to `address` (`host:port`); over TLS when `tlsCa` (the PEM to trust) is given.
   */
  static connect(
    address: string,
    tlsOptions?: { ca: string; servername: string },
  ): Promise<RawIggyTcp> {
    const [host, port] = address.split(":");
    return new Promise((resolve, reject) => {
      const s: net.Socket = tlsOptions
        ? tls.connect({ host, port: Number(port), ...tlsOptions }, () => resolve(new RawIggyTcp(s)))
        : net.connect({ host, port: Number(port) }, () => resolve(new RawIggyTcp(s)));
      s.once("error", reject);
    });
  }

  /** True once the connection has ended. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Sends raw bytes and waits for one answer frame (or the connection's end: undefined). */
  sendRaw(bytes: Uint8Array, timeoutMs = 10_000): Promise<ResponseFrame08 | undefined> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(undefined), timeoutMs);
      const done = (f: ResponseFrame08 | undefined) => {
        clearTimeout(timer);
        resolve(f);
      };
      if (this.#closed) return done(undefined);
      this.#waiting.push(done);
      this.#socket.write(bytes);
    });
  }

  /** Sends a command; throws unless it succeeds. */
  async call(code: number, payload: Uint8Array): Promise<ResponseFrame08> {
    const f = await this.sendRaw(encodeRequest08(code, payload));
    if (!f) throw new Error(`command ${code}: the connection ended`);
    return f;
  }

  /** Logs in (LoginUser: name, password, no version or context). */
  async login(username: string, password: string): Promise<void> {
    const f = await this.call(COMMAND.LOGIN_USER, loginUserPayload(username, password));
    if (f.status !== 0) throw new Error(`login of ${username}: status ${f.status}`);
  }

  /** A PollMessages answer frame, whole. */
  poll(req: PollMessagesRequest): Promise<ResponseFrame08> {
    return this.call(COMMAND.POLL_MESSAGES, encodePollMessagesRequest(req));
  }

  close(): void {
    this.#socket.destroy();
  }
}

/**
 * A 0.8 LoginUser payload (core/binary_protocol/src/requests/users/login_user.rs): name and
 * password each behind a length byte, then an empty version and context (u32 lengths 0).
 */
export function loginUserPayload(username: string, password: string): Uint8Array {
  const u = new TextEncoder().encode(username);
  const p = new TextEncoder().encode(password);
  const payload = new Uint8Array(1 + u.length + 1 + p.length + 8);
  payload[0] = u.length;
  payload.set(u, 1);
  payload[1 + u.length] = p.length;
  payload.set(p, 2 + u.length);
  return payload;
}
