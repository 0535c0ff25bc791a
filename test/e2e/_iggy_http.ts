// A test client of the real Iggy server's HTTP API: the few routes the e2e suite drives (login,
// create stream and topic, send, flush, poll, topic details), with u64/u128 values kept exact.

/** A request to the Iggy server failed or answered something other than what was asked for. */
export class IggyHttpError extends Error {
  override readonly name = "IggyHttpError";
  constructor(
    message: string,
    readonly status: number | undefined,
    readonly body: string,
  ) {
    super(message);
  }
}

/** A typed header key or value as Iggy's JSON writes it: a kind and the bytes in base64. */
export interface IggyHeaderField {
  kind: string;
  value: string;
}

/** One user header as Iggy's JSON writes it. */
export interface IggyHeaderEntry {
  key: IggyHeaderField;
  value: IggyHeaderField;
}

/** A message to send: its id, payload and typed headers. */
export interface OutgoingMessage {
  id: bigint;
  payload: Uint8Array;
  headers: IggyHeaderEntry[];
}

/** A message as the server's poll answers it. */
export interface PolledMessage {
  checksum: bigint;
  id: bigint;
  offset: bigint;
  timestamp: bigint;
  originTimestamp: bigint;
  payload: Uint8Array;
  /** Typed entries, or the raw blob in base64 when the server could not parse it. */
  headers: IggyHeaderEntry[] | string;
}

/** One partition in the server's topic details. */
export interface IggyPartitionStats {
  id: number;
  segmentsCount: number;
  currentOffset: bigint;
  messagesCount: bigint;
  /** Human form, e.g. `"1.05 MB"` (decimal units, two decimals). */
  size: string;
}

/** The server's `GET /streams/{s}`. */
export interface IggyStreamDetails {
  id: number;
  messagesCount: bigint;
  size: string;
  topicsCount: number;
}

/** The server's `GET /streams/{s}/topics/{t}`. */
export interface IggyTopicDetails {
  id: number;
  messagesCount: bigint;
  size: string;
  partitions: IggyPartitionStats[];
}

type Reviver = (
  this: unknown,
  key: string,
  value: unknown,
  context: { source?: string },
) => unknown;

/** JSON.parse that keeps integers beyond 2^53 exact, as bigint. */
export function parseJsonExact(text: string): unknown {
  const parse = JSON.parse as (text: string, reviver: Reviver) => unknown;
  return parse(
    text,
    (_key, value, context) =>
      typeof value === "number" && !Number.isSafeInteger(value) && context.source !== undefined &&
        /^-?\d+$/.test(context.source)
        ? BigInt(context.source)
        : value,
  );
}

const toBig = (v: unknown): bigint => BigInt(v as number | bigint | string);

