// The binary front's poll over a scenario partition (a prefix evicted to a SimStore), at 0.8 and
// 0.9, with a stand-in broker session that holds the partition's offsets from its first local
// segment on and answers in its version's encoding from the stored records (0.9 batches sliced as
// the broker slices them): for any offset poll, tierd's answer — its part from the bucket spliced
// with the broker's — is byte for byte the answer a broker holding the whole partition would
// give; a store outage is a transient failure and nothing is forwarded in its place; a session the
// broker refuses reads nothing from the store; a group member the broker gives no partition gets
// the broker's own answer.
import assert from "node:assert/strict";
import fc from "fast-check";
import { codecFor } from "../../src/format/codecs.ts";
import type { FormatName } from "../../src/format/types.ts";
import { NameCache } from "../../src/iggy_front/names.ts";
import { ContinuityReaders } from "../../src/read/continuity.ts";
import { silentLogger } from "../../src/log.ts";
import { polledPayload08 } from "../../src/iggy_tcp/polled_08.ts";
import {
  type OutgoingBatch09,
  polledPayload09,
  sliceRecord09,
} from "../../src/iggy_tcp/polled_09.ts";
import {
  answerCheckBytes,
  BrokerStatus,
  servePoll,
  type TcpSession,
} from "../../src/iggy_tcp/poll.ts";
import { LocalHints } from "../../src/iggy_front/plan.ts";
import { isTransient, statusOf } from "../../src/iggy_tcp/status.ts";
import {
  COMMAND,
  decodeGetConsumerOffsetRequest,
  decodePollMessagesRequest,
  decodeStoreConsumerOffsetRequest,
  decodeVsrRequestHeader,
  encodeResponse08,
  encodeVsrReply,
  encodeVsrRequest,
  IGGY_ERROR,
  type PollMessagesRequest,
} from "../../src/iggy_tcp/wire.ts";
import { initHashes } from "../../src/hash.ts";
import { buildScenario, type OracleRecord, type Scenario } from "../read/_scenario.ts";

await initHashes();

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

/** What the stand-in broker did. */
interface Calls {
  codes: number[];
  forwarded: number;
  /** The broker's answers passed on to the client as they came. */
  sent: Uint8Array[];
  stored: bigint[];
}

/**
 * The poll answer a broker holding `records` gives from `from`, `count` messages at most: 0.8
 * messages as stored, 0.9 batches sliced by the codec the front uses (checked against the real
 * broker in test/e2e/iggy_tcp_clients_test.ts).
 */
function brokerAnswer(
  format: FormatName,
  records: OracleRecord[],
  current: bigint,
  from: bigint,
  count: number,
): Uint8Array {
  const head = { partitionId: 0, currentOffset: current };
  if (format === "iggy-0.8") {
    const codec = codecFor(format);
    const parts: Uint8Array[] = [];
    for (const r of records) {
      for (
        const info of codec.walk(r.bytes, { file: "x", startOffset: r.firstOffset, verify: false })
      ) {
        if (info.firstOffset >= from && parts.length < count) parts.push(r.bytes);
      }
    }
    return polledPayload08(head, parts);
  }
  const batches: OutgoingBatch09[] = [];
  let left = count;
  for (const r of records) {
    if (left === 0 || r.lastOffset < from) continue;
    const batch = sliceRecord09(r.bytes, { lookup: { offset: from }, count: left });
    if (batch) {
      batches.push(batch);
      left -= batch.count;
    }
  }
  return polledPayload09(head, batches);
}

