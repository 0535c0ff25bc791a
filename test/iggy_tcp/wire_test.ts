// Iggy's TCP framing and command payloads (src/iggy_tcp/wire.ts): golden bytes laid out by hand
// from the Rust sources they cite, round trips, the frame reader over any chunking, and hostile
// bytes that must end in a WireError, never a crash.
import { concatBytes } from "../../src/base/bytes.ts";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  COMMAND,
  type Consumer,
  decodeConsumerOffset,
  decodeGetConsumerOffsetRequest,
  decodePollMessagesRequest,
  decodeStoreConsumerOffsetRequest,
  decodeStreamId,
  decodeTopicId,
  decodeVsrReplyHeader,
  decodeVsrRequestHeader,
  encodeGetConsumerOffsetRequest,
  encodeGetStreamRequest,
  encodeGetTopicRequest,
  encodePollMessagesRequest,
  encodeRequest08,
  encodeResponse08,
  encodeStoreConsumerOffsetRequest,
  encodeVsrReply,
  encodeVsrRequest,
  evictionReason,
  FrameReader,
  type Framing,
  type Identifier,
  IGGY_ERROR,
  type PollMessagesRequest,
  resultSection,
  VSR_HEADER_SIZE,
  WireError,
  type WireErrorKind,
} from "../../src/iggy_tcp/wire.ts";

const RUNS = { numRuns: 200 };

const concat = (...parts: Uint8Array[]) => concatBytes(parts);

function le32(v: number): number[] {
  return [v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, v >>> 24];
}

function le64(v: bigint): number[] {
  return [...Array(8)].map((_, i) => Number((v >> BigInt(8 * i)) & 0xffn));
}

function u32At(b: Uint8Array, at: number): number {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getUint32(at, true);
}

function u64At(b: Uint8Array, at: number): bigint {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getBigUint64(at, true);
}

/** Asserts that `fn` throws a WireError of this kind. */
function assertWire(fn: () => unknown, kind: WireErrorKind): WireError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof WireError, `expected a WireError, got ${err}`);
    assert.equal(err.kind, kind, err.message);
    return err;
  }
  assert.fail(`expected a WireError ${kind}, nothing was thrown`);
}

/** Runs `fn`; anything it throws must be a WireError. */
function onlyWireErrors(fn: () => unknown): void {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof WireError)) throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// 0.8 framing

Deno.test("0.8 frames: request [length=4+n][code][payload], response [status][length][payload]", () => {
  // core/binary_protocol/src/framing.rs:97-111 (server-0.8.0): length counts the code.
  assert.deepEqual(
    [...encodeRequest08(COMMAND.POLL_MESSAGES, new Uint8Array([1, 2, 3]))],
    [7, 0, 0, 0, 100, 0, 0, 0, 1, 2, 3],
  );
  // framing.rs:152-163: status 0, then the payload length.
  assert.deepEqual([...encodeResponse08(0, new Uint8Array([9, 8]))], [
    0,
    0,
    0,
    0,
    2,
    0,
    0,
    0,
    9,
    8,
  ]);
  // framing.rs:165-170, core/common/src/sender/mod.rs:200-208: an error is its code, length 0.
  assert.deepEqual([...encodeResponse08(IGGY_ERROR.UNAUTHENTICATED)], [40, 0, 0, 0, 0, 0, 0, 0]);
});

/** Random whole frames of a framing, as bytes. */
function framesArb(framing: Framing): fc.Arbitrary<Uint8Array[]> {
  const payload = fc.uint8Array({ maxLength: 300 });
  const one = framing === "request-0.8"
    ? fc.tuple(fc.nat(1000), payload).map(([code, p]) => encodeRequest08(code, p))
    : framing === "response-0.8"
    ? fc.tuple(fc.nat(6000), payload).map(([status, p]) => encodeResponse08(status, p))
    : fc.tuple(fc.nat(700), fc.bigInt({ min: 1n, max: 1n << 100n }), payload).map((
      [code, client, p],
    ) => encodeVsrRequest({ code, client, session: 5n, request: 1n }, p));
  return fc.array(one, { minLength: 1, maxLength: 6 });
}

