// The client the iggy_tcp benchmark drives Iggy 0.8's binary protocol with, the same against the
// broker and against tierd's front: one request at a time on a Deno TCP connection, the answer
// read into a buffer the connection reuses (no timers, no per-frame objects), so that its own cost
// per round trip is as small as the measurement allows. The e2e suite's RawIggyTcp
// (test/e2e/_iggy_tcp_raw.ts) is the ruler for exact bytes; this one is for speed. Also the
// SendMessages request, which tierd itself never encodes.
import { MESSAGE_HEADER_SIZE } from "../src/format/iggy08.ts";
import { loginUserPayload } from "../test/e2e/_iggy_tcp_raw.ts";
import {
  COMMAND,
  encodePollMessagesRequest,
  encodeRequest08,
  HEADER_SIZE_08,
  type PollMessagesRequest,
  WireWriter,
} from "../src/iggy_tcp/wire.ts";

/** One 0.8 answer: valid until the connection's next request. */
export interface Answer08 {
  status: number;
  /** The payload, a view of the connection's buffer. */
  payload: Uint8Array;
  /** Header and payload: the whole frame as it came. */
  frameBytes: number;
}

/** A 0.8 request or answer went wrong. */
export class IggyClientError extends Error {
  override readonly name = "IggyClientError";
}

/** A connection to a 0.8 broker (or a front of one) that sends one request at a time. */
export class IggyTcpClient {
  readonly #conn: Deno.TcpConn;
  #buf = new Uint8Array(1 << 20);
  #view = new DataView(this.#buf.buffer);
  #filled = 0;

  private constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
  }

  /**
   * Connects to `address` (`host:port`), no-delay set, and logs in when `login` is given.
   * @throws {IggyClientError} when the login is refused
   */
  static async connect(
    address: string,
    login?: { username: string; password: string },
  ): Promise<IggyTcpClient> {
    const [hostname, port] = address.split(":");
    const conn = await Deno.connect({ hostname, port: Number(port) });
    conn.setNoDelay(true);
    const client = new IggyTcpClient(conn);
    if (login) await client.login(login.username, login.password);
    return client;
  }

  /** LoginUser: name, password, no version or context. */
  async login(username: string, password: string): Promise<void> {
    const payload = loginUserPayload(username, password);
    const answer = await this.request(encodeRequest08(COMMAND.LOGIN_USER, payload));
    if (answer.status !== 0) {
      throw new IggyClientError(`login of ${username}: status ${answer.status}`);
    }
  }

  /**
   * Writes one whole request frame and reads its answer.
   * @throws {IggyClientError} when the connection ends first
   */
  async request(frame: Uint8Array): Promise<Answer08> {
    for (let at = 0; at < frame.length;) at += await this.#conn.write(frame.subarray(at));
    this.#filled = 0;
    await this.#fill(HEADER_SIZE_08);
    const status = this.#view.getUint32(0, true);
    const length = this.#view.getUint32(4, true);
    const size = HEADER_SIZE_08 + length;
    await this.#fill(size);
    if (this.#filled !== size) {
      throw new IggyClientError(`${this.#filled - size} bytes after an answer of ${size}`);
    }
    return { status, payload: this.#buf.subarray(HEADER_SIZE_08, size), frameBytes: size };
  }

  /** Reads until at least `n` bytes are buffered. */
  async #fill(n: number): Promise<void> {
    if (n > this.#buf.length) {
      const bigger = new Uint8Array(Math.max(n, this.#buf.length * 2));
      bigger.set(this.#buf.subarray(0, this.#filled));
      this.#buf = bigger;
      this.#view = new DataView(bigger.buffer);
    }
    while (this.#filled < n) {
      const got = await this.#conn.read(this.#buf.subarray(this.#filled));
      if (got === null) throw new IggyClientError("the connection ended before a whole answer");
      this.#filled += got;
    }
  }

  close(): void {
    try {
      this.#conn.close();
    } catch {
      // already closed
    }
  }
}

/** A PollMessages request frame. */
export function pollFrame(req: PollMessagesRequest): Uint8Array {
  return encodeRequest08(COMMAND.POLL_MESSAGES, encodePollMessagesRequest(req));
}

/** A Ping request frame (code 1, no payload). */
export function pingFrame(): Uint8Array {
  return encodeRequest08(COMMAND.PING, new Uint8Array(0));
}

/** The message count of a 0.8 PollMessages answer (its head: partition u32, current u64, count u32). */
export function polledCount(payload: Uint8Array): number {
  if (payload.length < 16) throw new IggyClientError(`a poll answer of ${payload.length} bytes`);
  return new DataView(payload.buffer, payload.byteOffset, 16).getUint32(12, true);
}

/** One index entry of a SendMessages request. */
const INDEX_SIZE = 16;

/** What a SendMessages request carries. */
export interface SendMessagesRequest {
  stream: number;
  topic: number;
  partition: number;
  /** Each message's payload; no user headers. */
  payloads: readonly Uint8Array[];
  /** The first message's id, the next ones counting up; 0 lets the broker pick each id. */
  firstId?: bigint;
}

/**
 * A SendMessages (101) request frame at Iggy 0.8, as its SDK writes it
 * (core/binary_protocol/src/requests/messages/send_messages.rs at tag server-0.8.0, read by
 * core/server/src/binary/handlers/messages/send_messages_handler.rs):
 * `[metadata_length u32][stream id][topic id][partitioning][messages_count u32]`, then one 16-byte
 * index per message (u32 0, u32 the cumulative size of the messages so far, u64 0), then each
 * message: a 64-byte header (checksum 0, id u128, offset 0, timestamp 0, origin timestamp u64,
 * user headers length u32, payload length u32, reserved u64 0) and its payload. Identifiers are
 * numeric (kind 1, length 4, u32); partitioning is by partition id (kind 2, length 4, u32).
 */
export function sendMessagesFrame(req: SendMessagesRequest): Uint8Array {
  const metadata = 6 + 6 + 6 + 4;
  let messages = 0;
  for (const p of req.payloads) messages += MESSAGE_HEADER_SIZE + p.length;
  const w = new WireWriter(4 + metadata + req.payloads.length * INDEX_SIZE + messages);
  w.u32(metadata, "metadata length");
  w.u8(1, "stream id kind").u8(4, "stream id length").u32(req.stream, "stream id");
  w.u8(1, "topic id kind").u8(4, "topic id length").u32(req.topic, "topic id");
  w.u8(2, "partitioning kind").u8(4, "partitioning length").u32(req.partition, "partition id");
  w.u32(req.payloads.length, "messages count");
  let cumulative = 0;
  for (const p of req.payloads) {
    cumulative += MESSAGE_HEADER_SIZE + p.length;
    w.u32(0, "index offset").u32(cumulative, "index position").u64(0n, "index timestamp");
  }
  const origin = BigInt(Date.now()) * 1000n;
  req.payloads.forEach((p, i) => {
    const id = req.firstId === undefined || req.firstId === 0n ? 0n : req.firstId + BigInt(i);
    w.u64(0n, "checksum").u128(id, "id").u64(0n, "offset").u64(0n, "timestamp")
      .u64(origin, "origin timestamp").u32(0, "user headers length").u32(p.length, "payload length")
      .u64(0n, "reserved").put(p);
  });
  return encodeRequest08(COMMAND.SEND_MESSAGES, w.finish());
}