/** A broker session holding the scenario's offsets from `first` on. */
function standIn(
  format: FormatName,
  s: Scenario,
  first: bigint,
  o: { refuse?: number; groupPartition?: number; forwarded?: PollMessagesRequest } = {},
): { session: TcpSession; calls: Calls } {
  const calls: Calls = { codes: [], forwarded: 0, sent: [], stored: [] };
  const local = s.records.filter((r) => r.firstOffset >= first);
  const current = s.records.at(-1)!.lastOffset;
  const session: TcpSession = {
    version: format,
    key: "test",
    probes: new Map(),
    call(code, payload, what) {
      calls.codes.push(code);
      if (o.refuse) {
        return Promise.reject(new BrokerStatus(o.refuse, new Uint8Array([1]), what));
      }
      if (code === COMMAND.POLL_MESSAGES) {
        const req = decodePollMessagesRequest(payload);
        if (req.consumer.kind === "consumer_group" && req.partitionId === undefined) {
          // The member's turn: a poll past any end answers the partition and no message.
          const partition = o.groupPartition ?? 0;
          return Promise.resolve(
            brokerAnswer(format, [], partition === 0 ? 0n : current, 0n, 0).map((b, i) =>
              i < 4 ? new Uint8Array(new Uint32Array([partition]).buffer)[i] : b
            ),
          );
        }
        const from = req.strategy.kind === "first"
          ? first
          : req.strategy.value < first
          ? first
          : req.strategy.value;
        return Promise.resolve(brokerAnswer(format, local, current, from, req.count));
      }
      if (code === COMMAND.GET_CONSUMER_OFFSET) {
        decodeGetConsumerOffsetRequest(payload);
        return Promise.resolve(new Uint8Array(0)); // no stored offset
      }
      if (code === COMMAND.STORE_CONSUMER_OFFSET) {
        calls.stored.push(decodeStoreConsumerOffsetRequest(format, payload).offset);
        return Promise.resolve(new Uint8Array(format === "iggy-0.9" ? 4 : 0));
      }
      return Promise.reject(new Error(`unexpected command ${code}`));
    },
    forward(check) {
      calls.forwarded++;
      const frame = brokerFrame();
      // Passed on when the check accepts the answer's head (as the link shows it), else whole.
      if (check && !check(frame.subarray(0, answerCheckBytes(format)))) {
        return Promise.resolve({ frame });
      }
      calls.sent.push(frame);
      return Promise.resolve({ sent: frame.length });
    },
    answer: (payload) => payload,
  };
  return { session, calls };

  /** The broker's own answer to the forwarded poll, in its version's frame. */
  function brokerFrame(): Uint8Array {
    const req = o.forwarded;
    if (!req || req.strategy.kind !== "offset") return new Uint8Array([0xf0]);
    const from = req.strategy.value < first ? first : req.strategy.value;
    const payload = brokerAnswer(format, local, current, from, req.count);
    if (format === "iggy-0.8") return encodeResponse08(0, payload);
    const asked = encodeVsrRequest({
      code: COMMAND.POLL_MESSAGES,
      client: 1n,
      session: 1n,
      request: 1n,
    }, new Uint8Array(0));
    return encodeVsrReply(decodeVsrRequestHeader(asked), { body: payload });
  }
}

async function withScenario(
  format: FormatName,
  fn: (s: Scenario, first: bigint) => Promise<void>,
): Promise<void> {
  const s = await buildScenario({
    format,
    before: 60,
    after: 30,
    segmentSize: 1500,
    payloadSize: 40,
    messagesPerBatch: 3,
    evict: 2,
  });
  try {
    await fn(s, s.records.find((r) => !r.evicted)!.firstOffset);
  } finally {
    await s.cleanup();
  }
}

function deps(s: Scenario) {
  return {
    read: s.context(),
    continuity: new ContinuityReaders(),
    logger: silentLogger,
    names: new NameCache(0),
    probeTtlMs: 0,
    monotonic: () => 0,
  };
}

function offsetPoll(value: bigint, count: number, autoCommit = false): PollMessagesRequest {
  return {
    consumer: { kind: "consumer", id: { kind: "numeric", id: 1 } },
    streamId: { kind: "numeric", id: 0 },
    topicId: { kind: "numeric", id: 0 },
    partitionId: 0,
    strategy: { kind: "offset", value },
    count,
    autoCommit,
  };
}