for (const framing of ["request-0.8", "response-0.8", "vsr-0.9"] as const) {
  Deno.test(`FrameReader ${framing}: any chunking yields the frames, copying only across chunks`, () => {
    fc.assert(
      fc.property(framesArb(framing), fc.array(fc.nat(), { maxLength: 12 }), (frames, cuts) => {
        const stream = concat(...frames);
        const points = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
        const edges = [0, ...points, stream.length];
        const chunks = edges.slice(1).map((end, i) => stream.slice(edges[i], end));
        const reader = new FrameReader(framing);
        const read = chunks.flatMap((c) => [...reader.frames(c)]);
        assert.equal(reader.buffered, 0);
        assert.deepEqual(read.map((f) => f.bytes), frames);
        let at = 0;
        read.forEach((f) => {
          const size = f.bytes.length;
          const inOne = edges.some((e, i) => e <= at && at + size <= edges[i + 1]);
          const chunk = chunks.find((c) => c.buffer === f.bytes.buffer);
          assert.equal(chunk !== undefined, inOne, `frame at ${at} copied iff it spans chunks`);
          if (!inOne) assert.equal(f.bytes.buffer.byteLength, size);
          assert.deepEqual(f.payload, f.bytes.subarray(framing === "vsr-0.9" ? 256 : 8));
          at += size;
        });
      }),
      RUNS,
    );
  });
}

Deno.test("FrameReader: the code, status and VSR command of each frame", () => {
  const req = new FrameReader("request-0.8");
  const [r] = req.frames(encodeRequest08(COMMAND.GET_STREAM, new Uint8Array([1, 4, 1, 0, 0, 0])));
  assert.equal(r.code, 200);
  assert.deepEqual([...r.payload], [1, 4, 1, 0, 0, 0]);
  const res = new FrameReader("response-0.8");
  const [s] = res.frames(encodeResponse08(IGGY_ERROR.PARTITION_NOT_FOUND));
  assert.equal(s.status, 3007);
  assert.equal(s.payload.length, 0);
  const vsr = new FrameReader("vsr-0.9");
  const [v] = vsr.frames(
    encodeVsrRequest({ code: 1, client: 1n, session: 0n, request: 0n }, new Uint8Array(0)),
  );
  assert.equal(v.command, 5);
  assert.equal(v.header.length, 256);
});

Deno.test("FrameReader: a frame announcing more than the maximum fails before its body arrives", () => {
  const r08 = new FrameReader("request-0.8", { maxFrameSize: 1024 });
  r08.push(new Uint8Array([0xfd, 3, 0, 0])); // length 1021 + 4 = 1025 bytes
  assert.equal(r08.next(), undefined); // the code is not there yet
  r08.push(new Uint8Array([100, 0, 0, 0]));
  assertWire(() => r08.next(), "frame_too_large");

  const ok = new FrameReader("request-0.8", { maxFrameSize: 1024 });
  ok.push(new Uint8Array([0xfc, 3, 0, 0, 100, 0, 0, 0])); // exactly 1024
  assert.equal(ok.next(), undefined);

  const res = new FrameReader("response-0.8", { maxFrameSize: 100 });
  res.push(new Uint8Array([0, 0, 0, 0, ...le32(0xffff_ffff)]));
  assertWire(() => res.next(), "frame_too_large");

  const vsr = new FrameReader("vsr-0.9", { maxFrameSize: 4096 });
  const header = new Uint8Array(52);
  header.set(le32(4097), 48); // core/message_bus/src/framing.rs:118-121: size at byte 48
  vsr.push(header);
  assertWire(() => vsr.next(), "frame_too_large");
});

Deno.test("FrameReader: a length smaller than its own header is a bad frame", () => {
  // core/binary_protocol/src/framing.rs:59-65: a request length must cover the 4-byte code.
  const r = new FrameReader("request-0.8");
  r.push(new Uint8Array([3, 0, 0, 0, 1, 0, 0, 0]));
  assertWire(() => r.next(), "bad_frame");
  // core/message_bus/src/framing.rs:120-121: a VSR size below the 256-byte header is refused.
  const v = new FrameReader("vsr-0.9");
  const header = new Uint8Array(256);
  header.set(le32(255), 48);
  v.push(header);
  assertWire(() => v.next(), "bad_frame");
});