/** Encodes bytes as base64 text. */
export function toBase64(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

/** Decodes base64 text into bytes. */
export function fromBase64(text: string): Uint8Array {
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

/** Logged-in client of one server. Log in again with {@link IggyHttp.login} after a restart. */
export class IggyHttp {
  #token?: string;

  constructor(readonly baseUrl: string) {}

  /** The JWT of the last login. */
  get token(): string | undefined {
    return this.#token;
  }

  /**
   * `POST /users/login`; keeps the token for later calls.
   * @returns the JWT
   */
  async login(username: string, password: string): Promise<string> {
    const body = await this.#call("POST", "/users/login", { username, password }, false);
    const token = (body as { access_token?: { token?: unknown } }).access_token?.token;
    if (typeof token !== "string") {
      throw new IggyHttpError(
        "login answered without access_token.token",
        200,
        JSON.stringify(body),
      );
    }
    this.#token = token;
    return token;
  }

  /** `POST /users`: an active user with no permissions. */
  async createUser(username: string, password: string): Promise<void> {
    await this.#call("POST", "/users", { username, password, status: "active" });
  }

  /** `POST /streams`; @returns the new stream's id */
  async createStream(name: string): Promise<number> {
    const body = await this.#call("POST", "/streams", { name }) as { id: number };
    return body.id;
  }

  /**
   * `POST /streams/{s}/topics` with `partitions` partitions and string options (0.9's per-topic
   * settings such as `segment_size`; 0.8 has none, its segments are sized in its config).
   * @returns the new topic's id
   */
  async createTopic(
    stream: number,
    o: { name: string; partitions: number; options?: Record<string, string> },
  ): Promise<number> {
    const body = await this.#call("POST", `/streams/${stream}/topics`, {
      name: o.name,
      partitions_count: o.partitions,
      compression_algorithm: "none",
      message_expiry: 0,
      max_topic_size: 0,
      replication_factor: 1,
      ...(o.options && { options: o.options }),
    }) as { id: number };
    return body.id;
  }

  /** `POST /streams/{s}/topics/{t}/messages` to one partition. */
  async send(
    stream: number,
    topic: number,
    partition: number,
    messages: OutgoingMessage[],
  ): Promise<void> {
    const partitionId = new Uint8Array(4);
    new DataView(partitionId.buffer).setUint32(0, partition, true);
    await this.#call("POST", `/streams/${stream}/topics/${topic}/messages`, {
      partitioning: { kind: "partition_id", value: toBase64(partitionId) },
      messages: messages.map((m) => ({
        id: m.id.toString(),
        payload: toBase64(m.payload),
        ...(m.headers.length > 0 && { user_headers: m.headers }),
      })),
    });
  }

  /**
   * 0.8's `GET /streams/{s}/topics/{t}/messages/flush/{p}/{fsync}`.
   * @returns false when the server has no such route (0.9 flushes by per-topic thresholds)
   */
  async flush(stream: number, topic: number, partition: number): Promise<boolean> {
    const path = `/streams/${stream}/topics/${topic}/messages/flush/${partition}/true`;
    const res = await this.#fetch("GET", path);
    const text = await res.text();
    if (res.status === 404 || res.status === 405) return false;
    if (!res.ok) {
      throw new IggyHttpError(`GET ${path}: HTTP ${res.status}: ${text}`, res.status, text);
    }
    return true;
  }

  /**
   * `GET /streams/{s}/topics/{t}/messages`: up to `count` messages from `offset`, as a plain
   * consumer that never commits (so no consumer offset holds segments back).
   */
  async poll(
    stream: number,
    topic: number,
    partition: number,
    offset: bigint,
    count: number,
  ): Promise<PolledMessage[]> {
    const query = `consumer_id=1&partition_id=${partition}&kind=offset&value=${offset}` +
      `&count=${count}&auto_commit=false`;
    const body = await this.#call(
      "GET",
      `/streams/${stream}/topics/${topic}/messages?${query}`,
    ) as { messages: RawPolled[] };
    return body.messages.map((m) => ({
      checksum: toBig(m.header.checksum),
      id: toBig(m.header.id),
      offset: toBig(m.header.offset),
      timestamp: toBig(m.header.timestamp),
      originTimestamp: toBig(m.header.origin_timestamp),
      payload: fromBase64(m.payload),
      headers: m.user_headers,
    }));
  }

  /**
   * `PUT /streams/{s}/topics/{t}/consumer-offsets`: stores `offset` as consumer `consumerId`'s
   * offset in `partition` (the broker keeps every segment that ends after the lowest one).
   */
  async storeOffset(
    stream: number,
    topic: number,
    partition: number,
    consumerId: number,
    offset: bigint,
  ): Promise<void> {
    await this.#call("PUT", `/streams/${stream}/topics/${topic}/consumer-offsets`, {
      consumer_id: String(consumerId),
      partition_id: partition,
      offset: Number(offset),
    });
  }

  /** `GET /streams/{s}/topics/{t}`: the topic's and its partitions' stats. */
  async topic(stream: number, topic: number): Promise<IggyTopicDetails> {
    const body = await this.#call("GET", `/streams/${stream}/topics/${topic}`) as RawTopic;
    return {
      id: body.id,
      messagesCount: toBig(body.messages_count),
      size: body.size,
      partitions: body.partitions.map((p) => ({
        id: p.id,
        segmentsCount: p.segments_count,
        currentOffset: toBig(p.current_offset),
        messagesCount: toBig(p.messages_count),
        size: p.size,
      })),
    };
  }

  /** `GET /streams/{s}`: the stream's stats. */
  async stream(stream: number): Promise<IggyStreamDetails> {
    const body = await this.#call("GET", `/streams/${stream}`) as RawStream;
    return {
      id: body.id,
      messagesCount: toBig(body.messages_count),
      size: body.size,
      topicsCount: body.topics_count,
    };
  }

  /** A bare request with the current token (for checking how a stale token is answered). */
  request(method: string, path: string, token = this.#token): Promise<Response> {
    return fetch(this.baseUrl + path, {
      method,
      headers: token ? { authorization: `Bearer ${token}` } : {},
    });
  }

  #fetch(method: string, path: string, body?: unknown, auth = true): Promise<Response> {
    const headers: Record<string, string> = {};
    if (auth && this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    return fetch(this.baseUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    }).catch((err) => {
      throw new IggyHttpError(`${method} ${this.baseUrl}${path}: ${err.message}`, undefined, "");
    });
  }

  async #call(method: string, path: string, body?: unknown, auth = true): Promise<unknown> {
    const res = await this.#fetch(method, path, body, auth);
    const text = await res.text();
    if (!res.ok) {
      throw new IggyHttpError(
        `${method} ${path}: HTTP ${res.status}: ${text.slice(0, 500)}`,
        res.status,
        text,
      );
    }
    return text === "" ? undefined : parseJsonExact(text);
  }
}

interface RawPolled {
  header: Record<string, number | bigint>;
  payload: string;
  user_headers: IggyHeaderEntry[] | string;
}

interface RawStream {
  id: number;
  size: string;
  messages_count: number | bigint;
  topics_count: number;
}

interface RawTopic {
  id: number;
  size: string;
  messages_count: number | bigint;
  partitions: {
    id: number;
    segments_count: number;
    current_offset: number | bigint;
    messages_count: number | bigint;
    size: string;
  }[];
}
