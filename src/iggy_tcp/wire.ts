// The pure codec of Iggy's TCP protocol that tierd's forwarding proxy needs: the framing of each
// version, an incremental frame reader, and the few command payloads tierd reads or writes.
// Sources: apache/iggy at tag `server-0.8.0` (f5350d99) and at cc269ef7 (server 0.9.0-edge.5).
//
// The two versions do not share a framing. 0.8 frames a request `[length u32][code u32][payload]`
// with length = 4 + payload length, and a response `[status u32][length u32][payload]`
// (core/binary_protocol/src/framing.rs:97-111, 152-170; core/server/src/tcp/connection_handler.rs
// :78-94). 0.9 carries every client request and reply behind a 256-byte VSR header whose u32 at
// byte 48 is the whole frame's size (core/message_bus/src/framing.rs:107-125 reads client frames so;
// core/binary_protocol/src/consensus/header.rs:63, 259, 550, 709 lay the headers out); a 0.8
// client cannot talk to a 0.9 broker (its LOGIN_USER is answered with an eviction,
// core/server/src/dispatch.rs:1044-1067). The command payloads below are the same at both versions
// except where noted.

/** What is wrong with bytes on the wire. */
export type WireErrorKind =
  /** A field runs past the end of the bytes it is read from. */
  | "truncated"
  /** A frame announces more bytes than the reader accepts. */
  | "frame_too_large"
  /** A frame's length field is impossible (smaller than its own header). */
  | "bad_frame"
  /** A field holds a value the protocol does not allow (unknown kind, bad length, bad UTF-8). */
  | "bad_value"
  /** A count disagrees with the entries that follow it. */
  | "count_mismatch"
  /** A 0.9 batch's framing is wrong: reserved bytes set, frames that do not tile its length. */
  | "bad_batch"
  /** A value given to an encoder does not fit its field. */
  | "out_of_range";

/**
 * Bytes that are not what the Iggy protocol allows, or a value that cannot be encoded.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const reader = new FrameReader("request-0.8", { maxFrameSize: 1024 });
 * const announcing16MiB = new Uint8Array([0, 0, 0, 1, 1, 0, 0, 0]);
 * try {
 *   for (const _ of reader.frames(announcing16MiB)) assert.fail("an oversized frame was cut");
 * } catch (err) {
 *   if (!(err instanceof WireError)) throw err;
 *   assert.equal(err.kind, "frame_too_large"); // the connection is out of step: close it
 * }
 * ```
 */
export class WireError extends Error {
  override readonly name = "WireError";

  /**
   * @param kind what kind of problem this is
   * @param what a sentence naming the field and what is wrong with it
   * @param at byte position of the problem in the buffer being read, when there is one
   */
  constructor(readonly kind: WireErrorKind, what: string, readonly at?: number) {
    super(at === undefined ? what : `${what} (at byte ${at})`);
  }
}

const U64_MAX = (1n << 64n) - 1n;
const U128_MAX = (1n << 128n) - 1n;