Deno.test("FrameReader: random bytes end in frames or a WireError, never anything else", () => {
  fc.assert(
    fc.property(
      fc.constantFrom<Framing>("request-0.8", "response-0.8", "vsr-0.9"),
      fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 5 }),
      (framing, chunks) => {
        const reader = new FrameReader(framing, { maxFrameSize: 1 << 20 });
        onlyWireErrors(() => chunks.forEach((c) => [...reader.frames(c)]));
      },
    ),
    RUNS,
  );
});

// ---------------------------------------------------------------------------------------------
// 0.9 VSR headers

Deno.test("0.9 request header: the SDK's layout, the code in reserved for a non-replicated command", () => {
  const payload = new Uint8Array([1, 2, 3]);
  const frame = encodeVsrRequest(
    { code: COMMAND.POLL_MESSAGES, client: 0x0102n << 64n | 7n, session: 9n, request: 3n },
    payload,
  );
  // core/binary_protocol/src/consensus/header.rs:259-300 (RequestHeader, repr(C)) at cc269ef7;
  // core/sdk/src/vsr.rs:62-140 fills it.
  assert.equal(frame.length, 259);
  assert.equal(u32At(frame, 48), 259); // size, header included
  assert.equal(frame[60], 5); // Command::Request
  assert.equal(u64At(frame, 128), 7n); // client, low half
  assert.equal(u64At(frame, 136), 0x0102n); // client, high half
  assert.equal(u64At(frame, 144) | u64At(frame, 152), 0n); // request_checksum: unstamped
  assert.equal(u64At(frame, 168), 3n); // request
  assert.equal(frame[176], 2); // Operation::NonReplicated
  assert.equal(u64At(frame, 184), 9n); // session
  assert.equal(u32At(frame, 196), 100); // reserved[0..4] = the code (vsr.rs:127-130)
  assert.deepEqual([...frame.subarray(256)], [1, 2, 3]);
  const h = decodeVsrRequestHeader(frame);
  assert.deepEqual(
    { ...h },
    {
      size: 259,
      cluster: 0n,
      view: 0,
      release: 0,
      command: 5,
      replica: 0,
      client: 0x0102n << 64n | 7n,
      requestChecksum: 0n,
      timestamp: 0n,
      request: 3n,
      operation: 2,
      session: 9n,
      userId: 0,
      code: 100,
    },
  );
});

Deno.test("0.9 request header: replicated commands carry their operation, logins Register", () => {
  // core/binary_protocol/src/dispatch.rs COMMAND_TABLE and consensus/operation.rs at cc269ef7.
  const cases: [number, number, number | undefined][] = [
    [COMMAND.STORE_CONSUMER_OFFSET, 161, 121],
    [COMMAND.SEND_MESSAGES, 160, 101],
    [COMMAND.JOIN_CONSUMER_GROUP, 148, 604],
    [COMMAND.LEAVE_CONSUMER_GROUP, 149, 605],
    [COMMAND.CREATE_CONSUMER_GROUP, 139, 602],
    [COMMAND.GET_CONSUMER_GROUP, 2, 600],
    [COMMAND.GET_CONSUMER_OFFSET, 2, 120],
    [COMMAND.LOGOUT_USER, 3, 39],
    [COMMAND.LOGIN_REGISTER, 1, undefined],
    [COMMAND.LOGIN_REGISTER_WITH_PAT, 1, undefined],
  ];
  for (const [code, operation, decoded] of cases) {
    const frame = encodeVsrRequest(
      { code, client: 1n, session: 2n, request: 3n },
      new Uint8Array(),
    );
    assert.equal(frame[176], operation, `operation of ${code}`);
    assert.equal(u32At(frame, 196), operation === 2 ? code : 0);
    assert.equal(decodeVsrRequestHeader(frame).code, decoded);
  }
});