for (const format of ["iggy-0.8", "iggy-0.9"] as const) {
  Deno.test(`${format}: any offset poll is answered as a broker holding the whole partition answers`, async () => {
    await withScenario(format, async (s, first) => {
      const last = s.records.at(-1)!.lastOffset;
      const all = s.records;
      // One set of deps for every run: the later runs forward on the hints the earlier ones left.
      const planDeps = { ...deps(s), hints: new LocalHints(60_000) };
      await fc.assert(
        fc.asyncProperty(
          fc.bigInt({ min: 0n, max: last }),
          fc.integer({ min: 1, max: 60 }),
          async (from, count) => {
            const req = offsetPoll(from, count);
            const { session, calls } = standIn(format, s, first, { forwarded: req });
            const result = await servePoll(planDeps, session, req);
            try {
              const whole = brokerAnswer(format, all, last, from, count);
              if (result.fromTierd) {
                assert.equal(hex(result.frame!), hex(whole), `from ${from}, count ${count}`);
                assert.deepEqual(calls.sent, [], "nothing of the broker's answer was passed on");
              } else {
                assert.ok(from >= first, `${from} was forwarded, the broker starts at ${first}`);
                assert.equal(calls.forwarded, 1);
                assert.equal(result.frame, undefined, "the broker's answer was passed on");
                assert.equal(calls.sent.length, 1);
                assert.equal(result.bytes, calls.sent[0].length);
                const header = format === "iggy-0.8" ? 8 : 256;
                assert.equal(
                  hex(calls.sent[0].subarray(header)),
                  hex(whole),
                  "the broker's answer",
                );
              }
            } finally {
              result.release();
            }
          },
        ),
        { numRuns: 40 },
      );
    });
  });

  Deno.test(`${format}: a stale hint is caught by the broker's answer and the poll is planned afresh`, async () => {
    await withScenario(format, async (s, first) => {
      const req = offsetPoll(0n, 5);
      const { session, calls } = standIn(format, s, first, { forwarded: req });
      const hints = new LocalHints(60_000);
      // A hint from before the eviction: every offset the broker's.
      hints.set({ ...s.ids }, 0n, 0);
      const result = await servePoll({ ...deps(s), hints }, session, req);
      try {
        assert.equal(calls.forwarded, 1, "forwarded on the hint first");
        assert.deepEqual(
          calls.sent,
          [],
          "the broker's answer from a later offset was not passed on",
        );
        assert.ok(result.fromTierd, "then answered from the bucket");
        const whole = brokerAnswer(format, s.records, s.records.at(-1)!.lastOffset, 0n, 5);
        assert.equal(hex(result.frame!), hex(whole));
      } finally {
        result.release();
      }
    });
  });

  Deno.test(`${format}: auto-commit stores the last offset answered, through the session`, async () => {
    await withScenario(format, async (s, first) => {
      const { session, calls } = standIn(format, s, first);
      const result = await servePoll(deps(s), session, offsetPoll(0n, 7, true));
      result.release();
      assert.ok(result.fromTierd);
      assert.deepEqual(calls.stored, [6n]);
    });
  });

  Deno.test(`${format}: a store outage is a transient failure, never a forward`, async () => {
    await withScenario(format, async (s, first) => {
      const { session, calls } = standIn(format, s, first);
      s.store.setFaults({ unavailable: true });
      const err = await servePoll(deps(s), session, offsetPoll(0n, 10)).then(
        () => assert.fail("answered during an outage"),
        (e) => e,
      );
      assert.ok(isTransient(err), String(err));
      assert.equal(calls.forwarded, 0);
      assert.equal(
        statusOf(err, format),
        format === "iggy-0.9" ? IGGY_ERROR.TRANSIENT_NOT_ACCEPTED : 12001,
      );
    });
  });

  Deno.test(`${format}: a session the broker refuses reads nothing from the store`, async () => {
    await withScenario(format, async (s, first) => {
      const { session } = standIn(format, s, first, { refuse: IGGY_ERROR.UNAUTHORIZED });
      s.store.resetCounts();
      await assert.rejects(
        servePoll(deps(s), session, offsetPoll(0n, 10)),
        (e) => e instanceof BrokerStatus && e.status === IGGY_ERROR.UNAUTHORIZED,
      );
      assert.equal(s.store.requestCount("get"), 0, "no GET of the store");
    });
  });

  Deno.test(`${format}: a group member without a partition gets the broker's own answer`, async () => {
    await withScenario(format, async (s, first) => {
      const { session, calls } = standIn(format, s, first, { groupPartition: 0 });
      const req: PollMessagesRequest = {
        ...offsetPoll(0n, 10, true),
        consumer: { kind: "consumer_group", id: { kind: "name", name: "g" } },
        partitionId: undefined,
        strategy: { kind: "next", value: 0n },
      };
      const result = await servePoll(deps(s), session, req);
      assert.equal(result.fromTierd, false);
      assert.equal(calls.forwarded, 1);
      assert.deepEqual(calls.stored, []);
    });
  });
}