/** A DataView over exactly the bytes of `buf`. */
function viewOf(buf: Uint8Array): DataView {
  return new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** A bounds-checked little-endian reader over untrusted bytes. */
export class WireCursor {
  readonly #view: DataView;

  /**
   * @param bytes the bytes to read (kept by reference)
   * @param at where to start
   */
  constructor(readonly bytes: Uint8Array, public at = 0) {
    this.#view = viewOf(bytes);
  }

  /** Bytes left after {@link at}. */
  get remaining(): number {
    return Math.max(0, this.bytes.length - this.at);
  }

  #need(n: number, field: string): number {
    if (n > this.remaining) {
      throw new WireError(
        "truncated",
        `${field} needs ${n} bytes but only ${this.remaining} are left`,
        this.at,
      );
    }
    const at = this.at;
    this.at += n;
    return at;
  }

  /** @throws {WireError} `truncated` */
  u8(field: string): number {
    return this.bytes[this.#need(1, field)];
  }

  /** @throws {WireError} `truncated` */
  u32(field: string): number {
    return this.#view.getUint32(this.#need(4, field), true);
  }

  /** @throws {WireError} `truncated` */
  u64(field: string): bigint {
    return this.#view.getBigUint64(this.#need(8, field), true);
  }

  /** @throws {WireError} `truncated` */
  u128(field: string): bigint {
    const at = this.#need(16, field);
    return this.#view.getBigUint64(at, true) | (this.#view.getBigUint64(at + 8, true) << 64n);
  }

  /**
   * The next `n` bytes, without copying.
   * @throws {WireError} `truncated`
   */
  take(n: number, field: string): Uint8Array {
    const at = this.#need(n, field);
    return this.bytes.subarray(at, at + n);
  }
}

/** A little-endian writer into a buffer of a size known up front; checks every value's range. */
export class WireWriter {
  readonly bytes: Uint8Array<ArrayBuffer>;
  readonly #view: DataView;
  #at = 0;

  /** @param size the exact number of bytes that will be written */
  constructor(size: number) {
    this.bytes = new Uint8Array(size);
    this.#view = viewOf(this.bytes);
  }

  /** @throws {WireError} `out_of_range` */
  u8(value: number, field: string): this {
    this.bytes[this.#at] = checkUint(value, 0xff, field);
    this.#at += 1;
    return this;
  }

  /** @throws {WireError} `out_of_range` */
  u32(value: number, field: string): this {
    this.#view.setUint32(this.#at, checkUint(value, 0xffff_ffff, field), true);
    this.#at += 4;
    return this;
  }

  /** @throws {WireError} `out_of_range` */
  u64(value: bigint, field: string): this {
    this.#view.setBigUint64(this.#at, checkBig(value, U64_MAX, field), true);
    this.#at += 8;
    return this;
  }

  /** @throws {WireError} `out_of_range` */
  u128(value: bigint, field: string): this {
    checkBig(value, U128_MAX, field);
    this.#view.setBigUint64(this.#at, value & U64_MAX, true);
    this.#view.setBigUint64(this.#at + 8, value >> 64n, true);
    this.#at += 16;
    return this;
  }

  /** Copies `bytes` in. */
  put(bytes: Uint8Array): this {
    this.bytes.set(bytes, this.#at);
    this.#at += bytes.length;
    return this;
  }

  /** Leaves `n` zero bytes. */
  skip(n: number): this {
    this.#at += n;
    return this;
  }

  /** The buffer, once exactly its size has been written. */
  finish(): Uint8Array<ArrayBuffer> {
    if (this.#at !== this.bytes.length) {
      throw new RangeError(`wrote ${this.#at} of ${this.bytes.length} bytes`);
    }
    return this.bytes;
  }
}

function checkUint(value: number, max: number, field: string): number {
  if (!Number.isInteger(value) || value < 0 || value > max) {
    throw new WireError("out_of_range", `${field} ${value} is not an integer in 0..${max}`);
  }
  return value;
}

function checkBig(value: bigint, max: bigint, field: string): bigint {
  if (value < 0n || value > max) {
    throw new WireError("out_of_range", `${field} ${value} is not in 0..${max}`);
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// Command codes and error codes

/**
 * Command codes (core/binary_protocol/src/codes.rs, the same numbers at 0.8 and 0.9). Codes
 * marked 0.9 do not exist at 0.8. At 0.9 a client sends LOGIN_REGISTER / _WITH_PAT; the
 * 0.8 logins (38, 44) are answered with an eviction (core/server/src/dispatch.rs:1054-1067).
 */
export const COMMAND = {
  PING: 1,
  GET_CLUSTER_METADATA: 12,
  GET_ME: 20,
  CREATE_USER: 33,
  DELETE_USER: 34,
  UPDATE_USER: 35,
  UPDATE_PERMISSIONS: 36,
  CHANGE_PASSWORD: 37,
  LOGIN_USER: 38,
  LOGOUT_USER: 39,
  /** 0.9 only. */
  LOGIN_REGISTER: 40,
  CREATE_PERSONAL_ACCESS_TOKEN: 42,
  DELETE_PERSONAL_ACCESS_TOKEN: 43,
  LOGIN_WITH_PERSONAL_ACCESS_TOKEN: 44,
  /** 0.9 only. */
  LOGIN_REGISTER_WITH_PAT: 45,
  POLL_MESSAGES: 100,
  SEND_MESSAGES: 101,
  GET_CONSUMER_OFFSET: 120,
  STORE_CONSUMER_OFFSET: 121,
  DELETE_CONSUMER_OFFSET: 122,
  GET_STREAM: 200,
  GET_STREAMS: 201,
  CREATE_STREAM: 202,
  DELETE_STREAM: 203,
  UPDATE_STREAM: 204,
  PURGE_STREAM: 205,
  GET_TOPIC: 300,
  GET_TOPICS: 301,
  CREATE_TOPIC: 302,
  DELETE_TOPIC: 303,
  UPDATE_TOPIC: 304,
  PURGE_TOPIC: 305,
  CREATE_PARTITIONS: 402,
  DELETE_PARTITIONS: 403,
  DELETE_SEGMENTS: 503,
  GET_CONSUMER_GROUP: 600,
  GET_CONSUMER_GROUPS: 601,
  CREATE_CONSUMER_GROUP: 602,
  DELETE_CONSUMER_GROUP: 603,
  JOIN_CONSUMER_GROUP: 604,
  LEAVE_CONSUMER_GROUP: 605,
  /** 0.9 only. */
  SYNC_CONSUMER_GROUP: 606,
} as const;

/**
 * Error codes the proxy recognises or sends (`IggyError`, core/common/src/error/iggy_error.rs;
 * the same numbers at 0.8 and 0.9 unless marked). A 0.8 broker answers an error as a response
 * frame with this status and an empty payload (core/common/src/sender/mod.rs:200-208); a 0.9
 * broker as a Reply whose header `status` is this code, with an empty body
 * (core/server/src/responses.rs:1450-1467).
 *
 * Retries: both SDKs' TCP clients, on DISCONNECTED, EMPTY_RESPONSE, UNAUTHENTICATED,
 * STALE_CLIENT, NOT_CONNECTED, CANNOT_ESTABLISH_CONNECTION or TCP_ERROR, reconnect (logging in
 * again) and resend the request once (core/sdk/src/tcp/tcp_client.rs:105-140 at 0.8, :134-193
 * at 0.9); FEATURE_UNAVAILABLE is not retried. 0.9 adds TRANSIENT_NOT_COMMITTED and
 * TRANSIENT_NOT_ACCEPTED, which its SDK replays on the same connection every 50 ms until its
 * 30 s request deadline (core/sdk/src/tcp/tcp_client.rs:54-69, 809-834): the status for
 * "try again shortly" at 0.9. 0.8 has no such code; DISCONNECTED is its nearest (one
 * reconnect and resend).
 */
export const IGGY_ERROR = {
  ERROR: 1,
  INVALID_COMMAND: 3,
  INVALID_FORMAT: 4,
  FEATURE_UNAVAILABLE: 5,
  INVALID_IDENTIFIER: 6,
  DISCONNECTED: 8,
  CANNOT_ESTABLISH_CONNECTION: 9,
  STALE_CLIENT: 30,
  TCP_ERROR: 31,
  UNAUTHENTICATED: 40,
  UNAUTHORIZED: 41,
  /** 0.9 only. */
  TRANSIENT_NOT_COMMITTED: 57,
  /** 0.9 only. */
  TRANSIENT_NOT_ACCEPTED: 58,
  NOT_CONNECTED: 61,
  CLIENT_NOT_FOUND: 100,
  EMPTY_RESPONSE: 304,
  STREAM_ID_NOT_FOUND: 1009,
  STREAM_NAME_NOT_FOUND: 1010,
  TOPIC_ID_NOT_FOUND: 2010,
  TOPIC_NAME_NOT_FOUND: 2011,
  PARTITION_NOT_FOUND: 3007,
  CONSUMER_GROUP_ID_NOT_FOUND: 5000,
  CONSUMER_GROUP_NAME_NOT_FOUND: 5003,
  CONSUMER_GROUP_MEMBER_NOT_FOUND: 5006,
  /** 0.9 only. */
  CONSUMER_GROUP_PARTITION_NOT_OWNED: 5009,
} as const;

// ---------------------------------------------------------------------------------------------
// 0.8 framing

/** Size of a 0.8 request or response frame header. */
export const HEADER_SIZE_08 = 8;

/**
 * A 0.8 request frame: `[length u32 LE][code u32 LE][payload]`, length = 4 + payload length.
 * @throws {WireError} `out_of_range` for a code or payload too large for the u32 fields
 */
export function encodeRequest08(code: number, payload: Uint8Array): Uint8Array<ArrayBuffer> {
  return new WireWriter(HEADER_SIZE_08 + payload.length)
    .u32(4 + payload.length, "frame length").u32(code, "command code").put(payload).finish();
}

/**
 * A 0.8 response frame: `[status u32 LE][length u32 LE][payload]`. Status 0 is success; an
 * error is its code with an empty payload, as the broker sends it.
 * @throws {WireError} `out_of_range`
 */
export function encodeResponse08(
  status: number,
  payload: Uint8Array = new Uint8Array(0),
): Uint8Array<ArrayBuffer> {
  return new WireWriter(HEADER_SIZE_08 + payload.length)
    .u32(status, "status").u32(payload.length, "payload length").put(payload).finish();
}

// ---------------------------------------------------------------------------------------------
// 0.9 framing: the VSR headers a client and the broker exchange

/** Size of every 0.9 VSR header. */
export const VSR_HEADER_SIZE = 256;
/** Where a VSR header keeps the whole frame's size (header.rs:63). */
export const VSR_SIZE_OFFSET = 48;
/** Where a VSR header keeps its command byte. */
export const VSR_COMMAND_OFFSET = 60;

/** The VSR commands a client connection carries (consensus/command.rs). */
export const VSR_COMMAND = { REQUEST: 5, REPLY: 8, EVICTION: 13 } as const;

/** VSR operations (consensus/operation.rs) that a client request names. */
export const VSR_OPERATION = {
  REGISTER: 1,
  /** A read or other unreplicated command; its code rides in the header's `reserved`. */
  NON_REPLICATED: 2,
  LOGOUT: 3,
} as const;

/**
 * The replicated commands' operations at 0.9 (core/binary_protocol/src/dispatch.rs COMMAND_TABLE,
 * operation.rs); every other command but the logins and LOGOUT_USER is NON_REPLICATED.
 */
export const REPLICATED_OPERATION_09: ReadonlyMap<number, number> = new Map([
  [COMMAND.CREATE_USER, 141],
  [COMMAND.DELETE_USER, 143],
  [COMMAND.UPDATE_USER, 142],
  [COMMAND.UPDATE_PERMISSIONS, 145],
  [COMMAND.CHANGE_PASSWORD, 144],
  [COMMAND.CREATE_PERSONAL_ACCESS_TOKEN, 146],
  [COMMAND.DELETE_PERSONAL_ACCESS_TOKEN, 147],
  [COMMAND.SEND_MESSAGES, 160],
  [COMMAND.STORE_CONSUMER_OFFSET, 161],
  [COMMAND.DELETE_CONSUMER_OFFSET, 162],
  [COMMAND.CREATE_STREAM, 128],
  [COMMAND.UPDATE_STREAM, 129],
  [COMMAND.DELETE_STREAM, 130],
  [COMMAND.PURGE_STREAM, 131],
  [COMMAND.CREATE_TOPIC, 132],
  [COMMAND.UPDATE_TOPIC, 133],
  [COMMAND.DELETE_TOPIC, 134],
  [COMMAND.PURGE_TOPIC, 135],
  [COMMAND.CREATE_PARTITIONS, 136],
  [COMMAND.DELETE_PARTITIONS, 137],
  [COMMAND.DELETE_SEGMENTS, 138],
  [COMMAND.CREATE_CONSUMER_GROUP, 139],
  [COMMAND.DELETE_CONSUMER_GROUP, 140],
  [COMMAND.JOIN_CONSUMER_GROUP, 148],
  [COMMAND.LEAVE_CONSUMER_GROUP, 149],
]);

const COMMAND_OF_OPERATION = new Map([...REPLICATED_OPERATION_09].map(([c, o]) => [o, c]));

/** The fields of the 256-byte header every VSR frame starts with. */
interface VsrFrameFields {
  /** The whole frame's size, header included. */
  size: number;
  cluster: bigint;
  view: number;
  release: number;
  command: number;
  replica: number;
}

/**
 * A client's request header (`RequestHeader`, header.rs:259): checksum u128 @0, checksum_body
 * u128 @16, cluster u128 @32, size u32 @48, view u32 @52, release u32 @56, command u8 @60,
 * replica u8 @61, client u128 @128, request_checksum u128 @144, timestamp u64 @160, request u64
 * @168, operation u8 @176, session u64 @184, user_id u32 @192, reserved[60] @196 whose first
 * four bytes hold the command code of a NON_REPLICATED request (core/sdk/src/vsr.rs:127-130).
 */
export interface VsrRequestHeader extends VsrFrameFields {
  client: bigint;
  requestChecksum: bigint;
  timestamp: bigint;
  request: bigint;
  operation: number;
  session: bigint;
  userId: number;
  /** The command this request carries; undefined for REGISTER (either login) and unknowns. */
  code: number | undefined;
}

/**
 * The broker's reply header (`ReplyHeader`, header.rs:550): the frame fields as in a request,
 * then request_checksum u128 @128, context u128 @144, client u128 @160, op u64 @176, commit u64
 * @184, timestamp u64 @192, request u64 @200, operation u8 @208, status u32 @216.
 */
export interface VsrReplyHeader extends VsrFrameFields {
  requestChecksum: bigint;
  context: bigint;
  client: bigint;
  /** The session the reply answers (the broker stores the session here). */
  op: bigint;
  commit: bigint;
  timestamp: bigint;
  request: bigint;
  operation: number;
  /** 0 for success, else the error code (`IGGY_ERROR`); a failed reply has no body. */
  status: number;
}

function vsrFrameFields(c: WireCursor): VsrFrameFields {
  c.at = 32;
  const cluster = c.u128("cluster");
  const size = c.u32("size");
  const view = c.u32("view");
  const release = c.u32("release");
  const command = c.u8("command");
  const replica = c.u8("replica");
  return { size, cluster, view, release, command, replica };
}

function vsrHeaderCursor(header: Uint8Array, command: number, what: string): WireCursor {
  if (header.length < VSR_HEADER_SIZE) {
    throw new WireError(
      "truncated",
      `a VSR header is ${VSR_HEADER_SIZE} bytes, got ${header.length}`,
      0,
    );
  }
  if (header[VSR_COMMAND_OFFSET] !== command) {
    throw new WireError(
      "bad_value",
      `${what} has command ${header[VSR_COMMAND_OFFSET]}, expected ${command}`,
      VSR_COMMAND_OFFSET,
    );
  }
  return new WireCursor(header);
}

/**
 * Reads a 0.9 request header.
 * @throws {WireError} `truncated` for fewer than 256 bytes, `bad_value` for a command other
 *   than REQUEST
 */
export function decodeVsrRequestHeader(header: Uint8Array): VsrRequestHeader {
  const c = vsrHeaderCursor(header, VSR_COMMAND.REQUEST, "a request header");
  const frame = vsrFrameFields(c);
  c.at = 128;
  const client = c.u128("client");
  const requestChecksum = c.u128("request_checksum");
  const timestamp = c.u64("timestamp");
  const request = c.u64("request");
  const operation = c.u8("operation");
  c.at = 184;
  const session = c.u64("session");
  const userId = c.u32("user_id");
  const legacy = c.u32("reserved code");
  const code = operation === VSR_OPERATION.NON_REPLICATED
    ? legacy
    : operation === VSR_OPERATION.LOGOUT
    ? COMMAND.LOGOUT_USER
    : COMMAND_OF_OPERATION.get(operation);
  return {
    ...frame,
    client,
    requestChecksum,
    timestamp,
    request,
    operation,
    session,
    userId,
    code,
  };
}

/** What a client puts in a request header (core/sdk/src/vsr.rs:62-140). */
export interface VsrRequestFields {
  /** The command; its operation follows from it ({@link operationOf}). */
  code: number;
  /** The client id the session was registered with. */
  client: bigint;
  /** The session from the login's reply; 0 before login. */
  session: bigint;
  /** The request number (0 for a login). */
  request: bigint;
  /** XXH3-64 of the payload for a replicated metadata command, else 0 (unstamped). @default 0n */
  requestChecksum?: bigint;
}

/** The operation a 0.9 client sends `code` under (core/sdk/src/vsr.rs:62-140, 142-148). */
export function operationOf(code: number): number {
  if (code === COMMAND.LOGIN_REGISTER || code === COMMAND.LOGIN_REGISTER_WITH_PAT) {
    return VSR_OPERATION.REGISTER;
  }
  if (code === COMMAND.LOGOUT_USER) return VSR_OPERATION.LOGOUT;
  return REPLICATED_OPERATION_09.get(code) ?? VSR_OPERATION.NON_REPLICATED;
}

/**
 * A whole 0.9 request frame, as the SDK encodes one: the operation from the code, the code in
 * `reserved` for a NON_REPLICATED one, everything else zero.
 * @throws {WireError} `out_of_range`
 */
export function encodeVsrRequest(
  fields: VsrRequestFields,
  payload: Uint8Array,
): Uint8Array<ArrayBuffer> {
  const code = fields.code;
  const operation = operationOf(code);
  const w = new WireWriter(VSR_HEADER_SIZE + payload.length)
    .skip(48)
    .u32(VSR_HEADER_SIZE + payload.length, "frame size")
    .skip(8)
    .u8(VSR_COMMAND.REQUEST, "command")
    .skip(67)
    .u128(fields.client, "client")
    .u128(fields.requestChecksum ?? 0n, "request checksum")
    .u64(0n, "timestamp")
    .u64(fields.request, "request")
    .u8(operation, "operation")
    .skip(7)
    .u64(fields.session, "session")
    .u32(0, "user id")
    .u32(operation === VSR_OPERATION.NON_REPLICATED ? code : 0, "command code")
    .skip(56);
  return w.put(payload).finish();
}

/**
 * Reads a 0.9 reply header.
 * @throws {WireError} `truncated`, or `bad_value` for a command other than REPLY
 */
export function decodeVsrReplyHeader(header: Uint8Array): VsrReplyHeader {
  const c = vsrHeaderCursor(header, VSR_COMMAND.REPLY, "a reply header");
  const frame = vsrFrameFields(c);
  c.at = 128;
  return {
    ...frame,
    requestChecksum: c.u128("request_checksum"),
    context: c.u128("context"),
    client: c.u128("client"),
    op: c.u64("op"),
    commit: c.u64("commit"),
    timestamp: c.u64("timestamp"),
    request: c.u64("request"),
    operation: c.u8("operation"),
    status: viewOf(header).getUint32(216, true),
  };
}

/** What a reply carries besides the echo of its request. */
export interface VsrReplyOptions {
  /** The body; empty for a failure. @default empty */
  body?: Uint8Array;
  /** 0 for success, else an `IGGY_ERROR` code. @default 0 */
  status?: number;
  /**
   * The metadata commit number the broker stamps (0 is what it sends an unbound client).
   * @default 0n
   */
  commit?: bigint;
  /** The session stamped in `op`. @default the request's session */
  session?: bigint;
}

/**
 * A whole 0.9 reply frame answering `request`, built as the broker builds one
 * (`build_reply_with_body` / `build_deny_reply`, core/server/src/responses.rs:1450-1467,
 * 1603-1637): cluster, view, release, replica, request checksum, client, timestamp, request and
 * operation echoed; checksums zero.
 * @throws {WireError} `out_of_range`
 */
export function encodeVsrReply(
  request: VsrRequestHeader,
  options: VsrReplyOptions = {},
): Uint8Array<ArrayBuffer> {
  const body = options.body ?? new Uint8Array(0);
  return new WireWriter(VSR_HEADER_SIZE + body.length)
    .skip(32)
    .u128(request.cluster, "cluster")
    .u32(VSR_HEADER_SIZE + body.length, "frame size")
    .u32(request.view, "view")
    .u32(request.release, "release")
    .u8(VSR_COMMAND.REPLY, "command")
    .u8(request.replica, "replica")
    .skip(66)
    .u128(request.requestChecksum, "request checksum")
    .u128(0n, "context")
    .u128(request.client, "client")
    .u64(options.session ?? request.session, "op")
    .u64(options.commit ?? 0n, "commit")
    .u64(request.timestamp, "timestamp")
    .u64(request.request, "request")
    .u8(request.operation, "operation")
    .skip(7)
    .u32(options.status ?? 0, "status")
    .skip(36)
    .put(body)
    .finish();
}

/**
 * The reason byte of a 0.9 eviction frame (`EvictionHeader`, header.rs:709-726; reason u8 @255):
 * 1 no session, 9 invalid credentials, 10 invalid token, 13 stale client, 14 incompatible
 * protocol, 15 malformed (legacy) login — the SDK maps them to errors in
 * core/common/src/error/eviction.rs.
 * @throws {WireError} `truncated`, `bad_value` for a command other than EVICTION
 */
export function evictionReason(header: Uint8Array): number {
  vsrHeaderCursor(header, VSR_COMMAND.EVICTION, "an eviction header");
  return header[VSR_HEADER_SIZE - 1];
}

/**
 * Splits the result section off a 0.9 reply body of a result-framed operation (every metadata
 * operation, STORE_ and DELETE_CONSUMER_OFFSET): `[count u32]` then `count` × `[index u32][result
 * u32]`; the first result is the outcome (consensus/reply_result.rs:35-80).
 * @returns the outcome (0 = success) and where the payload starts
 * @throws {WireError} `truncated`
 */
export function resultSection(body: Uint8Array): { code: number; payloadStart: number } {
  const c = new WireCursor(body);
  const count = c.u32("result count");
  if (count === 0) return { code: 0, payloadStart: 4 };
  c.u32("result index");
  const code = c.u32("result code");
  const payloadStart = 4 + count * 8;
  if (payloadStart > body.length) {
    throw new WireError(
      "truncated",
      `${count} results need ${payloadStart} bytes, the body has ${body.length}`,
      0,
    );
  }
  return { code, payloadStart };
}

// ---------------------------------------------------------------------------------------------
// The frame reader

/** Which frames a {@link FrameReader} cuts. */
export type Framing = "request-0.8" | "response-0.8" | "vsr-0.9";

interface FrameBase {
  /** The whole frame as it came, header included: what a proxy forwards unchanged. */
  bytes: Uint8Array;
  /** The bytes after the header. */
  payload: Uint8Array;
}

/** A 0.8 request frame. */
export interface RequestFrame08 extends FrameBase {
  code: number;
}

/** A 0.8 response frame. */
export interface ResponseFrame08 extends FrameBase {
  status: number;
}

/** A 0.9 frame, either direction; read its header with the `decodeVsr…` functions. */
export interface VsrFrame extends FrameBase {
  /** The VSR command (`VSR_COMMAND`). */
  command: number;
  /** The 256-byte header. */
  header: Uint8Array;
}

/** The frame type a framing yields. */
export type FrameOf<F extends Framing> = F extends "request-0.8" ? RequestFrame08
  : F extends "response-0.8" ? ResponseFrame08
  : VsrFrame;

/** Options of a {@link FrameReader}. */
export interface FrameReaderOptions {
  /**
   * The largest whole frame accepted, header included. The 0.9 broker's own limit is 64 MiB
   * (core/message_bus/src/framing.rs:40); 0.8 caps control payloads at 10 MB and sends of
   * messages separately (core/server/src/binary/dispatch.rs:122).
   * @default 64 MiB
   */
  maxFrameSize?: number;
}

/** How much of a frame must be buffered to know its size. */
const SIZE_PREFIX: Record<Framing, number> = {
  "request-0.8": 8,
  "response-0.8": 8,
  "vsr-0.9": VSR_SIZE_OFFSET + 4,
};

/**
 * Cuts a byte stream (socket reads) into whole frames. A frame inside one chunk is a view of
 * that chunk; only a frame spanning chunks is copied, once, into a buffer of its size. Chunks
 * are kept by reference until their frames are cut, so a caller must not reuse a chunk's
 * memory after pushing it. After a {@link WireError} the stream is out of step: close it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const reader = new FrameReader("request-0.8", { maxFrameSize: 16 << 20 });
 * // [length 4][code 1], no payload, arriving in two socket reads
 * const frame = new Uint8Array([4, 0, 0, 0, 1, 0, 0, 0]);
 * assert.deepEqual([...reader.frames(frame.subarray(0, 3))], []);
 * const [whole] = [...reader.frames(frame.subarray(3))];
 * assert.equal(whole.code, 1);
 * assert.equal(whole.bytes.length, 8);
 * ```
 */
export class FrameReader<F extends Framing> {
  readonly #max: number;
  readonly #chunks: Uint8Array[] = [];
  /** Bytes of `#chunks[0]` already consumed. */
  #head = 0;
  #buffered = 0;
  /** Stream position of the next unconsumed byte (for error context). */
  #position = 0;

  /**
   * @param framing which frames to cut
   * @param options limits
   */
  constructor(readonly framing: F, options: FrameReaderOptions = {}) {
    this.#max = options.maxFrameSize ?? 64 * 1024 * 1024;
  }

  /** Bytes received and not yet cut into a frame. */
  get buffered(): number {
    return this.#buffered;
  }

  /** Adds bytes read from the socket. */
  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
  }

  /**
   * The next whole frame, or undefined until more bytes arrive.
   * @throws {WireError} `frame_too_large` when a frame announces more than `maxFrameSize`
   *   (known from its first 8 bytes, or 52 at 0.9, before the rest is buffered); `bad_frame`
   *   when its length is smaller than its own header
   */
  next(): FrameOf<F> | undefined {
    const size = this.head(0)?.size;
    if (size === undefined || this.#buffered < size) return undefined;
    return this.#frame(this.#take(size));
  }

  /**
   * The size of the next frame and its first `n` bytes (all of it when it is shorter), without
   * consuming them; undefined until that much has come.
   * @throws {WireError} as {@link next} does
   */
  head(n: number): { size: number; bytes: Uint8Array } | undefined {
    const prefix = SIZE_PREFIX[this.framing];
    if (this.#buffered < prefix) return undefined;
    const size = this.#frameSize(this.#peek(prefix));
    if (size > this.#max) {
      throw new WireError(
        "frame_too_large",
        `the frame at stream byte ${this.#position} announces ${size} bytes, more than the ` +
          `maximum of ${this.#max}`,
      );
    }
    const want = Math.min(n, size);
    if (this.#buffered < want) return undefined;
    return { size, bytes: this.#peek(want) };
  }

  /**
   * Consumes up to `n` buffered bytes as they came (views of the pushed chunks, no copy): the
   * start of a frame passed on as it arrives, its rest following in later chunks.
   */
  drain(n: number): Uint8Array[] {
    const out: Uint8Array[] = [];
    let left = Math.min(n, this.#buffered);
    this.#buffered -= left;
    this.#position += left;
    while (left > 0) {
      const first = this.#chunks[0];
      const part = Math.min(first.length - this.#head, left);
      out.push(first.subarray(this.#head, this.#head + part));
      left -= part;
      this.#head += part;
      if (this.#head === first.length) {
        this.#chunks.shift();
        this.#head = 0;
      }
    }
    return out;
  }

  /** Pushes `chunk` and yields every frame now whole. */
  *frames(chunk: Uint8Array): Generator<FrameOf<F>> {
    this.push(chunk);
    for (let f = this.next(); f !== undefined; f = this.next()) yield f;
  }

  #frameSize(prefix: Uint8Array): number {
    const v = viewOf(prefix);
    switch (this.framing) {
      case "request-0.8": {
        const length = v.getUint32(0, true);
        if (length < 4) {
          throw new WireError(
            "bad_frame",
            `the request at stream byte ${this.#position} has length ${length}, less than ` +
              "the 4 bytes of its command code",
          );
        }
        return 4 + length;
      }
      case "response-0.8":
        return HEADER_SIZE_08 + v.getUint32(4, true);
      default: {
        const size = v.getUint32(VSR_SIZE_OFFSET, true);
        if (size < VSR_HEADER_SIZE) {
          throw new WireError(
            "bad_frame",
            `the frame at stream byte ${this.#position} has size ${size}, less than its ` +
              `${VSR_HEADER_SIZE}-byte header`,
          );
        }
        return size;
      }
    }
  }

  #frame(bytes: Uint8Array): FrameOf<F> {
    if (this.framing === "vsr-0.9") {
      const frame: VsrFrame = {
        bytes,
        command: bytes[VSR_COMMAND_OFFSET],
        header: bytes.subarray(0, VSR_HEADER_SIZE),
        payload: bytes.subarray(VSR_HEADER_SIZE),
      };
      return frame as FrameOf<F>;
    }
    const v = viewOf(bytes);
    const payload = bytes.subarray(HEADER_SIZE_08);
    const frame: RequestFrame08 | ResponseFrame08 = this.framing === "request-0.8"
      ? { bytes, code: v.getUint32(4, true), payload }
      : { bytes, status: v.getUint32(0, true), payload };
    return frame as FrameOf<F>;
  }

  /** The first `n` buffered bytes without consuming them (copied only across a chunk edge). */
  #peek(n: number): Uint8Array {
    const first = this.#chunks[0];
    if (first.length - this.#head >= n) return first.subarray(this.#head, this.#head + n);
    return this.#gather(n, false);
  }

  /** Consumes the first `n` buffered bytes. */
  #take(n: number): Uint8Array {
    const first = this.#chunks[0];
    let out: Uint8Array;
    if (first.length - this.#head >= n) {
      out = first.subarray(this.#head, this.#head + n);
      this.#head += n;
      if (this.#head === first.length) {
        this.#chunks.shift();
        this.#head = 0;
      }
    } else {
      out = this.#gather(n, true);
    }
    this.#buffered -= n;
    this.#position += n;
    return out;
  }

  /** Copies the first `n` bytes out of the chunks, dropping them when `consume`. */
  #gather(n: number, consume: boolean): Uint8Array {
    const out = new Uint8Array(n);
    let filled = 0;
    let i = 0;
    let head = this.#head;
    while (filled < n) {
      const chunk = this.#chunks[i];
      const part = Math.min(chunk.length - head, n - filled);
      out.set(chunk.subarray(head, head + part), filled);
      filled += part;
      head += part;
      if (head === chunk.length) {
        i++;
        head = 0;
      }
    }
    if (consume) {
      this.#chunks.splice(0, i);
      this.#head = head;
    }
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// Command payloads (core/binary_protocol/src/primitives/, requests/, responses/)

/** A stream, topic, consumer or group, by number or by name (primitives/identifier.rs). */
export type Identifier = { kind: "numeric"; id: number } | { kind: "name"; name: string };

/** A consumer or consumer group (primitives/consumer.rs: kind 1 / 2, then its identifier). */
export interface Consumer {
  kind: "consumer" | "consumer_group";
  id: Identifier;
}

/** How a poll picks its first message (primitives/polling_strategy.rs: kinds 1..5). */
export type PollingKind = "offset" | "timestamp" | "first" | "last" | "next";

/** A polling strategy: its kind and value (u64, ignored by first/last/next). */
export interface PollingStrategy {
  kind: PollingKind;
  value: bigint;
}

const POLLING_KINDS: readonly PollingKind[] = ["offset", "timestamp", "first", "last", "next"];
const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads an identifier: kind u8 (1 numeric, 2 name), length u8, then a u32 LE (length 4) or
 * 1..255 bytes of UTF-8 (identifier.rs WireIdentifier::decode).
 * @throws {WireError} `truncated`, `bad_value`
 */
export function decodeIdentifier(c: WireCursor, field: string): Identifier {
  const at = c.at;
  const kind = c.u8(`${field} kind`);
  const length = c.u8(`${field} length`);
  const value = c.take(length, `${field} value`);
  if (kind === 1) {
    if (length !== 4) {
      throw new WireError("bad_value", `numeric ${field} has length ${length}, not 4`, at);
    }
    return { kind: "numeric", id: viewOf(value).getUint32(0, true) };
  }
  if (kind === 2) {
    if (length === 0) throw new WireError("bad_value", `${field} name is empty`, at);
    try {
      return { kind: "name", name: strictUtf8.decode(value) };
    } catch {
      throw new WireError("bad_value", `${field} name is not UTF-8`, at + 2);
    }
  }
  throw new WireError("bad_value", `${field} has unknown kind ${kind}`, at);
}

function identifierBytes(id: Identifier, field: string): Uint8Array<ArrayBuffer> {
  if (id.kind === "numeric") {
    return new WireWriter(6).u8(1, "kind").u8(4, "length").u32(id.id, `${field} id`).finish();
  }
  const name = utf8.encode(id.name);
  if (name.length < 1 || name.length > 255) {
    throw new WireError(
      "out_of_range",
      `${field} name is ${name.length} bytes of UTF-8; it must be 1..255`,
    );
  }
  return new WireWriter(2 + name.length).u8(2, "kind").u8(name.length, "length").put(name)
    .finish();
}

/**
 * Reads a consumer: kind u8 (1 consumer, 2 consumer group), then its identifier.
 * @throws {WireError} `truncated`, `bad_value`
 */
export function decodeConsumer(c: WireCursor): Consumer {
  const at = c.at;
  const kind = c.u8("consumer kind");
  if (kind !== 1 && kind !== 2) {
    throw new WireError("bad_value", `consumer has unknown kind ${kind}`, at);
  }
  return {
    kind: kind === 1 ? "consumer" : "consumer_group",
    id: decodeIdentifier(c, "consumer id"),
  };
}

function consumerBytes(consumer: Consumer): Uint8Array<ArrayBuffer> {
  const id = identifierBytes(consumer.id, "consumer");
  return new WireWriter(1 + id.length).u8(consumer.kind === "consumer" ? 1 : 2, "consumer kind")
    .put(id).finish();
}

/** Reads the partition option: a flag u8 (1 = present) and a u32 that is read either way. */
function decodePartition(c: WireCursor): number | undefined {
  const flag = c.u8("partition flag");
  const id = c.u32("partition id");
  return flag === 1 ? id : undefined;
}

/** The bytes every offset and poll request starts with: consumer, stream, topic, partition. */
function targetBytes(t: OffsetTarget): Uint8Array<ArrayBuffer> {
  const parts = [
    consumerBytes(t.consumer),
    identifierBytes(t.streamId, "stream"),
    identifierBytes(t.topicId, "topic"),
  ];
  const size = parts.reduce((n, p) => n + p.length, 5);
  const w = new WireWriter(size);
  for (const p of parts) w.put(p);
  return w.u8(t.partitionId === undefined ? 0 : 1, "partition flag")
    .u32(t.partitionId ?? 0, "partition id").finish();
}

function decodeTarget(c: WireCursor): OffsetTarget {
  return {
    consumer: decodeConsumer(c),
    streamId: decodeIdentifier(c, "stream id"),
    topicId: decodeIdentifier(c, "topic id"),
    partitionId: decodePartition(c),
  };
}

/** Whose offset, in which partition: the start of offset and poll requests. */
export interface OffsetTarget {
  consumer: Consumer;
  streamId: Identifier;
  topicId: Identifier;
  /** Absent: the broker picks (partition 0 for a consumer, the member's for a group). */
  partitionId?: number;
}

/** POLL_MESSAGES (requests/messages/poll_messages.rs, unchanged at 0.9). */
export interface PollMessagesRequest extends OffsetTarget {
  strategy: PollingStrategy;
  count: number;
  autoCommit: boolean;
}

/**
 * Reads a POLL_MESSAGES payload: consumer, stream id, topic id, partition flag u8 + id u32,
 * strategy kind u8 + value u64, count u32, auto_commit u8. Trailing bytes are ignored, as the
 * broker ignores them (`decode_from`, core/binary_protocol/src/codec.rs:58).
 * @throws {WireError} `truncated`, `bad_value`
 */
export function decodePollMessagesRequest(payload: Uint8Array): PollMessagesRequest {
  const c = new WireCursor(payload);
  const target = decodeTarget(c);
  const at = c.at;
  const kind = c.u8("polling kind");
  if (kind < 1 || kind > 5) throw new WireError("bad_value", `unknown polling kind ${kind}`, at);
  const strategy = { kind: POLLING_KINDS[kind - 1], value: c.u64("polling value") };
  const count = c.u32("count");
  const autoCommit = c.u8("auto commit") !== 0;
  return { ...target, strategy, count, autoCommit };
}

/**
 * A POLL_MESSAGES payload.
 * @throws {WireError} `out_of_range`
 */
export function encodePollMessagesRequest(req: PollMessagesRequest): Uint8Array<ArrayBuffer> {
  const target = targetBytes(req);
  return new WireWriter(target.length + 14)
    .put(target)
    .u8(POLLING_KINDS.indexOf(req.strategy.kind) + 1, "polling kind")
    .u64(req.strategy.value, "polling value")
    .u32(req.count, "count")
    .u8(req.autoCommit ? 1 : 0, "auto commit")
    .finish();
}

/**
 * A GET_CONSUMER_OFFSET payload: consumer, stream, topic, partition flag u8 + id u32
 * (requests/consumer_offsets/get_consumer_offset.rs, unchanged at 0.9).
 * @throws {WireError} `out_of_range`
 */
export function encodeGetConsumerOffsetRequest(t: OffsetTarget): Uint8Array<ArrayBuffer> {
  return targetBytes(t);
}

/**
 * Reads a GET_CONSUMER_OFFSET payload.
 * @throws {WireError} `truncated`, `bad_value`
 */
export function decodeGetConsumerOffsetRequest(payload: Uint8Array): OffsetTarget {
  return decodeTarget(new WireCursor(payload));
}

/** STORE_CONSUMER_OFFSET. */
export interface StoreConsumerOffsetRequest extends OffsetTarget {
  offset: bigint;
  /** 0.9 only: 0 leader-local, 1 quorum (the SDK always sends 1). @default 1 */
  ack?: number;
}

/**
 * A STORE_CONSUMER_OFFSET payload: the target, then offset u64; 0.9 appends an `ack` u8
 * (requests/consumer_offsets/store_consumer_offset.rs:70 at 0.9; the SDK sends Quorum = 1,
 * core/common/src/traits/binary_impls/consumer_offsets.rs:55).
 * @throws {WireError} `out_of_range`
 */
export function encodeStoreConsumerOffsetRequest(
  version: "iggy-0.8" | "iggy-0.9",
  req: StoreConsumerOffsetRequest,
): Uint8Array<ArrayBuffer> {
  const target = targetBytes(req);
  const w = new WireWriter(target.length + 8 + (version === "iggy-0.9" ? 1 : 0))
    .put(target).u64(req.offset, "offset");
  if (version === "iggy-0.9") w.u8(req.ack ?? 1, "ack");
  return w.finish();
}

/**
 * Reads a STORE_CONSUMER_OFFSET payload.
 * @throws {WireError} `truncated`, `bad_value` (an ack other than 0 or 1 at 0.9)
 */
export function decodeStoreConsumerOffsetRequest(
  version: "iggy-0.8" | "iggy-0.9",
  payload: Uint8Array,
): StoreConsumerOffsetRequest {
  const c = new WireCursor(payload);
  const req: StoreConsumerOffsetRequest = { ...decodeTarget(c), offset: c.u64("offset") };
  if (version === "iggy-0.9") {
    const at = c.at;
    req.ack = c.u8("ack");
    if (req.ack > 1) throw new WireError("bad_value", `unknown ack level ${req.ack}`, at);
  }
  return req;
}

/** A consumer's offset as GET_CONSUMER_OFFSET answers it. */
export interface ConsumerOffset {
  partitionId: number;
  currentOffset: bigint;
  storedOffset: bigint;
}

/**
 * Reads a GET_CONSUMER_OFFSET answer: partition_id u32, current_offset u64, stored_offset u64
 * (responses/consumer_offsets/get_consumer_offset.rs; core/server/src/responses.rs:1718 at 0.9).
 * Both brokers answer an empty success when nothing is stored (0.8 also for an unknown
 * stream, topic or partition: get_consumer_offset_handler.rs:51-69; 0.9 for an unknown stream
 * or topic, and PARTITION_NOT_FOUND for an unknown partition: dispatch.rs:2246-2330).
 * @returns undefined for the empty answer
 * @throws {WireError} `truncated`
 */
export function decodeConsumerOffset(payload: Uint8Array): ConsumerOffset | undefined {
  if (payload.length === 0) return undefined;
  const c = new WireCursor(payload);
  return {
    partitionId: c.u32("partition id"),
    currentOffset: c.u64("current offset"),
    storedOffset: c.u64("stored offset"),
  };
}

/**
 * A GET_STREAM payload: the stream's identifier (requests/streams/get_stream.rs).
 * @throws {WireError} `out_of_range`
 */
export function encodeGetStreamRequest(streamId: Identifier): Uint8Array<ArrayBuffer> {
  return identifierBytes(streamId, "stream");
}

/**
 * A GET_TOPIC payload: stream then topic identifier (requests/topics/get_topic.rs).
 * @throws {WireError} `out_of_range`
 */
export function encodeGetTopicRequest(
  streamId: Identifier,
  topicId: Identifier,
): Uint8Array<ArrayBuffer> {
  const s = identifierBytes(streamId, "stream");
  const t = identifierBytes(topicId, "topic");
  return new WireWriter(s.length + t.length).put(s).put(t).finish();
}

/** A stream's or topic's numeric id and name. */
export interface NamedId {
  id: number;
  name: string;
}

function namedIdAt(payload: Uint8Array, nameAt: number, what: string): NamedId | undefined {
  if (payload.length === 0) return undefined;
  const c = new WireCursor(payload);
  const id = c.u32(`${what} id`);
  c.at = nameAt;
  const length = c.u8(`${what} name length`);
  if (length === 0) throw new WireError("bad_value", `${what} name is empty`, nameAt);
  const name = c.take(length, `${what} name`);
  try {
    return { id, name: strictUtf8.decode(name) };
  } catch {
    throw new WireError("bad_value", `${what} name is not UTF-8`, nameAt + 1);
  }
}

/**
 * The id and name from a GET_STREAM answer: id u32 @0, created_at, topics_count, size,
 * messages_count, then name length u8 @32 and the name, at both versions
 * (responses/streams/stream_response.rs:65 at 0.8, :74 at 0.9).
 * Both brokers answer an empty success for a stream that does not exist
 * (get_stream_handler.rs:51 at 0.8; responses.rs build_get_stream_response at 0.9).
 * @returns undefined for the empty answer
 * @throws {WireError} `truncated`, `bad_value`
 */
export function decodeStreamId(payload: Uint8Array): NamedId | undefined {
  return namedIdAt(payload, 32, "stream");
}

/**
 * The id and name from a GET_TOPIC answer: id u32 @0 and the name's length byte at @50 (0.8) or
 * @49 (0.9, which dropped `replication_factor`) (responses/streams/get_stream.rs:81 at 0.8, :93
 * at 0.9). Both answer an empty success for a topic that does not exist.
 * @returns undefined for the empty answer
 * @throws {WireError} `truncated`, `bad_value`
 */
export function decodeTopicId(
  version: "iggy-0.8" | "iggy-0.9",
  payload: Uint8Array,
): NamedId | undefined {
  return namedIdAt(payload, version === "iggy-0.8" ? 50 : 49, "topic");
}