Deno.test("0.9 reply: the broker's echo of the request, status at byte 216, session in op", () => {
  const request = decodeVsrRequestHeader(
    encodeVsrRequest({ code: 100, client: 77n, session: 12n, request: 4n }, new Uint8Array(5)),
  );
  const body = new Uint8Array([5, 6, 7]);
  const reply = encodeVsrReply(request, { body, commit: 30n });
  // core/server/src/responses.rs:1603-1637 builds it; header.rs:550-593 lays it out.
  assert.equal(reply.length, 259);
  assert.equal(u32At(reply, 48), 259);
  assert.equal(reply[60], 8); // Command::Reply
  assert.equal(u64At(reply, 160), 77n); // client
  assert.equal(u64At(reply, 176), 12n); // op = the session
  assert.equal(u64At(reply, 184), 30n); // commit
  assert.equal(u64At(reply, 200), 4n); // request
  assert.equal(reply[208], 2); // operation echoed
  assert.equal(u32At(reply, 216), 0); // status
  assert.deepEqual([...reply.subarray(256)], [5, 6, 7]);
  assert.deepEqual(
    { ...decodeVsrReplyHeader(reply) },
    {
      size: 259,
      cluster: 0n,
      view: 0,
      release: 0,
      command: 8,
      replica: 0,
      requestChecksum: 0n,
      context: 0n,
      client: 77n,
      op: 12n,
      commit: 30n,
      timestamp: 0n,
      request: 4n,
      operation: 2,
      status: 0,
    },
  );
  // responses.rs:1450-1467: a denial is the same echo with the status and no body.
  const deny = encodeVsrReply(request, { status: IGGY_ERROR.TRANSIENT_NOT_ACCEPTED });
  assert.equal(deny.length, 256);
  assert.equal(decodeVsrReplyHeader(deny).status, 58);
  assertWire(() => decodeVsrRequestHeader(deny), "bad_value");
  assertWire(() => decodeVsrReplyHeader(deny.subarray(0, 255)), "truncated");
});

Deno.test("0.9 result section and eviction reason", () => {
  // consensus/reply_result.rs:55-80: [count][index, result]×count, then the payload.
  assert.deepEqual(resultSection(new Uint8Array([0, 0, 0, 0, 9])), { code: 0, payloadStart: 4 });
  assert.deepEqual(
    resultSection(new Uint8Array([...le32(1), ...le32(0), ...le32(57)])),
    { code: 57, payloadStart: 12 },
  );
  assertWire(
    () => resultSection(new Uint8Array([2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0])),
    "truncated",
  );
  assertWire(() => resultSection(new Uint8Array([1, 0])), "truncated");
  // header.rs:709-726: EvictionHeader's reason is its last byte.
  const eviction = new Uint8Array(256);
  eviction[60] = 13;
  eviction[255] = 15;
  assert.equal(evictionReason(eviction), 15);
  assertWire(() => evictionReason(new Uint8Array(256)), "bad_value");
});

// ---------------------------------------------------------------------------------------------
// Command payloads

const identifierArb: fc.Arbitrary<Identifier> = fc.oneof(
  fc.nat(0xffff_ffff).map((id) => ({ kind: "numeric" as const, id })),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 60 })
    .map((name) => ({ kind: "name" as const, name })),
);

const consumerArb: fc.Arbitrary<Consumer> = fc.record({
  kind: fc.constantFrom("consumer" as const, "consumer_group" as const),
  id: identifierArb,
});

const targetArb = fc.record({
  consumer: consumerArb,
  streamId: identifierArb,
  topicId: identifierArb,
  partitionId: fc.option(fc.nat(0xffff_ffff), { nil: undefined }),
});

const pollArb: fc.Arbitrary<PollMessagesRequest> = fc.tuple(
  targetArb,
  fc.record({
    strategy: fc.record({
      kind: fc.constantFrom("offset", "timestamp", "first", "last", "next"),
      value: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
    }),
    count: fc.nat(0xffff_ffff),
    autoCommit: fc.boolean(),
  }),
).map(([t, rest]) => ({ ...t, ...rest }));

/**
 * A plain copy of a request without the `partitionId: undefined` key a decode leaves out, to
 * compare with deepEqual (fast-check's records have no prototype).
 */
function tidy<T extends { partitionId?: number }>(value: T): T {
  const out = structuredClone(value);
  if (out.partitionId === undefined) delete out.partitionId;
  return out;
}

Deno.test("PollMessages request: golden bytes as poll_messages.rs lays them out", () => {
  const bytes = encodePollMessagesRequest({
    consumer: { kind: "consumer_group", id: { kind: "numeric", id: 7 } },
    streamId: { kind: "name", name: "s" },
    topicId: { kind: "numeric", id: 2 },
    partitionId: 3,
    strategy: { kind: "offset", value: 5n },
    count: 10,
    autoCommit: true,
  });
  // requests/messages/poll_messages.rs:64-78 (server-0.8.0, unchanged at cc269ef7): consumer
  // (kind, identifier: kind, length, value — primitives/consumer.rs, identifier.rs), stream,
  // topic, partition flag + u32, strategy kind + u64 (polling_strategy.rs), count, auto_commit.
  assert.deepEqual([...bytes], [
    2,
    1,
    4,
    7,
    0,
    0,
    0, // consumer group, numeric 7
    2,
    1,
    0x73, // stream "s"
    1,
    4,
    2,
    0,
    0,
    0, // topic 2
    1,
    3,
    0,
    0,
    0, // partition Some(3)
    1,
    ...le64(5n), // offset 5
    10,
    0,
    0,
    0, // count
    1, // auto commit
  ]);
  const none = encodePollMessagesRequest({
    consumer: { kind: "consumer", id: { kind: "numeric", id: 1 } },
    streamId: { kind: "numeric", id: 1 },
    topicId: { kind: "numeric", id: 1 },
    strategy: { kind: "next", value: 0n },
    count: 1,
    autoCommit: false,
  });
  assert.deepEqual([...none.subarray(19, 24)], [0, 0, 0, 0, 0]); // None: flag 0, then u32 0
});

Deno.test("PollMessages request: encode → decode round-trips; trailing bytes are ignored", () => {
  fc.assert(
    fc.property(pollArb, fc.uint8Array({ maxLength: 4 }), (req, tail) => {
      const bytes = encodePollMessagesRequest(req);
      assert.deepEqual(tidy(decodePollMessagesRequest(bytes)), tidy(req));
      assert.deepEqual(tidy(decodePollMessagesRequest(concat(bytes, tail))), tidy(req));
    }),
    RUNS,
  );
});

Deno.test("PollMessages request: every truncation and random bytes end in a WireError", () => {
  fc.assert(
    fc.property(pollArb, (req) => {
      const bytes = encodePollMessagesRequest(req);
      for (let n = 0; n < bytes.length; n++) {
        assertWire(() => decodePollMessagesRequest(bytes.subarray(0, n)), "truncated");
      }
    }),
    { numRuns: 50 },
  );
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 80 }), (bytes) => {
      onlyWireErrors(() => decodePollMessagesRequest(bytes));
    }),
    RUNS,
  );
});

Deno.test("identifiers and consumers: the broker's refusals", () => {
  const poll = (head: number[]) => () =>
    decodePollMessagesRequest(new Uint8Array([...head, ...new Array(40).fill(1)]));
  assertWire(poll([3, 1, 4, 1, 0, 0, 0]), "bad_value"); // consumer kind 3 (consumer.rs:67-74)
  assertWire(poll([1, 1, 3, 1, 0, 0]), "bad_value"); // numeric id of length 3 (identifier.rs)
  assertWire(poll([1, 2, 0]), "bad_value"); // empty name
  assertWire(poll([1, 2, 2, 0xff, 0xfe]), "bad_value"); // not UTF-8
  assertWire(poll([1, 9, 4, 1, 0, 0, 0]), "bad_value"); // identifier kind 9
  const strategy = encodePollMessagesRequest({
    consumer: { kind: "consumer", id: { kind: "numeric", id: 1 } },
    streamId: { kind: "numeric", id: 1 },
    topicId: { kind: "numeric", id: 1 },
    strategy: { kind: "first", value: 0n },
    count: 1,
    autoCommit: false,
  });
  strategy[24] = 6; // polling kind 6 (polling_strategy.rs:96-108)
  assertWire(() => decodePollMessagesRequest(strategy), "bad_value");
});

Deno.test("encoders refuse values their fields cannot hold", () => {
  const base = {
    consumer: { kind: "consumer" as const, id: { kind: "numeric" as const, id: 1 } },
    streamId: { kind: "numeric" as const, id: 1 },
    topicId: { kind: "numeric" as const, id: 1 },
    strategy: { kind: "offset" as const, value: 0n },
    count: 1,
    autoCommit: false,
  };
  assertWire(() => encodePollMessagesRequest({ ...base, count: 2 ** 32 }), "out_of_range");
  assertWire(() => encodePollMessagesRequest({ ...base, partitionId: -1 }), "out_of_range");
  assertWire(
    () => encodePollMessagesRequest({ ...base, strategy: { kind: "offset", value: 1n << 64n } }),
    "out_of_range",
  );
  assertWire(() => encodeGetStreamRequest({ kind: "name", name: "x".repeat(256) }), "out_of_range");
  assertWire(() => encodeGetStreamRequest({ kind: "name", name: "" }), "out_of_range");
  assertWire(() => encodeRequest08(-1, new Uint8Array()), "out_of_range");
});

Deno.test("consumer offsets: requests round-trip at both versions; 0.9 adds the ack byte", () => {
  fc.assert(
    fc.property(targetArb, fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), (t, offset) => {
      assert.deepEqual(
        tidy(decodeGetConsumerOffsetRequest(encodeGetConsumerOffsetRequest(t))),
        tidy(t),
      );
      const b08 = encodeStoreConsumerOffsetRequest("iggy-0.8", { ...t, offset });
      const b09 = encodeStoreConsumerOffsetRequest("iggy-0.9", { ...t, offset });
      assert.equal(b09.length, b08.length + 1);
      assert.deepEqual(b09.subarray(0, b08.length), b08);
      assert.equal(b09[b08.length], 1); // Quorum, as the 0.9 SDK sends it
      assert.deepEqual(
        tidy(decodeStoreConsumerOffsetRequest("iggy-0.8", b08)),
        tidy({ ...t, offset }),
      );
      assert.deepEqual(
        tidy(decodeStoreConsumerOffsetRequest("iggy-0.9", b09)),
        tidy({ ...t, offset, ack: 1 }),
      );
    }),
    RUNS,
  );
  // store_consumer_offset.rs:52-64 (0.8) / :58-71 (0.9): target, offset u64, then ack u8 at 0.9.
  const t = {
    consumer: { kind: "consumer" as const, id: { kind: "numeric" as const, id: 1 } },
    streamId: { kind: "numeric" as const, id: 2 },
    topicId: { kind: "numeric" as const, id: 3 },
    partitionId: 4,
  };
  assert.deepEqual([...encodeStoreConsumerOffsetRequest("iggy-0.9", { ...t, offset: 9n })], [
    1,
    1,
    4,
    1,
    0,
    0,
    0,
    1,
    4,
    2,
    0,
    0,
    0,
    1,
    4,
    3,
    0,
    0,
    0,
    1,
    4,
    0,
    0,
    0,
    ...le64(9n),
    1,
  ]);
  const bad = encodeStoreConsumerOffsetRequest("iggy-0.9", { ...t, offset: 9n, ack: 0 });
  bad[bad.length - 1] = 2;
  assertWire(() => decodeStoreConsumerOffsetRequest("iggy-0.9", bad), "bad_value");
  assertWire(() => decodeStoreConsumerOffsetRequest("iggy-0.9", bad.subarray(0, -1)), "truncated");
});

Deno.test("consumer offset answer: 20 bytes, or empty when nothing is stored", () => {
  // responses/consumer_offsets/get_consumer_offset.rs (0.8) and responses.rs:1718-1727 (0.9).
  const bytes = new Uint8Array([...le32(3), ...le64(100n), ...le64(42n)]);
  assert.deepEqual(decodeConsumerOffset(bytes), {
    partitionId: 3,
    currentOffset: 100n,
    storedOffset: 42n,
  });
  assert.equal(decodeConsumerOffset(new Uint8Array()), undefined);
  assertWire(() => decodeConsumerOffset(bytes.subarray(0, 19)), "truncated");
});

Deno.test("GET_STREAM and GET_TOPIC: requests, and the id and name in their answers", () => {
  assert.deepEqual([...encodeGetStreamRequest({ kind: "name", name: "ab" })], [2, 2, 0x61, 0x62]);
  assert.deepEqual(
    [...encodeGetTopicRequest({ kind: "numeric", id: 1 }, { kind: "name", name: "t" })],
    [1, 4, 1, 0, 0, 0, 2, 1, 0x74],
  );
  // responses/streams/stream_response.rs:48-55: id, created_at u64, topics_count u32,
  // size_bytes u64, messages_count u64, then the name at byte 32 (both versions; 0.9 appends
  // an options block).
  const stream = new Uint8Array([
    ...le32(5),
    ...le64(1n),
    ...le32(0),
    ...le64(0n),
    ...le64(0n),
    2,
    0x73,
    0x31,
    0,
    0,
    0,
    0,
  ]);
  assert.deepEqual(decodeStreamId(stream), { id: 5, name: "s1" });
  assert.equal(decodeStreamId(new Uint8Array()), undefined);
  assertWire(() => decodeStreamId(stream.subarray(0, 34)), "truncated");
  // responses/streams/get_stream.rs TopicHeader: id, created_at, partitions_count,
  // message_expiry u64, compression u8, max_topic_size u64, [replication_factor u8 at 0.8 only],
  // size_bytes, messages_count, then the name: byte 50 at 0.8 (:81), 49 at 0.9 (:93).
  const fixed09 = [
    ...le32(9),
    ...le64(1n),
    ...le32(1),
    ...le64(0n),
    1,
    ...le64(0n),
    ...le64(0n),
    ...le64(0n),
  ];
  assert.equal(fixed09.length, 49);
  const topic09 = new Uint8Array([...fixed09, 1, 0x74, ...le32(0), ...le32(0)]);
  const topic08 = new Uint8Array([...fixed09.slice(0, 33), 1, ...fixed09.slice(33), 1, 0x74]);
  assert.deepEqual(decodeTopicId("iggy-0.9", topic09), { id: 9, name: "t" });
  assert.deepEqual(decodeTopicId("iggy-0.8", topic08), { id: 9, name: "t" });
  assert.equal(decodeTopicId("iggy-0.8", new Uint8Array()), undefined);
  assertWire(() => decodeTopicId("iggy-0.8", topic08.subarray(0, 50)), "truncated");
  const noName = new Uint8Array(topic09);
  noName[49] = 0;
  assertWire(() => decodeTopicId("iggy-0.9", noName), "bad_value");
});

Deno.test("VSR headers: random bytes end in a WireError, never anything else", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), fc.constantFrom(5, 8, 13), (bytes, command) => {
      if (bytes.length > 60) bytes[60] = command;
      onlyWireErrors(() => decodeVsrRequestHeader(bytes));
      onlyWireErrors(() => decodeVsrReplyHeader(bytes));
      onlyWireErrors(() => evictionReason(bytes));
      onlyWireErrors(() => resultSection(bytes));
      onlyWireErrors(() => decodeStreamId(bytes));
      onlyWireErrors(() => decodeTopicId("iggy-0.9", bytes));
      onlyWireErrors(() => decodeConsumerOffset(bytes));
      onlyWireErrors(() => decodeStoreConsumerOffsetRequest("iggy-0.9", bytes));
    }),
    RUNS,
  );
  assert.equal(VSR_HEADER_SIZE, 256);
});
